"""The per-position distance every loss shares, and its weighting over positions."""

import torch
import torch.nn.functional as F

DISTANCES = ("cosine", "mse")


def distance(pred: torch.Tensor, target: torch.Tensor, kind: str = "cosine") -> torch.Tensor:
    """Per-position distance between unit vectors: 1 - cos, or the mean squared error (= 2 (1 - cos) / D)."""
    if kind == "cosine":
        return 1.0 - F.cosine_similarity(pred, target, dim=-1)
    if kind == "mse":
        return (pred - target).pow(2).mean(-1)
    raise ValueError(f"Unknown distance {kind!r}; choose one of {', '.join(DISTANCES)}.")


def position_weights(target_mask: torch.Tensor, attention_mask: torch.Tensor, final_weight: float) -> torch.Tensor:
    """Weight 1 at every target step, `final_weight` at each row's last step."""
    weights = target_mask.clone()
    last = attention_mask.sum(1) - 1
    rows = torch.arange(len(last))
    weights[rows, last] = weights[rows, last] * final_weight
    return weights


def weighted_mean(loss: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Mean of `loss` under `weights` (0 where no weight at all)."""
    return (loss * weights).sum() / weights.sum().clamp(min=1e-9)
