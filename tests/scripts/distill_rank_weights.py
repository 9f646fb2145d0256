"""Run examples/distill.py's main with the given arguments, then print a hash of this rank's weights, the
step training began at (a resumed run begins at its checkpoint's), how many steps it ran, and how many token-table
rows training moved: in all, and of the rows no training text holds."""

import hashlib
import importlib
import sys

import torch
from transformers import TrainerCallback

distill = vars(importlib.import_module("tf2rnn_hf.distill.recipe"))
captured = {}
original = distill["DistillationTrainer"].train


class _Steps(TrainerCallback):
    def on_train_begin(self, args, state, control, **kwargs):
        captured["begin"] = state.global_step  # a resumed run has loaded its checkpoint's state by now
        captured["ran"] = 0

    def on_step_end(self, args, state, control, **kwargs):
        captured["ran"] += 1


def train_and_capture(self, *args, **kwargs):
    self.add_callback(_Steps())
    table = self.model.get_input_embeddings().weight
    before = table.detach().clone()
    result = original(self, *args, **kwargs)
    captured["model"] = self.accelerator.unwrap_model(self.model)
    captured["rank"] = self.args.process_index
    moved = (table.detach() != before).any(dim=1)
    read = torch.zeros_like(moved)
    read[torch.as_tensor(sorted({i for ids in self.train_dataset["input_ids"] for i in ids}))] = True
    captured["moved"], captured["unread_moved"] = int(moved.sum()), int((moved & ~read).sum())
    return result


distill["DistillationTrainer"].train = train_and_capture
results = distill["main"](sys.argv[1:])
digest = hashlib.sha256()
for name, tensor in sorted(captured["model"].state_dict().items()):
    digest.update(name.encode())
    digest.update(tensor.detach().to(torch.float32).contiguous().numpy().tobytes())
print(f"RANK {captured['rank']} WORLD {results['world_size']} SHA {digest.hexdigest()} BEGIN {captured['begin']} "
      f"RAN {captured['ran']} MOVED {captured['moved']} UNREAD_MOVED {captured['unread_moved']}", flush=True)
