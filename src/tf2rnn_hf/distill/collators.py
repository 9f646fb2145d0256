"""Collators: trajectory rows (and keystrokes inside words) into padded training batches."""

from typing import Dict, List, Optional

import torch

from ..utils import pad_ids


class TrajectoryCollator:
    """Pads trajectory rows into a batch: input_ids/attention_mask [B, T], targets [B, T, D] (the teacher
    embedding after step t, where one exists) and target_mask [B, T]. Given `continues_word` ([vocab] booleans:
    the tokens that continue a word, WordPiece's "##" ones; `continuation_table`), also word_starts [B, T], 1 where
    a token begins a word (for a student with `tail_layers`)."""

    def __init__(self, pad_token_id: int = 0, max_steps: Optional[int] = None,
                 continues_word: Optional[torch.Tensor] = None):
        self.pad_token_id = pad_token_id
        self.max_steps = max_steps
        self.continues_word = continues_word

    def __call__(self, rows: List[dict]) -> Dict[str, torch.Tensor]:
        lengths = [len(r["input_ids"]) for r in rows]
        width = max(lengths) if self.max_steps is None else min(max(lengths), self.max_steps)
        dim = len(rows[0]["trajectory"][0])
        batch = len(rows)
        input_ids, attention_mask = pad_ids([r["input_ids"][:width] for r in rows], self.pad_token_id)
        targets = torch.zeros(batch, width, dim)
        target_mask = torch.zeros(batch, width)
        for i, row in enumerate(rows):
            n = min(lengths[i], width)
            steps = torch.as_tensor(row["target_steps"], dtype=torch.long) - 1
            traj = torch.as_tensor(row["trajectory"], dtype=torch.float32)
            keep = steps < n
            targets[i, steps[keep]] = traj[keep]
            target_mask[i, steps[keep]] = 1.0
        batch = {"input_ids": input_ids, "attention_mask": attention_mask, "targets": targets,
                 "target_mask": target_mask}
        if self.continues_word is not None:
            batch["word_starts"] = (~self.continues_word[input_ids]).long() * attention_mask
        return batch


class KeystrokeCollator(TrajectoryCollator):
    """Character-level trajectory rows -> the token batch of `TrajectoryCollator` (targets at the
    keystrokes whose tokens are a prefix of the text's tokens) plus, per text, up to `partials_per_text`
    keystrokes that end inside a word: what the streaming encoder runs (the tokens of the finished words,
    then the partial word's own tokens). keystroke_ids/keystroke_mask [P, L], keystroke_targets [P, D]."""

    def __init__(self, pad_token_id: int = 0, max_steps: Optional[int] = None, partials_per_text: int = 4,
                 seed: int = 0):
        super().__init__(pad_token_id, max_steps)
        self.partials_per_text = partials_per_text
        self.generator = torch.Generator().manual_seed(seed)

    def __call__(self, rows: List[dict]) -> Dict[str, torch.Tensor]:
        token_rows, partial_ids, partial_targets = [], [], []
        for row in rows:
            prefixes, shared = row["char_input_ids"], row["shared_tokens"]
            traj = torch.as_tensor(row["trajectory"], dtype=torch.float32)
            whole = [j for j in range(len(prefixes)) if shared[j] == len(prefixes[j])]
            token_rows.append({"input_ids": row["input_ids"], "trajectory": traj[whole],
                               "target_steps": [len(prefixes[j]) for j in whole]})
            partial = [j for j in range(len(prefixes)) if shared[j] < len(prefixes[j])]
            if partial:
                pick = torch.randperm(len(partial), generator=self.generator)[:self.partials_per_text]
                for k in sorted(pick.tolist()):
                    partial_ids.append(list(prefixes[partial[k]])[:self.max_steps])
                    partial_targets.append(traj[partial[k]])
        batch = super().__call__(token_rows)
        ids, mask = pad_ids(partial_ids, self.pad_token_id) if partial_ids else (
            torch.zeros(0, 1, dtype=torch.long), torch.zeros(0, 1, dtype=torch.long))
        batch.update(keystroke_ids=ids, keystroke_mask=mask, keystroke_targets=(
            torch.stack(partial_targets) if partial_targets else torch.zeros(0, batch["targets"].shape[-1])))
        return batch
