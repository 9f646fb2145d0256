"""The score functions, one implementation each: the fidelity tables, the suites, the trainer's evaluation
and the local `evaluate` modules under `metrics/` all call these."""

from typing import Dict, Sequence

import torch
import torch.nn.functional as F


def _as_tensor(x) -> torch.Tensor:
    return torch.as_tensor(x, dtype=torch.float32) if not isinstance(x, torch.Tensor) else x.float()


def cosine_fidelity(student, teacher) -> torch.Tensor:
    """Cosine between matching rows of two embedding matrices ([N, D] -> [N])."""
    return F.cosine_similarity(_as_tensor(student), _as_tensor(teacher), dim=-1)


def neighbour_agreement(student, teacher, k: int = 10) -> float:
    """Mean fraction of each text's teacher top-k neighbours (itself excluded) that the student's
    top-k recovers, among the same N texts."""
    s = F.normalize(_as_tensor(student), dim=-1)
    t = F.normalize(_as_tensor(teacher), dim=-1)
    n = s.shape[0]
    if n <= k:
        raise ValueError(f"neighbour agreement@{k} needs more than {k} texts, got {n}.")
    eye = torch.eye(n, dtype=torch.bool)
    top_s = (s @ s.T).masked_fill(eye, float("-inf")).topk(k, dim=-1).indices
    top_t = (t @ t.T).masked_fill(eye, float("-inf")).topk(k, dim=-1).indices
    hits = (top_s[:, :, None] == top_t[:, None, :]).any(-1).float().sum(-1)
    return float((hits / k).mean())


def retrieval_scores(queries, targets, ks: Sequence[int] = (1, 10)) -> Dict[str, float]:
    """Query i's right answer is target i: recall@k for each k and mean reciprocal rank."""
    q = F.normalize(_as_tensor(queries), dim=-1)
    d = F.normalize(_as_tensor(targets), dim=-1)
    sims = q @ d.T
    right = sims.diagonal()[:, None]
    rank = (sims > right).sum(-1) + 1  # ties count in the query's favour
    scores = {f"recall@{k}": float((rank <= k).float().mean()) for k in ks}
    scores["mrr"] = float((1.0 / rank.float()).mean())
    return scores


def pearson(x, y) -> float:
    """Pearson correlation of two flattened arrays."""
    x, y = _as_tensor(x).flatten().double(), _as_tensor(y).flatten().double()
    x, y = x - x.mean(), y - y.mean()
    return float((x * y).sum() / (x.norm() * y.norm()).clamp(min=1e-12))


def _ranks(x: torch.Tensor) -> torch.Tensor:
    """Average ranks (ties share the mean of their positions), as Spearman's rho needs."""
    order = x.argsort()
    ranks = torch.empty_like(x, dtype=torch.float64)
    ranks[order] = torch.arange(len(x), dtype=torch.float64)
    values = x[order]
    start = 0
    for end in range(1, len(x) + 1):
        if end == len(x) or values[end] != values[start]:
            ranks[order[start:end]] = (start + end - 1) / 2.0
            start = end
    return ranks


def spearman(x, y) -> float:
    """Spearman rank correlation (average ranks for ties)."""
    x, y = _as_tensor(x).flatten().double(), _as_tensor(y).flatten().double()
    return pearson(_ranks(x), _ranks(y))


def metric_path(name: str) -> str:
    """The folder of a local `evaluate` metric shipped with the package: `evaluate.load(metric_path(name))`."""
    from pathlib import Path

    path = Path(__file__).parent / "metrics" / name
    if not path.is_dir():
        choices = sorted(p.name for p in path.parent.iterdir() if p.is_dir() and not p.name.startswith("_"))
        raise ValueError(f"Unknown metric {name!r}; choose one of {', '.join(choices)}.")
    return str(path)
