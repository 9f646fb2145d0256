"""How close a student is to its teacher: fidelity on held-out trajectories, against baselines.

Rows of every table: the student, the teacher itself, "one token late" (the teacher's embedding one
step earlier, which shows how forgiving final cosine is) and the static order-free baseline (the mean of
each token's teacher vector, Model2Vec-style, distilled by our own code).
"""

from typing import Dict, List, Optional, Sequence

import torch
import torch.nn.functional as F

from . import scores
from .teacher import Teacher

DRIFT_BUCKETS = ((1, 8), (9, 16), (17, 32), (33, 64), (65, 128), (129, 256))


def _rows_to_tensors(dataset) -> List[Dict[str, torch.Tensor]]:
    ds = dataset.with_format("numpy", columns=["input_ids", "target_steps", "trajectory"])
    return [{"input_ids": torch.as_tensor(r["input_ids"], dtype=torch.long),
             "steps": torch.as_tensor(r["target_steps"], dtype=torch.long),
             "trajectory": torch.as_tensor(r["trajectory"], dtype=torch.float32)} for r in ds]


@torch.no_grad()
def student_trajectories(model, rows: Sequence[Dict[str, torch.Tensor]], batch_size: int = 64
                         ) -> List[torch.Tensor]:
    """The student's free-running embedding after each target step of each row."""
    model.eval()
    device = next(model.parameters()).device
    out = []
    for start in range(0, len(rows), batch_size):
        chunk = rows[start:start + batch_size]
        width = max(len(r["input_ids"]) for r in chunk)
        ids = torch.zeros(len(chunk), width, dtype=torch.long)
        mask = torch.zeros(len(chunk), width, dtype=torch.long)
        for i, r in enumerate(chunk):
            ids[i, :len(r["input_ids"])] = r["input_ids"]
            mask[i, :len(r["input_ids"])] = 1
        traj = model(ids.to(device), attention_mask=mask.to(device), use_cache=False).last_hidden_state.cpu()
        out.extend(traj[i, r["steps"] - 1] for i, r in enumerate(chunk))
    return out


def static_trajectories(rows, token_vectors: torch.Tensor, weights: Optional[torch.Tensor] = None
                        ) -> List[torch.Tensor]:
    """The order-free baseline: the (weighted) running mean of per-token teacher vectors, normalised."""
    out = []
    for r in rows:
        vec = token_vectors[r["input_ids"]]
        if weights is not None:
            vec = vec * weights[r["input_ids"], None]
        out.append(F.normalize(torch.cumsum(vec, 0)[r["steps"] - 1], dim=-1))
    return out


def late_trajectories(rows, empty_embedding: torch.Tensor) -> List[torch.Tensor]:
    """"One token late": the teacher's embedding of the previous prefix (the empty text before step 1)."""
    return [torch.cat([empty_embedding[None], r["trajectory"][:-1]]) for r in rows]


def fidelity(predicted: Sequence[torch.Tensor], rows) -> Dict[str, float]:
    """Final cosine, mean cosine over all prefixes, neighbour agreement@10 and the drift curve."""
    cos = [scores.cosine_fidelity(p, r["trajectory"]) for p, r in zip(predicted, rows)]
    finals = torch.stack([c[-1] for c in cos])
    result = {"final_cosine": float(finals.mean()), "prefix_cosine": float(torch.cat(cos).mean())}
    if len(rows) > 10:
        result["neighbour_agreement@10"] = scores.neighbour_agreement(
            torch.stack([p[-1] for p in predicted]), torch.stack([r["trajectory"][-1] for r in rows]))
    for lo, hi in DRIFT_BUCKETS:
        vals = [c[(r["steps"] >= lo) & (r["steps"] <= hi)] for c, r in zip(cos, rows)]
        vals = torch.cat(vals)
        if len(vals):
            result[f"drift_{lo}-{hi}"] = float(vals.mean())
    return result


def fidelity_table(model, dataset, teacher: Teacher, token_vectors: Optional[torch.Tensor] = None
                   ) -> Dict[str, Dict[str, float]]:
    """Fidelity rows for the student, the teacher, one-token-late and the static baseline."""
    rows = _rows_to_tensors(dataset)
    if token_vectors is None:
        token_vectors = teacher.token_vectors(progress=False)
    empty = teacher.embed_ids([teacher.wrap([])])[0]
    table = {
        "student": fidelity(student_trajectories(model, rows), rows),
        "teacher": fidelity([r["trajectory"] for r in rows], rows),
        "one token late": fidelity(late_trajectories(rows, empty), rows),
        "static mean": fidelity(static_trajectories(rows, token_vectors), rows),
    }
    return table


def format_table(table: Dict[str, Dict[str, float]], title: str = "") -> str:
    """A markdown table: one row per system, one column per metric."""
    columns = []
    for metrics in table.values():
        columns.extend(k for k in metrics if k not in columns)
    lines = [f"### {title}", ""] if title else []
    lines.append("| system | " + " | ".join(columns) + " |")
    lines.append("|---" * (len(columns) + 1) + "|")
    for name, metrics in table.items():
        cells = [f"{metrics[c]:.3f}" if c in metrics else "-" for c in columns]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
