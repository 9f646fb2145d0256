"""RolloutLoss: the free-running loss, the student on its own states over the whole text."""

from typing import Dict, Optional

import torch
from torch import nn

from .distance import distance as distance_fn
from .distance import position_weights, weighted_mean


def thin_block_middles(target_mask: torch.Tensor, attention_mask: torch.Tensor, open_tokens: int,
                       keep: float) -> torch.Tensor:
    """Target weights keeping a random `keep` share of the targets inside an open-token block (neither the
    block's last step nor the row's), each weighted 1 / `keep` so the loss is unchanged in expectation."""
    steps = torch.cumsum(attention_mask.long(), 1) - 1  # each step's place among its row's real steps
    last = attention_mask.sum(1, keepdim=True) - 1
    middle = (target_mask > 0) & (attention_mask > 0) & (steps % open_tokens != open_tokens - 1) & (steps != last)
    kept = torch.rand(target_mask.shape, device=target_mask.device) < keep
    return torch.where(middle, target_mask * kept.to(target_mask.dtype) / keep, target_mask)


class RolloutLoss(nn.Module):
    """Free-running: the student runs on its own states over the whole text, with a loss at every target
    step. `tbptt` truncates backprop every that many steps; `restart_prob` (scheduled sampling) restarts
    the state from the lifted teacher state before a step with that probability. Returns (loss, preds).

    With a student of `open_tokens` W > 1, a target inside a block costs the parallel form that block's first
    tokens again (1.14 extra tokens per token at W 8, a target every third step): `open_middle_fraction` < 1
    trains on that share of them (`thin_block_middles`), so a CPU minute sees more texts.

    A batch with `word_starts` (a student with `tail_layers`) adds `tail_weight` times the same loss on the
    embedding that pools the current word's lower-layer outputs (`tail_hidden_state`), from the same pass, to
    the loss it returns; `last_tail` holds that term alone, for logging."""

    def __init__(self, distance: str = "cosine", final_weight: float = 1.0, tbptt: Optional[int] = None,
                 open_tokens: int = 1, open_middle_fraction: float = 1.0, tail_weight: float = 1.0):
        super().__init__()
        if not 0 < open_middle_fraction <= 1:
            raise ValueError(f"open_middle_fraction must be in (0, 1], got {open_middle_fraction!r}.")
        if open_middle_fraction < 1 and open_tokens < 2:
            raise ValueError("open_middle_fraction < 1 thins the targets inside open-token blocks, and this "
                             "student has none (open_tokens 1): leave it at 1.")
        self.distance, self.final_weight, self.tbptt = distance, final_weight, tbptt
        self.open_tokens, self.open_middle_fraction = open_tokens, open_middle_fraction
        self.tail_weight, self.last_tail = tail_weight, None

    def forward(self, model: nn.Module, batch: Dict[str, torch.Tensor], restart_prob: float = 0.0):
        ids, mask, targets, tmask = (batch[k] for k in ("input_ids", "attention_mask", "targets", "target_mask"))
        starts = None  # word starts: the tail_layers embedding's, read in the one-pass form below
        if "word_starts" in batch and self.tail_weight > 0 and (restart_prob > 0 or self.tbptt):
            raise ValueError("The tail_layers embedding trains in one pass from the empty state: not with scheduled "
                             "restarts or tbptt.")
        if model.training and self.open_middle_fraction < 1:
            tmask = thin_block_middles(tmask, mask, self.open_tokens, self.open_middle_fraction)
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
            starts = batch.get("word_starts") if self.tail_weight > 0 else None
            out = model(ids, attention_mask=mask, use_cache=False, output_steps=tmask > 0,
                        **({} if starts is None else {"word_starts": starts}))
            preds = out.last_hidden_state
        weights = position_weights(tmask, mask, self.final_weight)
        loss = weighted_mean(distance_fn(preds, targets, self.distance), weights)
        if starts is not None:
            tail = weighted_mean(distance_fn(out.tail_hidden_state, targets, self.distance), weights)
            self.last_tail = tail.detach()
            loss = loss + self.tail_weight * tail
        return loss, preds
