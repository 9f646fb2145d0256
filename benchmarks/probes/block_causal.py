"""How much later context buys an untrained causal student: the teacher run with block-causal masks.

A streaming student that keeps its newest W tokens open (they attend to each other both ways and to the
committed cache; a full block is committed) equals, at every prefix, one pass of the teacher's layers under
a block-causal mask. This probe scores that pass, with the teacher's own weights and no training, on the
held-out sample `tf2rnn evaluate` uses: final cosine and NA@10 over every text, cosine over every prefix of
the first `--prefix_texts` texts. W=1 is the causal student before training; "+[SEP]" appends the [SEP] the
teacher pools, attending to the whole prefix (one more token per keystroke, never cached).

    python benchmarks/probes/block_causal.py --output benchmarks/probes/results/block-causal.json
"""

import argparse
import json
from pathlib import Path

import torch
import torch.nn.functional as F

from tf2rnn_hf.data.corpus import OFFLINE, load_texts
from tf2rnn_hf.data.teacher import Teacher
from tf2rnn_hf.evaluation import scores


def block_mask(n: int, width: int, sep: bool) -> torch.Tensor:
    """[n, n] bool: position 0 ([CLS]) is its own block, then blocks of `width`; a trailing [SEP] sees all."""
    block = torch.zeros(n, dtype=torch.long)
    body = n - 1 - int(sep)
    block[1:1 + body] = 1 + torch.arange(body) // width
    if sep:
        block[-1] = int(block.max()) + 1
    mask = block[None, :] <= block[:, None]
    if sep:
        mask[-1] = True
    return mask


@torch.inference_mode()
def embed(teacher: Teacher, seqs, width: int, sep: bool) -> torch.Tensor:
    """Mean-pooled, normalised embeddings of [CLS] + ids (+ [SEP]) under a block-causal mask, batched by length."""
    cls, sep_id = teacher.tokenizer.cls_token_id, teacher.tokenizer.sep_token_id
    out = torch.zeros(len(seqs), teacher.dim)
    by_len = {}
    for i, s in enumerate(seqs):
        by_len.setdefault(len(s), []).append(i)
    for n, rows in by_len.items():
        ids = torch.tensor([[cls, *seqs[i], *([sep_id] if sep else [])] for i in rows])
        mask = block_mask(ids.shape[1], width, sep)[None, None].expand(len(rows), 1, -1, -1)
        states = teacher.model(input_ids=ids, attention_mask=mask).last_hidden_state
        out[rows] = F.normalize(states.mean(1), dim=-1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--texts", type=int, default=1000)
    parser.add_argument("--prefix_texts", type=int, default=200)
    parser.add_argument("--widths", default="1,2,3,4,6,8")
    parser.add_argument("--output", type=Path, required=True)
    args = parser.parse_args()
    torch.set_num_threads(2)
    teacher = Teacher()
    texts = load_texts(OFFLINE, "heldout", limit=args.texts, shuffle_seed=0)["text"]
    ids = [teacher.tokenizer(t, add_special_tokens=False)["input_ids"][:64] for t in texts]
    ids = [s for s in ids if s]
    reference = teacher.embed_batched([teacher.wrap(s) for s in ids])
    prefixes = [s[:k] for s in ids[:args.prefix_texts] for k in range(1, len(s) + 1)]
    prefix_ref = teacher.embed_batched([teacher.wrap(p) for p in prefixes])
    rows = {}
    for width in [int(w) for w in args.widths.split(",")]:
        for sep in (False, True):
            final = embed(teacher, ids, width, sep)
            every = embed(teacher, prefixes, width, sep)
            name = f"W={width}" + (" +[SEP]" if sep else "")
            rows[name] = {"final_cosine": float((final * reference).sum(-1).mean()),
                          "neighbour_agreement@10": scores.neighbour_agreement(final, reference),
                          "prefix_cosine": float((every * prefix_ref).sum(-1).mean())}
            print(name, {k: round(v, 4) for k, v in rows[name].items()}, flush=True)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({"texts": len(ids), "prefix_texts": args.prefix_texts,
                                       "prefixes": len(prefixes), "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
