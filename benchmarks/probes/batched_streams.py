"""Probe: many concurrent streams stepped together (`BatchStreamingEncoder`), int8, for saved students side by side.

`benchmarks/run.py`'s concurrent-streams section for several students in one run: each of N streams holds a
64-token prefix and types one letter; updates per second against the teacher re-encoding every stream's prefix
(its restart throughput, measured in the same run). A probe for the batched path of inherited students, whose
0.4 MB caches a batched call gathers and splits at every keystroke; `benchmarks/run.py --model` measures the
released student's whole profile.

    python benchmarks/probes/batched_streams.py outputs/tf2rnn-minilm outputs/shape-gru768 \
        --output benchmarks/probes/results/batched-streams.json
"""

import argparse
import json
import sys
import time
from pathlib import Path

import torch
from transformers import AutoTokenizer

from tf2rnn_hf import TF2RNNModel
from tf2rnn_hf.data.teacher import Teacher
from tf2rnn_hf.inference.quantization import quantize_int8

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from run import bench_streams  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+")
    parser.add_argument("--counts", type=int, nargs="+", default=[1, 64, 1024])
    parser.add_argument("--output", default="benchmarks/probes/results/batched-streams.json")
    args = parser.parse_args()
    torch.set_num_threads(2)
    torch.set_flush_denormal(True)
    teacher = Teacher("built-in")
    results = {"counts": args.counts, "students": {}}
    t0 = time.perf_counter()
    for path in args.models:
        model = TF2RNNModel.from_pretrained(path).eval()
        tokenizer = AutoTokenizer.from_pretrained(path)
        rows = bench_streams({"int8": quantize_int8(model)}, tokenizer, teacher, tuple(args.counts))
        results["students"][Path(path).name] = rows
        for row in rows:
            print(Path(path).name, row["streams"], f"{row['student_int8_updates_per_s']:.0f}/s",
                  f"{row['ratio_int8']:.1f}x", flush=True)
    results["seconds"] = time.perf_counter() - t0
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(results, indent=1))
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
