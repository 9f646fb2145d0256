"""How close a student is to its teacher on held-out trajectories: final and all-prefix cosine, neighbour
agreement@10, drift by prefix length, and cosine after every keystroke.

Rows of every table: the student, the teacher itself, "one token late" (the teacher's embedding one
step earlier, which shows how forgiving final cosine is) and the static order-free baseline
(`baselines.StaticEmbedding`).
"""

from typing import Dict, List, Optional, Sequence

import torch

from ..data.teacher import Teacher
from ..data.trajectories import byte_rows
from ..models import TF2RNNModel
from ..utils import continuation_table, pad_ids
from . import scores
from .baselines import StaticEmbedding

DRIFT_BUCKETS = ((1, 8), (9, 16), (17, 32), (33, 64), (65, 128), (129, 256))


def rows_to_tensors(dataset) -> List[Dict[str, torch.Tensor]]:
    """Trajectory rows as tensors: input_ids, steps (1-based target positions) and trajectory [steps, D]."""
    ds = dataset.with_format("numpy", columns=["input_ids", "target_steps", "trajectory"])
    return [{"input_ids": torch.as_tensor(r["input_ids"], dtype=torch.long),
             "steps": torch.as_tensor(r["target_steps"], dtype=torch.long),
             "trajectory": torch.as_tensor(r["trajectory"], dtype=torch.float32)} for r in ds]


@torch.no_grad()
def student_trajectories(model: TF2RNNModel, rows: Sequence[Dict[str, torch.Tensor]], batch_size: int = 64
                         ) -> List[torch.Tensor]:
    """The student's free-running embedding after each target step of each row."""
    model.eval()
    device = next(model.parameters()).device
    out = []
    for start in range(0, len(rows), batch_size):
        chunk = rows[start:start + batch_size]
        ids, mask = pad_ids([r["input_ids"] for r in chunk])
        traj = model(ids.to(device), attention_mask=mask.to(device), use_cache=False).last_hidden_state.cpu()
        out.extend(traj[i, r["steps"] - 1] for i, r in enumerate(chunk))
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


def fidelity_table(model: TF2RNNModel, dataset, teacher: Teacher, token_vectors: Optional[torch.Tensor] = None,
                   baselines: bool = True) -> Dict[str, Dict[str, float]]:
    """Fidelity rows for the student, the teacher, and (on token rows) one-token-late and the static
    baseline. On a byte student's rows, steps (and drift buckets) count bytes."""
    rows = rows_to_tensors(dataset)
    table = {"student": fidelity(student_trajectories(model, rows), rows),
             "teacher": fidelity([r["trajectory"] for r in rows], rows)}
    if baselines:
        static = StaticEmbedding(token_vectors if token_vectors is not None else teacher.token_vectors(progress=False))
        empty = teacher.embed_ids([teacher.wrap([])])[0]
        table["one token late"] = fidelity(late_trajectories(rows, empty), rows)
        table["static mean"] = fidelity([static.trajectory(r["input_ids"])[r["steps"] - 1] for r in rows], rows)
    return table


@torch.no_grad()
def keystroke_fidelity(model: TF2RNNModel, char_dataset, token_vectors: Optional[torch.Tensor] = None,
                       tokenizer=None, batch_size: int = 256) -> Dict[str, Dict[str, float]]:
    """Cosine to the teacher after every keystroke that changes the teacher's tokens (character-level
    trajectories).

    The student's embedding of text[:c] is what the streaming encoder shows after typing c characters
    (the two are equal, tested); it is computed here in batches of prefixes. A byte student (pass its
    `tokenizer`) reads the prefixes' bytes; `prefixes` and the static baseline are the teacher's tokens. A student
    with `tail_layers` (pass its `tokenizer`) streams its upper layers at word ends only, and every prefix here ends
    with a keystroke that changed a token, inside a word or on punctuation: it shows the second embedding
    (`tail_hidden_state`), so that is what is scored.
    """
    model.eval()
    continues = None
    if getattr(model.config, "tail_layers", None) is not None:
        if tokenizer is None:
            raise ValueError("keystroke_fidelity of a tail_layers student needs its tokenizer: its streams show the "
                             "second embedding inside a word, whose word starts the tokenizer's '##' tokens mark.")
        continues = continuation_table(tokenizer)
    prefixes, targets = [], []
    for row in char_dataset.with_format("numpy", columns=["char_input_ids", "trajectory"]):
        prefixes.extend(list(ids) for ids in row["char_input_ids"])
        targets.append(torch.as_tensor(row["trajectory"], dtype=torch.float32))
    target = torch.cat(targets)
    if model.config.granularity == "byte":
        # Byte prefixes of a text are prefixes of its byte sequence: one free run per text gives them all.
        if not hasattr(tokenizer, "offset"):
            raise ValueError("keystroke_fidelity of a byte student needs its ByT5 tokenizer.")
        rows = rows_to_tensors(byte_rows(char_dataset, tokenizer.offset))
        student = torch.cat(student_trajectories(model, rows, batch_size))
    else:
        student = torch.zeros_like(target)
        order = sorted(range(len(prefixes)), key=lambda i: len(prefixes[i]))
        for start in range(0, len(order), batch_size):
            idx = order[start:start + batch_size]
            ids, mask = pad_ids([prefixes[i] for i in idx])
            if continues is None:
                student[idx] = model(ids, attention_mask=mask, use_cache=False).pooler_output.float()
            else:  # a masked position repeats the last real step's embedding, so the last column is each row's
                out = model(ids, attention_mask=mask, use_cache=False, word_starts=(~continues[ids]).long())
                student[idx] = out.tail_hidden_state[:, -1].float()
    table = {"student": {"keystroke_cosine": float(scores.cosine_fidelity(student, target).mean())}}
    if token_vectors is not None:
        static = StaticEmbedding(token_vectors).embed_ids(prefixes)
        table["static mean"] = {"keystroke_cosine": float(scores.cosine_fidelity(static, target).mean())}
    table["_keystrokes"] = {"count": float(len(prefixes))}
    return table
