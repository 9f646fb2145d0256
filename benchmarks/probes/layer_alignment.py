"""Probe: issue 19's stage 1 for a student that keeps fewer layers than the teacher, tried on the recipe before
anyone builds it in. Each pair `s:k` of `ALIGN_PAIRS` adds a loss pulling the student's layer s output at every
target step to the teacher's hidden state k (transformers' numbering: 0 the embeddings, k the output of layer k - 1)
at the newest token of that prefix, which has read the same tokens the causal student has. Weighted by
`ALIGN_WEIGHT` and added to the recipe's loss for the whole run (TinyBERT's hidden-state loss, with a prefix's newest
token in place of every token of a whole text). Its targets are computed before training, outside any time budget,
and kept by text in `ALIGN_CACHE` (default outputs/align-targets.pt) for the next run.

Why: two layers copied from the teacher's third and sixth start from a third layer that reads the embeddings instead of
the second layer's output, and only the pooled trajectory tells them otherwise. A target per token and layer is a
richer, less source-specific signal than one pooled vector per prefix (the left-out-source gap grew with the budget).

    ALIGN_PAIRS=1:3 ALIGN_WEIGHT=0.1 python benchmarks/probes/layer_alignment.py ... --output_dir outputs/NAME
"""

import os
import sys
import time
from typing import Dict, List, Sequence, Tuple

import torch

import tf2rnn_hf.distill.recipe as recipe
from tf2rnn_hf.data.teacher import Teacher, fast_bf16, length_batches, teacher_name_of
from tf2rnn_hf.distill.trainer import DistillationTrainer
from tf2rnn_hf.utils import pad_ids


def parse_pairs(value: str) -> List[Tuple[int, int]]:
    """`"1:3,2:6"` -> [(1, 3), (2, 6)]: student layer s (1-based) to teacher hidden state k."""
    pairs = [tuple(int(x) for x in item.split(":")) for item in value.split(",") if item]
    if not pairs or any(len(p) != 2 or p[0] < 1 or p[1] < 0 for p in pairs):
        raise ValueError(f"ALIGN_PAIRS must read like '1:3' or '1:3,2:6', got {value!r}.")
    return pairs


@torch.inference_mode()
def newest_token_states(teacher: Teacher, rows, layers: Sequence[int], token_budget: int = 4096) -> List[torch.Tensor]:
    """Per row, [targets, len(layers), dim] fp16: the teacher's hidden states `layers` at the newest token of each
    target prefix (tokens[:t] for t in the row's target_steps). Only the layers up to the deepest asked for run."""
    prefixes = [(i, j, teacher.wrap(list(row["input_ids"][:t])))
                for i, row in enumerate(rows) for j, t in enumerate(row["target_steps"])]
    out = [torch.zeros(len(row["target_steps"]), len(layers), teacher.dim, dtype=torch.float16) for row in rows]
    encoder = teacher.model.encoder
    every_layer = encoder.layer
    encoder.layer = every_layer[:max(layers)]
    try:
        for indices in length_batches([len(p[2]) for p in prefixes], token_budget):
            batch = [prefixes[i] for i in indices]
            ids, mask = pad_ids([p[2] for p in batch], teacher.tokenizer.pad_token_id)
            with teacher._autocast():
                states = teacher.model(input_ids=ids.to(teacher.device), attention_mask=mask.to(teacher.device),
                                       output_hidden_states=True).hidden_states
            newest = torch.tensor([len(p[2]) - 1 - len(teacher._suffix) for p in batch])
            rows_ = torch.arange(len(batch))
            picked = torch.stack([states[k][rows_, newest].float().cpu() for k in layers], 1).half()
            for (i, j, _), value in zip(batch, picked):
                out[i][j] = value
    finally:
        encoder.layer = every_layer
    return out


def cached_states(teacher: Teacher, rows, layers: Sequence[int], path: str) -> List[torch.Tensor]:
    """`newest_token_states` for `rows`, computing only the texts `path` does not hold yet (a left-out run reuses the
    full draw's), and saving the union back there."""
    everything = torch.load(path) if os.path.exists(path) else {}
    known = everything.setdefault(",".join(map(str, layers)), {})
    texts = list(rows["text"])
    missing = [i for i, text in enumerate(texts) if text not in known]
    if missing:
        fresh = newest_token_states(teacher, rows.select(missing), layers)
        known.update({texts[i]: value for i, value in zip(missing, fresh)})
        torch.save(everything, path + ".tmp")
        os.replace(path + ".tmp", path)
    return [known[text] for text in texts]


class AlignCollator:
    """The recipe's collator plus `align` [B, T, pairs, dim] and `align_mask` [B, T] from each row's `align_row`."""

    def __init__(self, base, targets: List[torch.Tensor]):
        self.base, self.targets = base, targets

    def __call__(self, rows: List[dict]) -> Dict[str, torch.Tensor]:
        batch = self.base(rows)
        if "align_row" not in rows[0]:
            return batch
        width = batch["input_ids"].shape[1]
        first = self.targets[int(rows[0]["align_row"])]
        align = torch.zeros(len(rows), width, *first.shape[1:])
        mask = torch.zeros(len(rows), width)
        for b, row in enumerate(rows):
            steps = torch.as_tensor(row["target_steps"], dtype=torch.long) - 1
            keep = steps < width
            align[b, steps[keep]] = self.targets[int(row["align_row"])][keep].float()
            mask[b, steps[keep]] = 1.0
        batch.update(align=align, align_mask=mask)
        return batch


class AligningTrainer(DistillationTrainer):
    """The recipe's trainer with the layer-alignment term added while training."""

    def __init__(self, *args, **kwargs):
        self.pairs = parse_pairs(os.environ.get("ALIGN_PAIRS", "1:3"))
        self.align_weight = float(os.environ.get("ALIGN_WEIGHT", "0.1"))
        data = kwargs["train_dataset"]
        data = data.add_column("align_row", list(range(len(data))))
        t0 = time.perf_counter()
        teacher = Teacher(teacher_name_of(kwargs["model"].config.teacher_name_or_path), bf16=fast_bf16("cpu"))
        targets = cached_states(teacher, data.select_columns(["text", "input_ids", "target_steps"]),
                                [k for _, k in self.pairs], os.environ.get("ALIGN_CACHE", "outputs/align-targets.pt"))
        print(f"layer alignment {self.pairs} weight {self.align_weight}: targets for {sum(len(t) for t in targets)} "
              f"prefixes in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
        kwargs.update(train_dataset=data, data_collator=AlignCollator(kwargs["data_collator"], targets))
        super().__init__(*args, **kwargs)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        align, align_mask = inputs.pop("align", None), inputs.pop("align_mask", None)
        if align is None or not model.training:
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        captured = []

        def ask(module, args, kwargs):
            return args, {**kwargs, "output_hidden_states": True}

        def keep(module, args, kwargs, output):
            captured.append(output.hidden_states)
        hooks = [model.register_forward_pre_hook(ask, with_kwargs=True),
                 model.register_forward_hook(keep, with_kwargs=True)]
        try:
            result = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        finally:
            for hook in hooks:
                hook.remove()
        hidden = captured[0]  # the rollout's forward: (inputs, layer 1, ..., the pooled mean)
        terms = []
        for p, (s, _) in enumerate(self.pairs):
            target = align[:, :, p]
            error = (hidden[s] - target).pow(2).sum(-1) / target.pow(2).sum(-1).clamp(min=1e-6)
            terms.append((error * align_mask).sum() / align_mask.sum().clamp(min=1))
        term = torch.stack(terms).mean()
        self._last_terms["loss_align"] = float(term.detach())
        if return_outputs:
            loss, outputs = result
            return loss + self.align_weight * term, outputs
        return result + self.align_weight * term


if __name__ == "__main__":
    recipe.DistillationTrainer = AligningTrainer
    recipe.main()
