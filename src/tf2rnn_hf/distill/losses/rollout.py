"""RolloutLoss: the free-running loss, the student on its own states over the whole text."""

from typing import Dict, Optional

import torch
from torch import nn

from .distance import distance as distance_fn
from .distance import position_weights, weighted_mean


class RolloutLoss(nn.Module):
    """Free-running: the student runs on its own states over the whole text, with a loss at every target
    step. `tbptt` truncates backprop every that many steps; `restart_prob` (scheduled sampling) restarts
    the state from the lifted teacher state before a step with that probability. Returns (loss, preds)."""

    def __init__(self, distance: str = "cosine", final_weight: float = 1.0, tbptt: Optional[int] = None):
        super().__init__()
        self.distance, self.final_weight, self.tbptt = distance, final_weight, tbptt

    def forward(self, model: nn.Module, batch: Dict[str, torch.Tensor], restart_prob: float = 0.0):
        ids, mask, targets, tmask = (batch[k] for k in ("input_ids", "attention_mask", "targets", "target_mask"))
        if restart_prob > 0:
            has_prev = torch.cat([torch.zeros_like(tmask[:, :1]), tmask[:, :-1]], 1) > 0
            force = (torch.rand(ids.shape, device=ids.device) < restart_prob) & has_prev
            preds = model(ids, attention_mask=mask, teacher_states=targets, teacher_forcing=force).last_hidden_state
        elif self.tbptt and self.tbptt < ids.shape[1]:
            pieces, state = [], None
            for start in range(0, ids.shape[1], self.tbptt):
                out = model(ids[:, start:start + self.tbptt], attention_mask=mask[:, start:start + self.tbptt],
                            past_state=state, use_cache=True)
                pieces.append(out.last_hidden_state)
                state = out.past_state.detach()
            preds = torch.cat(pieces, 1)
        else:
            preds = model(ids, attention_mask=mask, use_cache=False, output_steps=tmask > 0).last_hidden_state
        weights = position_weights(tmask, mask, self.final_weight)
        return weighted_mean(distance_fn(preds, targets, self.distance), weights), preds
