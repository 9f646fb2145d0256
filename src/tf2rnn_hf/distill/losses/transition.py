"""TransitionLoss: the teacher-transition loss, one teacher-forced step at every position."""

from typing import Dict

import torch
from torch import nn

from .distance import distance as distance_fn
from .distance import position_weights, weighted_mean


class TransitionLoss(nn.Module):
    """Teacher-forced one step: from the teacher's e(t-1) (lifted into a cell state) and token t, predict
    e(t). All steps run in parallel as independent one-step problems: no backprop through time. Steps
    whose previous target is missing (sparse trajectories) are left out."""

    def __init__(self, distance: str = "cosine", final_weight: float = 1.0):
        super().__init__()
        self.distance, self.final_weight = distance, final_weight

    def forward(self, model: nn.Module, batch: Dict[str, torch.Tensor]) -> torch.Tensor:
        ids, mask, targets, tmask = (batch[k] for k in ("input_ids", "attention_mask", "targets", "target_mask"))
        has_prev = torch.cat([torch.ones_like(tmask[:, :1]), tmask[:, :-1]], 1)
        preds = model(ids, attention_mask=mask, teacher_states=targets).last_hidden_state
        weights = position_weights(tmask * has_prev, mask, self.final_weight)
        return weighted_mean(distance_fn(preds, targets, self.distance), weights)
