"""Probe: what one int8 keystroke spends outside the fused step, for saved students of several depths.

For each student, at an n-token prefix on one thread (or `--threads 2`): the benchmark's keystroke (`benchmarks/run.py`'s
`aligned_keystroker`: type a letter, keep the word short by deletes), the fused steps that keystroke ran (counted,
and timed on their own by wrapping the kernel's entry, `step_live` or `__call__`), and the word's tokenisation alone. What is left is the
stream's own Python: the floor that no smaller student removes. Then the same keystrokes with every native call a
no-op: the stream, its tokenising and the kernel's wrapper alone, warm (`python_alone_ms`); against those parts inside
the keystroke it shows what the step's streamed weights cost them. A probe for deciding what to speed up (the JSON it
writes is quoted in docs/experiments.md), not a benchmark figure: `benchmarks/run.py` measures the ratios.

    python benchmarks/probes/keystroke_overhead.py outputs/shape-gru768 outputs/shape-l1 outputs/shape-l6 \
        --output benchmarks/probes/results/keystroke-overhead.json
"""

import argparse
import contextlib
import json
import statistics
import sys
import time
from pathlib import Path

import torch
from transformers import AutoTokenizer

from tf2rnn_hf import TF2RNNModel
from tf2rnn_hf.inference.quantization import quantize_int8

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from run import aligned_keystroker  # noqa: E402


class _Timed:
    """Wraps a callable (a kernel entry or a native function): counts its calls and adds up their time."""

    def __init__(self, fn):
        self.fn, self.calls, self.seconds = fn, 0, 0.0

    def __call__(self, *args, **kwargs):
        start = time.perf_counter()
        try:
            return self.fn(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - start
            self.calls += 1


def _noop(*args) -> None:
    """Stands in for a native call while the stream's Python is timed alone."""


@contextlib.contextmanager
def _natives_replaced(kernel, names, replace):
    """Inside: the library's entries `names` replaced by `replace(entry)`, and the kernel's bound native step by its
    entry's replacement (a tova kernel binds it when built). Yields the replacements. The library is shared by every
    kernel of the process, so they are put back whatever happens."""
    saved = {name: getattr(kernel.lib, name) for name in names}
    new = {name: replace(fn) for name, fn in saved.items()}
    bound = getattr(kernel, "_native", None)
    try:
        for name, fn in new.items():
            setattr(kernel.lib, name, fn)
        if bound is not None:
            kernel._native = next(new[name] for name, fn in saved.items() if fn is bound)
        yield new
    finally:
        for name, fn in saved.items():
            setattr(kernel.lib, name, fn)
        if bound is not None:
            kernel._native = bound


def _seconds_per_call(fn, calls: int, rounds: int) -> list:
    """Each round's mean seconds per call of `fn`, over `calls` calls."""
    out = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        out.append((time.perf_counter() - start) / calls)
    return out


def probe(path: str, n_tokens: int, keys: int, rounds: int) -> dict:
    model = TF2RNNModel.from_pretrained(path).eval()
    weights = sum(p.numel() for n, p in model.named_parameters() if not n.startswith("embeddings."))
    model = quantize_int8(model)
    tokenizer = AutoTokenizer.from_pretrained(path)
    kernel = model.step_kernel
    key = aligned_keystroker(model, tokenizer, n_tokens)
    for _ in range(200):
        key()
    # The native call alone, and the kernel's Python entry around it (GRU streams call the kernel whole; tova
    # streams on a live cache call its step_live).
    native = [name for name in ("tf2rnn_gru_step", "tf2rnn_tova_step", "tf2rnn_tova_open_step")
              if hasattr(kernel.lib, name)]
    if hasattr(kernel, "step_live"):
        entry = kernel.step_live = _Timed(kernel.step_live)
    else:
        entry = model.step_kernel = _Timed(kernel)
    per_key, per_entry, per_native, steps = [], [], [], []
    with _natives_replaced(kernel, native, _Timed) as timers:
        for _ in range(rounds):
            for t in (entry, *timers.values()):
                t.calls, t.seconds = 0, 0.0
            start = time.perf_counter()
            for _ in range(keys):
                key()
            per_key.append((time.perf_counter() - start) / keys)
            per_entry.append(entry.seconds / keys)
            per_native.append(sum(t.seconds for t in timers.values()) / keys)
            steps.append(entry.calls / keys)
    # The keystroke's Python alone: the same keystrokes with every native call a no-op (the states they leave are
    # garbage, only timed), against its stream, tokenising and wrapper inside the keystroke: what the step's streamed
    # weights cost that Python in cache misses.
    quiet = [name for name in (*native, "tf2rnn_tova_restore", "tf2rnn_pool_prewake") if hasattr(kernel.lib, name)]
    with _natives_replaced(kernel, quiet, lambda fn: _noop):
        alone = _seconds_per_call(key, keys, rounds)
    word = "abcdefgh"  # what the keystrokes tokenise: the current word, up to eight letters
    backend = getattr(tokenizer, "backend_tokenizer", None)
    encode = (lambda: backend.encode(word, add_special_tokens=False)) if backend else \
        (lambda: tokenizer(word, add_special_tokens=False))
    tok = _seconds_per_call(encode, keys, rounds)
    keystroke, entry_ms, native_ms, tokenise = (1e3 * statistics.median(v)
                                                for v in (per_key, per_entry, per_native, tok))
    return {"keystroke_ms": keystroke, "native_step_ms": native_ms, "step_wrapper_ms": entry_ms - native_ms,
            "fused_steps_per_keystroke": statistics.median(steps), "tokenise_ms": tokenise,
            "stream_python_ms": keystroke - entry_ms - tokenise,
            "python_alone_ms": 1e3 * statistics.median(alone),
            "parameters_without_token_table": weights}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("students", nargs="+")
    parser.add_argument("--tokens", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--keys", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="threads a keystroke may use (1 or 2)")
    parser.add_argument("--output", default=None)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)
    out = {"threads": args.threads, "keys_per_round": args.keys, "rounds": args.rounds, "students": {}}
    for path in args.students:
        for n in args.tokens:
            r = probe(path, n, args.keys, args.rounds)
            out["students"].setdefault(Path(path).name, {})[str(n)] = r
            print(Path(path).name, n, {k: round(v, 4) for k, v in r.items()})
    if args.output:
        Path(args.output).write_text(json.dumps(out, indent=1))
        print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
