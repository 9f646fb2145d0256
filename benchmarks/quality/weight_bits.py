#!/usr/bin/env python
"""What fewer weight bits cost a student's fidelity, before anyone writes the kernel for them.

    python benchmarks/quality/weight_bits.py [MODEL [SCHEME ...]] > benchmarks/quality/results/weight-bits.json
    python benchmarks/quality/weight_bits.py outputs/student-tova-l6-sampled-60-lr3e-4-grouped-posweight-final4 \
        > benchmarks/quality/results/weight-bits-card.json

A keystroke of the six-layer inherited student is bound by the int8 weights it reads (10.6 MB; docs/experiments.md),
so 4-bit weights would halve its main cost. This rounds every `nn.Linear` weight of MODEL (default: the inherited
card's student) to symmetric int-N, one scale per output row or per group of columns, runs the student in
PyTorch on the evaluation's 1,000 held-out texts sampled across sources (`tf2rnn evaluate`'s fidelity rows, the
same trajectories) and reports final cosine and NA@10 to the teacher, and cosine to the unrounded student.
Weights only: activations stay fp32 (the fused int8 kernel also rounds them, which costs little: 0.998 to fp32).
"""

import json
import sys
from typing import Dict, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from tf2rnn_hf.data import trajectories
from tf2rnn_hf.data.corpus import load_texts
from tf2rnn_hf.data.teacher import Teacher, teacher_name_of
from tf2rnn_hf.distill.quantization_aware import clip_ratios, round_weight
from tf2rnn_hf.evaluation.fidelity import fidelity, rows_to_tensors, student_trajectories
from tf2rnn_hf.models import TF2RNNModel

MODEL = "outputs/student-tova-l6-sampled-90-lr3e-4-grouped-final4"
FFN = ("up", "down")
CELL = ("query", "key", "value", "out") + FFN  # an inherited layer's products: all but the readout
# name: (bits, columns per scale (None: the whole row), the layers it rounds to those bits (None: all; the rest stay
# at int8 per row, as the fused kernel holds them), whether each scale is clipped by `clip_ratios`)
SCHEMES = {"fp32": (32, None, None, False), "int8 per row": (8, None, None, False),
           "int7 per row": (7, None, None, False), "int4 per row": (4, None, None, False),
           "int4 per 128 columns": (4, 128, None, False), "int4 per 64 columns": (4, 64, None, False),
           "int4 per 32 columns": (4, 32, None, False),
           "int4 per 32 columns, feed-forward only": (4, 32, FFN, False),
           "int4 per row, clipped": (4, None, None, True),
           "int4 per row, readout int8": (4, None, CELL, False),
           "int4 per row, clipped, readout int8": (4, None, CELL, True)}
ATTENTION = ("query", "key", "value")  # one product in the fused step (qkv): int4 only all three together
for kept, names in (("attention", ATTENTION), ("out", ("out",)), ("up", ("up",)), ("down", ("down",))):
    # The fused step reads each product (qkv, out, up, down, readout) as int4 only where every layer's weight is on
    # the 4-bit grid, and as int8 otherwise: what leaving one product at int8 buys, for its bytes.
    SCHEMES[f"int4 per row, readout and {kept} int8"] = (4, None, tuple(n for n in CELL if n not in names), False)


@torch.no_grad()
def main(model_path: str = MODEL, n_texts: int = 1000, schemes: Sequence[str] = ()) -> Dict[str, dict]:
    """Each scheme of `schemes` (default: all of SCHEMES; fp32 always, first: the reference) on MODEL's held-out
    fidelity."""
    unknown = [s for s in schemes if s not in SCHEMES]
    if unknown:
        raise ValueError(f"Unknown schemes {unknown}; choose among {list(SCHEMES)}.")
    chosen = {name: SCHEMES[name] for name in SCHEMES if not schemes or name == "fp32" or name in schemes}
    model = TF2RNNModel.from_pretrained(model_path).eval()
    teacher = Teacher(teacher_name_of(model.config.teacher_name_or_path))
    texts = load_texts("offline", "heldout", limit=n_texts, shuffle_seed=0)["text"]
    settings = trajectories.TrajectorySettings(max_tokens=64)
    rows = rows_to_tensors(trajectories.load(trajectories.generate(texts, teacher, settings, progress=False)))
    linears = {name: m for name, m in model.named_modules() if isinstance(m, nn.Linear)}
    original = {name: m.weight.detach().clone() for name, m in linears.items()}
    result, reference = {}, None
    for scheme, (bits, group, only, clip) in chosen.items():
        for name, m in linears.items():
            w = original[name]
            if only is None or name.rsplit(".", 1)[-1] in only:
                m.weight.copy_(round_weight(w, bits, group, clip_ratios(w, bits, group) if clip else None))
            else:
                m.weight.copy_(round_weight(w, 8))
        predicted = student_trajectories(model, rows)
        finals = torch.stack([p[-1] for p in predicted])
        reference = finals if reference is None else reference
        scores = fidelity(predicted, rows)
        result[scheme] = {"final_cosine": round(scores["final_cosine"], 4),
                          "neighbour_agreement@10": round(scores["neighbour_agreement@10"], 4),
                          "cosine_to_fp32": round(float(F.cosine_similarity(finals, reference).mean()), 4)}
    return {"model": model_path, "texts": len(rows), "schemes": result}


if __name__ == "__main__":
    json.dump(main(*sys.argv[1:2], schemes=sys.argv[2:]), sys.stdout, indent=1)
    print()
