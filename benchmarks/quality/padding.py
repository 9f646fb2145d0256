#!/usr/bin/env python
"""How much of a training batch is padding, with random batches and with length-grouped ones.

    python benchmarks/quality/padding.py > benchmarks/quality/results/padding.json

For the training texts of student.sh's rows (the seven-minute rows: the first 12,000 texts, all WordNet
glosses; the scale rows: 30,000 sampled across sources with seed 0), it tokenizes each text as the trajectories do
(the teacher's tokenizer, at most `TrajectorySettings().max_tokens`), draws one epoch of batches of 64 with PyTorch's
`RandomSampler` and with transformers' `LengthGroupedSampler` (what `--train_sampling_strategy
group_by_length` uses), pads each batch to its longest text as `TrajectoryCollator` does, and reports
padded / real tokens (what every linear layer pays) and padded / real token pairs (what attention pays).
"""

import json
import sys

import torch
from transformers.trainer_pt_utils import LengthGroupedSampler

from tf2rnn_hf.data.corpus import load_texts
from tf2rnn_hf.data.teacher import Teacher
from tf2rnn_hf.data.trajectories import TrajectorySettings

BATCH = 64  # student.sh's per_device_train_batch_size
MAX_TOKENS = TrajectorySettings().max_tokens  # the trajectories' truncation, which every row trained with
DRAWS = {"first 12,000 texts (WordNet glosses)": dict(limit=12000),
         "30,000 texts sampled across sources (seed 0)": dict(limit=30000, shuffle_seed=0)}


def waste(lengths: torch.Tensor, order: list) -> dict:
    """Padded over real tokens, and over real token pairs, for batches of BATCH taken in `order`."""
    tokens = pairs = 0
    for start in range(0, len(order), BATCH):
        batch = lengths[order[start:start + BATCH]]
        longest = int(batch.max())
        tokens += longest * len(batch)
        pairs += longest * longest * len(batch)
    return {"tokens": round(tokens / int(lengths.sum()), 3), "pairs": round(pairs / int((lengths ** 2).sum()), 3)}


def main() -> dict:
    tokenizer = Teacher().tokenizer
    out = {"batch_size": BATCH, "max_tokens": MAX_TOKENS}
    for name, draw in DRAWS.items():
        texts = load_texts("offline", "train", "text", draw["limit"], shuffle_seed=draw.get("shuffle_seed"))["text"]
        lengths = torch.tensor([min(len(ids), MAX_TOKENS) for ids in
                                tokenizer(list(texts), add_special_tokens=False)["input_ids"]])
        generator = torch.Generator().manual_seed(0)
        random_order = torch.randperm(len(lengths), generator=generator).tolist()
        grouped_order = list(LengthGroupedSampler(BATCH, lengths=lengths.tolist(), generator=generator))
        out[name] = {"texts": len(lengths), "mean_tokens": round(float(lengths.float().mean()), 2),
                     "p99_tokens": int(lengths.float().quantile(0.99)),
                     "random": waste(lengths, random_order), "group_by_length": waste(lengths, grouped_order)}
    return out


if __name__ == "__main__":
    json.dump(main(), sys.stdout, indent=1)
    print()
