"""KeystrokeLoss: the streaming path, keystrokes that end inside a word."""

from typing import Dict

import torch
from torch import nn

from .distance import distance as distance_fn


class KeystrokeLoss(nn.Module):
    """The streaming path: the student run free over the tokens of a keystroke that ends inside a word,
    against the teacher's embedding of that character prefix (see `KeystrokeCollator`)."""

    def __init__(self, distance: str = "cosine"):
        super().__init__()
        self.distance = distance

    def forward(self, model: nn.Module, batch: Dict[str, torch.Tensor]) -> torch.Tensor:
        ids, mask, targets = batch["keystroke_ids"], batch["keystroke_mask"], batch["keystroke_targets"]
        preds = model(ids, attention_mask=mask, use_cache=False).pooler_output
        return distance_fn(preds, targets, self.distance).mean()
