"""Probe: how far a trained student that inherits the teacher moved from its start, weight by weight.

The start is rebuilt as `build_student` builds it (the built-in teacher's layers, evenly spaced unless
--teacher_layers names them), and each weight's drift is ||w - w0|| / ||w0||. The left-out-source gap grew with the
budget; this is the figure that grew with it, and the one L2-SP (stage_variants.py's `decay-to-init`) holds down.

    python benchmarks/probes/weight_drift.py outputs/STUDENT [outputs/STUDENT ...] --output results/NAME.json
"""

import argparse
import json
from typing import Dict, Optional, Sequence

import torch

from tf2rnn_hf.distill import build_student
from tf2rnn_hf.models import TF2RNNModel


def drift(folder: str, teacher_layers: Optional[Sequence[int]] = None) -> Dict[str, float]:
    """Relative distance of each weight matrix of the student in `folder` from its inherited start."""
    student = TF2RNNModel.from_pretrained(folder)
    config = student.config
    start, _ = build_student(cell_type=config.cell_type, num_hidden_layers=config.num_hidden_layers,
                             teacher_layers=teacher_layers)
    initial = {name.removeprefix("model."): p for name, p in start.state_dict().items()}
    out = {}
    for name, weight in student.state_dict().items():
        w0 = initial.get(name)
        if w0 is None or w0.shape != weight.shape or weight.dim() < 2 or not w0.float().norm():
            continue  # matrices only: biases and norms are small, and their relative change says little
        out[name] = round(float((weight.float() - w0.float()).norm() / w0.float().norm()), 4)
    if not out:
        raise ValueError(f"{folder}: no weight matches its rebuilt start; is it a student that inherits the teacher?")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("students", nargs="+")
    parser.add_argument("--teacher_layers", type=int, nargs="*", default=None)
    parser.add_argument("--output", required=True)
    args = parser.parse_args()
    results = {}
    for folder in args.students:
        per_weight = drift(folder, args.teacher_layers)
        values = list(per_weight.values())
        results[folder] = {"min": min(values), "max": max(values), "weights": per_weight}
        print(f"{folder}: drift {min(values):.3f}-{max(values):.3f} over {len(values)} weight matrices")
    with open(args.output, "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    torch.set_grad_enabled(False)
    main()
