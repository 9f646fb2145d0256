"""Probe: a keystroke back to back, and a typist's keystroke after an idle gap, for saved students.

`benchmarks/run.py` times keystrokes in blocks of 25 (warm). A typist's keystrokes come ~100 ms apart, with the
process idle between them, and there a keystroke pays for caches and predictors gone cold: on the 2-core VMs of
this project several times the warm keystroke. For each student and prefix length, the median of `--keys` warm
keystrokes and of `--idle_keys` each after `--gap_ms` of sleep (run.py's keystroker: type a letter, keep the word
short by deletes), and where the kernel counts it (`tf2rnn_helper_waited_ns`) how long a keystroke waited for the
helper thread's part. Run each commit's code in turn (`PYTHONPATH=<worktree>/src`) to compare them; not a benchmark
figure (run.py's `--idle` measures the teacher beside it).

    python benchmarks/probes/idle_keystroke.py outputs/shape-l1 --output benchmarks/probes/results/idle.json
"""

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch
from transformers import AutoTokenizer

import tf2rnn_hf
from tf2rnn_hf import TF2RNNModel
from tf2rnn_hf.inference.kernels import load_library
from tf2rnn_hf.inference.quantization import quantize_int8

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from run import aligned_keystroker  # noqa: E402


def keystrokes(key, count: int, gap_s: float, waited) -> dict:
    """Median keystroke (us) over `count` keystrokes, each after `gap_s` of sleep, and the helper wait per keystroke."""
    times, start_wait = [], waited()
    for _ in range(count):
        if gap_s:
            time.sleep(gap_s)
        start = time.perf_counter()
        key()
        times.append(time.perf_counter() - start)
    wait = (waited() - start_wait) / count / 1e3 if start_wait is not None else None
    return {"keystroke_us": 1e6 * statistics.median(times), "helper_wait_us": wait}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("students", nargs="+")
    parser.add_argument("--tokens", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--keys", type=int, default=3000, help="warm keystrokes, back to back")
    parser.add_argument("--idle_keys", type=int, default=150, help="keystrokes each after an idle gap")
    parser.add_argument("--gap_ms", type=float, default=50.0)
    parser.add_argument("--output", default=None)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)
    lib = load_library()
    # Absent from the kernels before it was counted: then no wait is reported.
    read_wait = getattr(lib, "tf2rnn_helper_waited_ns", None) or (lambda: None)
    out = {"code": str(Path(tf2rnn_hf.__file__).parents[1]), "threads": args.threads, "gap_ms": args.gap_ms,
           "students": {}}
    for path in args.students:
        model = quantize_int8(TF2RNNModel.from_pretrained(path).eval())
        tokenizer = AutoTokenizer.from_pretrained(path)
        for n in args.tokens:
            key = aligned_keystroker(model, tokenizer, n)
            for _ in range(300):
                key()
            out["students"].setdefault(Path(path).name, {})[str(n)] = {
                "warm": keystrokes(key, args.keys, 0.0, read_wait),
                "idle": keystrokes(key, args.idle_keys, args.gap_ms / 1e3, read_wait)}
    text = json.dumps(out, indent=1)
    print(text)
    if args.output:
        Path(args.output).write_text(text + "\n")


if __name__ == "__main__":
    main()
