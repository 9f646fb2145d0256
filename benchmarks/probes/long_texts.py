"""Probe: the bulk path (`encode_texts`) on texts longer than a student's cache, against the stream and the teacher.

A TOVA student's parallel form runs only until a cache could be full; past `num_slots` tokens `forward` runs the
evicting form (layer by layer, TOVA's choice of slot step by step; before session 60 it stepped the whole model one
token at a time in PyTorch). For each saved student, fp32 and int8, at each length: `encode_texts` of one text and
of a batch of 64 (ms per text), and a `StreamingEncoder` typing the same text in one call (int8: the fused step the
keystrokes use). An int8 student's bulk path reads such texts through the fused step; `int8_modules_*` times the
same calls through its int8 PyTorch modules instead (the evicting form), the route it does not take. The teacher
encodes the same texts in the same run (it cuts at 256 tokens, so past that it does less work). A probe for deciding
the bulk path's routes (the JSON it writes is quoted in docs/experiments.md), not a benchmark figure.

    python benchmarks/probes/long_texts.py outputs/shape-l2-s32 --output benchmarks/probes/results/long-texts.json
"""

import argparse
import json
import statistics
import sys
from pathlib import Path
from unittest import mock

import torch
from transformers import AutoTokenizer

from tf2rnn_hf import TF2RNNModel
from tf2rnn_hf.data.teacher import Teacher
from tf2rnn_hf.inference.encode import encode_texts
from tf2rnn_hf.inference.quantization import quantize_int8
from tf2rnn_hf.inference.streaming import StreamingEncoder

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from run import text_of_tokens, timed  # noqa: E402


def _ms(call, repeat: int) -> float:
    """Median wall time of `call` in ms, after one warm-up call (`run.timed`)."""
    return statistics.median(timed(call, repeat)) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("students", nargs="+")
    parser.add_argument("--tokens", type=int, nargs="+", default=[32, 64, 256, 1024])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--output", default=None)
    args = parser.parse_args()
    torch.set_flush_denormal(True)
    teacher = Teacher("built-in")
    results = {"threads": torch.get_num_threads(), "batch": args.batch, "students": {}, "teacher": {}}
    for path in args.students:
        tokenizer = AutoTokenizer.from_pretrained(path)
        models = {"fp32": TF2RNNModel.from_pretrained(path).eval(),
                  "int8": quantize_int8(TF2RNNModel.from_pretrained(path).eval(), inplace=True)}
        name = Path(path).name
        results["students"][name] = {"num_slots": models["fp32"].config.num_slots}
        for n in args.tokens:
            text = text_of_tokens(tokenizer, n)
            row = {}
            for precision, model in models.items():
                row[f"{precision}_one_ms"] = _ms(lambda: encode_texts(model, tokenizer, [text]), args.repeat)
                row[f"{precision}_batch_ms_per_text"] = _ms(lambda: encode_texts(model, tokenizer, [text] * args.batch),
                                                            1) / args.batch
            with mock.patch("tf2rnn_hf.inference.encode._fused_tova", return_value=False):
                model = models["int8"]
                row["int8_modules_one_ms"] = _ms(lambda: encode_texts(model, tokenizer, [text]), args.repeat)
                row["int8_modules_batch_ms_per_text"] = _ms(
                    lambda: encode_texts(model, tokenizer, [text] * args.batch), 1) / args.batch
            row["int8_stream_ms"] = _ms(lambda: StreamingEncoder(models["int8"], tokenizer).type(text), args.repeat)
            results["students"][name][str(n)] = row
            if str(n) not in results["teacher"]:
                results["teacher"][str(n)] = {
                    "one_ms": _ms(lambda: teacher.encode([text]), args.repeat),
                    "batch_ms_per_text": _ms(lambda: teacher.encode([text] * args.batch), 1) / args.batch}
            print(name, n, {k: round(v, 2) for k, v in row.items()}, "teacher",
                  {k: round(v, 2) for k, v in results["teacher"][str(n)].items()}, flush=True)
    if args.output:
        Path(args.output).write_text(json.dumps(results, indent=1))
        print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
