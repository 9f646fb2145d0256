"""Probe: where one fused int8 keystroke of a `tova_attention` student goes, by section of `tova_step.c`.

Builds a copy of the kernel with rdtsc counters around its sections (in a temporary folder; the package's
kernel is untouched), runs it on a saved student at several prefix lengths and prints each section's share, and
times the step four ways: into fresh tensors (what `model.step` does), on a live cache with one record (what a
stream's keystroke does, `step_live`), into buffers kept between calls, and in place (one row per layer written).
Causal students only: the sections are `tf2rnn_tova_step`'s. A probe for deciding what to speed up, not a benchmark
figure.

    python benchmarks/probes/kernel_sections.py outputs/student-tova-l6-sampled-60-lr3e-4-grouped-posweight-final4
"""

import argparse
import ctypes
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from tf2rnn_hf import TF2RNNModel
from tf2rnn_hf.inference.kernels import step_kernel_for

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from run import summary, timed  # noqa: E402

KERNELS = Path(__file__).resolve().parents[2] / "src" / "tf2rnn_hf" / "inference" / "kernels"
SECTIONS = ("qkv gemv", "attention", "eviction + state copy", "out gemv + norm + up gemv", "gelu", "down gemv",
            "pooling + readout")
# (text to find, what goes before it): a counter starts (TIC) or stops (TOC) there. The probe calls the one-stream
# entry, so the marks inside tova_step_chunk's per-stream loops count one stream.
MARKS = (("        for (int j = 0; j < n; ++j) sx[j] = quantize_u8(x + (int64_t)j * H, H, q + (int64_t)j * H);\n"
          "        gemv_split(two, p->w_qkv", "TIC(a) "),
         ("            const float *keys = in[j][3 * l], *values", "TOC(a, 0) TIC(b)\n"),
         ("            /* TOVA: a full cache", "TOC(b, 1) TIC(c)\n"),
         ("        }\n        finish_layer(p, two, l, n, x, mixed, q, tmp, up);", "    TOC(c, 2)\n"),
         ("    for (int j = 0; j < n; ++j) sc[j] = quantize_u8(mixed", "TIC(d)\n"),
         ("    for (int j = 0; j < n; ++j) gelu(up", "TOC(d, 3) TIC(e)\n"),
         ("    for (int j = 0; j < n; ++j) sc[j] = quantize_u8(up", "TOC(e, 4) TIC(f)\n"),
         ("    add_norm(x, tmp, n, H, p->norm2_w", "TOC(f, 5)\n"),
         ("    for (int j = 0; j < n; ++j) {\n        /* Running (weighted) mean", "TIC(g)\n"),
         ("    }\n}\n\n/* One causal keystroke.", "    TOC(g, 6)\n"))


def instrumented(folder: Path) -> ctypes.CDLL:
    src = (KERNELS / "tova_step.c").read_text()
    src = src.replace('#include "int8.h"', '#include "int8.h"\n#include <x86intrin.h>\nunsigned long long T[8];\n'
                      "#define TIC(i) unsigned long long _t##i = __rdtsc();\n#define TOC(i, k) T[k] += __rdtsc() - _t##i;\n")
    for anchor, mark in MARKS:
        if src.count(anchor) != 1:
            raise SystemExit(f"tova_step.c changed: cannot place a counter before {anchor.strip()!r}")
        src = src.replace(anchor, mark + anchor)
    (folder / "tova_step.c").write_text(src)
    for name in ("int8.h", "pool.h", "pool.c"):
        shutil.copy(KERNELS / name, folder / name)
    subprocess.run(["cc", "-O3", "-march=native", "-shared", "-fPIC", "-pthread", str(folder / "tova_step.c"),
                    str(folder / "pool.c"), "-o",
                    str(folder / "libprobe.so"), "-lm"], check=True)
    return ctypes.CDLL(str(folder / "libprobe.so"))


def median_us(fn, calls: int = 600) -> float:
    for _ in range(20):  # past the first calls' cold caches
        fn()
    return 1e3 * summary(timed(fn, calls))["median_ms"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--tokens", default="16,64,200")
    parser.add_argument("--threads", type=int, default=1, help="1, or 2: the step's products split with a helper")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = TF2RNNModel.from_pretrained(args.model).eval()
    kernel = step_kernel_for(model)
    if kernel is None or model.config.cell_type != "tova_attention":
        raise SystemExit("needs a tova_attention student and a C compiler")
    if kernel.open > 1:  # its state holds an open block that the causal entry would write past
        raise SystemExit("times the causal step (tf2rnn_tova_step): a student with open tokens takes "
                         "tf2rnn_tova_open_step, which this probe does not instrument")
    step = kernel.lib.tf2rnn_tova_step
    with tempfile.TemporaryDirectory() as folder, torch.inference_mode():
        probe = instrumented(Path(folder))
        probe.tf2rnn_tova_step.argtypes, probe.tf2rnn_tova_step.restype = step.argtypes, None
        probe.tf2rnn_set_threads(args.threads)
        counters = (ctypes.c_ulonglong * 8).in_dll(probe, "T")
        for n in map(int, args.tokens.split(",")):
            state = model.init_state(1)
            for i in range(n):
                _, state = kernel(1000 + i, state)
            old = [t.contiguous() for t in state.cell_state]
            kept, work = [torch.empty_like(t) for t in old], [t.clone() for t in old]
            ptrs = [kernel._pointers(*(t.data_ptr() for t in ts)) for ts in (old, kept, work)]
            tsum, emb = state.token_sum.contiguous(), torch.empty(1, kernel.output_size)
            tsum_out, seen = tsum.clone(), state.seen_tokens + 1

            def call(lib, src, dst):
                return lambda: lib(kernel._params_ref, 2000, src, dst, None, None, None, tsum.data_ptr(), seen.data_ptr(),
                                   tsum_out.data_ptr(), emb.data_ptr())
            kv = torch.stack([torch.stack(old[3 * layer:3 * layer + 2]) for layer in range(kernel.layers)])
            live, small = kernel.cache_pointers(kv), [old[i].data_ptr() for i in kernel.small]
            width = kernel.rows_written(int(old[3 * kernel.layers + 1]) if kernel.open > 1 else 0)
            overwrites = int(old[-2]) + width > kv.shape[-2]
            times = {"fresh tensors": median_us(lambda: kernel(2000, state)),
                     "live": median_us(lambda: kernel.step_live(2000, live, small, tsum.data_ptr(),
                                                                int(state.seen_tokens), width, overwrites)),
                     "kept buffers": median_us(call(step, ptrs[0], ptrs[1])),
                     "in place": median_us(call(step, ptrs[2], ptrs[2]))}
            for i in range(8):
                counters[i] = 0
            for _ in range(500):
                call(probe.tf2rnn_tova_step, ptrs[0], ptrs[1])()
            total = sum(counters[i] for i in range(len(SECTIONS)))
            shares = ", ".join(f"{name} {counters[i] / total:.0%}" for i, name in enumerate(SECTIONS))
            print(f"{n} tokens: " + ", ".join(f"{k} {v:.0f} us" for k, v in times.items()) + f"; sections: {shares}")


if __name__ == "__main__":
    main()
