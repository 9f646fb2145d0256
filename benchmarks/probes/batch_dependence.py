"""Probe: does a text's bulk embedding depend on the other texts of its batch?

For a saved student, fp32 and int8: `encode_texts` of each text alone against the same text inside one batch of all
of them (the demo index's 40 sentences, and each repeated with a long text appended, past the cache). fp32 should
agree to float rounding. The int8 modules quantise each Linear's input per call with one scale for the whole
tensor (PyTorch's dynamic quantisation), so a text's vector may move with its batch; the fused step (one text
alone past the cache, and every keystroke) quantises per token. A probe for deciding what the int8 bulk path
should guarantee (the JSON it writes is quoted in docs/experiments.md), not a benchmark figure.

    python benchmarks/probes/batch_dependence.py outputs/shape-l2-s32 --output benchmarks/probes/results/batch-dependence.json
"""

import argparse
import json
from importlib import resources
from pathlib import Path

import torch
import torch.nn.functional as F
from transformers import AutoTokenizer

from tf2rnn_hf import TF2RNNModel
from tf2rnn_hf.inference.encode import encode_texts
from tf2rnn_hf.inference.quantization import quantize_int8


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("student")
    parser.add_argument("--output", default=None)
    args = parser.parse_args()
    tokenizer = AutoTokenizer.from_pretrained(args.student)
    sentences = resources.files("tf2rnn_hf.data").joinpath("demo_index.txt").read_text().splitlines()
    sentences = [s for s in sentences if s.strip()]
    long = " ".join(sentences)  # past a 32-slot cache
    sets = {"sentences": sentences, "sentences_then_a_long_text": [f"{s} {long}" for s in sentences[:8]]}
    models = {"fp32": TF2RNNModel.from_pretrained(args.student).eval(),
              "int8": quantize_int8(TF2RNNModel.from_pretrained(args.student).eval(), inplace=True)}
    out = {"student": Path(args.student).name, "num_slots": models["fp32"].config.num_slots, "sets": {}}
    for name, texts in sets.items():
        tokens = [len(tokenizer(t)["input_ids"]) for t in texts]
        row = {"texts": len(texts), "tokens_min": min(tokens), "tokens_max": max(tokens)}
        for precision, model in models.items():
            alone = torch.stack([encode_texts(model, tokenizer, text) for text in texts])
            together = encode_texts(model, tokenizer, texts)
            cosine = F.cosine_similarity(alone, together)
            row[f"{precision}_min_cosine"] = cosine.min().item()
            row[f"{precision}_mean_cosine"] = cosine.mean().item()
        out["sets"][name] = row
        print(name, {k: round(v, 6) if isinstance(v, float) else v for k, v in row.items()}, flush=True)
    if args.output:
        Path(args.output).write_text(json.dumps(out, indent=1))
        print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
