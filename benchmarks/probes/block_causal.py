"""How much later context buys an untrained causal student: the teacher run with block-causal masks.

A streaming student that keeps its newest W tokens open (they attend to each other both ways and to the
committed cache; a full block is committed) equals, at every prefix, one pass of the teacher's layers under
a block-causal mask. This probe scores that pass, with the teacher's own weights and no training, on the
held-out sample `tf2rnn evaluate` uses: final cosine and NA@10 over every text, cosine over every prefix of
the first `--prefix_texts` texts. W=1 is the causal student before training; "+[SEP]" appends the [SEP] the
teacher pools, attending to the whole prefix (one more token per keystroke, never cached). With
`--open_layers`, the block stays open in the top K layers only and the layers below are causal: a keystroke
would then run one token through those and up to W through the top K.

    python benchmarks/probes/block_causal.py --output benchmarks/probes/results/block-causal.json
    python benchmarks/probes/block_causal.py --widths 8 --open_layers 6,4,3,2,1 --no_sep \
        --output benchmarks/probes/results/block-causal-layers.json
    python benchmarks/probes/block_causal.py --word_blocks 1,2,3 --open_layers 6,4 --no_sep \
        --output benchmarks/probes/results/block-causal-words.json
    python benchmarks/probes/block_causal.py --widths 4,6 --open_layers 4 --no_sep \
        --output benchmarks/probes/results/block-causal-top4.json
"""

import argparse
import json
from pathlib import Path
from typing import Optional

import torch
import torch.nn.functional as F

from tf2rnn_hf.data.corpus import OFFLINE, load_texts
from tf2rnn_hf.data.teacher import Teacher
from tf2rnn_hf.evaluation import scores
from tf2rnn_hf.utils import continuation_table


def block_mask(n: int, width: int, sep: bool, words: Optional[torch.Tensor] = None) -> torch.Tensor:
    """[n, n] bool: position 0 ([CLS]) is its own block, then blocks of `width` tokens, or of `width` whole words
    where `words` [n - 1 - sep] gives each token's word index; a trailing [SEP] sees all."""
    block = torch.zeros(n, dtype=torch.long)
    body = n - 1 - int(sep)
    block[1:1 + body] = 1 + (torch.arange(body) if words is None else words) // width
    if sep:
        block[-1] = int(block.max()) + 1
    mask = block[None, :] <= block[:, None]
    if sep:
        mask[-1] = True
    return mask


def encode(teacher: Teacher, ids: torch.Tensor, masks) -> torch.Tensor:
    """The teacher's top-layer states for `ids` [B, T], layer i under `masks[i]` ([B, 1, T, T] bool)."""
    bert = teacher.model
    x = bert.embeddings(input_ids=ids)
    for layer, mask in zip(bert.encoder.layer, masks):
        extended = bert._create_attention_masks(attention_mask=mask, encoder_attention_mask=None, embedding_output=x,
                                                encoder_hidden_states=None, past_key_values=None)[0]
        x = layer(x, attention_mask=extended)
        x = x[0] if isinstance(x, tuple) else x
    return x


@torch.inference_mode()
def embed(teacher: Teacher, seqs, width: int, sep: bool, open_layers: int, continues: Optional[torch.Tensor] = None
          ) -> torch.Tensor:
    """Mean-pooled, normalised embeddings of [CLS] + ids (+ [SEP]) under a block-causal mask in the top
    `open_layers` layers and a causal one below, batched by length; blocks of `width` words where `continues`
    ([vocab] bool, `continuation_table`) is given."""
    cls, sep_id = teacher.tokenizer.cls_token_id, teacher.tokenizer.sep_token_id
    out = torch.zeros(len(seqs), teacher.dim)
    by_len = {}
    for i, s in enumerate(seqs):
        by_len.setdefault(len(s), []).append(i)
    for n, rows in by_len.items():
        ids = torch.tensor([[cls, *seqs[i], *([sep_id] if sep else [])] for i in rows])
        layers = len(teacher.model.encoder.layer)
        causal = block_mask(ids.shape[1], 1, sep)[None, None].expand(len(rows), 1, -1, -1)
        if continues is None:
            opened = block_mask(ids.shape[1], width, sep)[None, None].expand(len(rows), 1, -1, -1)
        else:  # a word starts at every token that does not continue one (the first token always starts one)
            body = torch.tensor([seqs[i] for i in rows])
            words = torch.cumsum((~continues[body]).long(), 1) - 1
            opened = torch.stack([block_mask(ids.shape[1], width, sep, w) for w in words])[:, None]
        states = encode(teacher, ids, [causal if i < layers - open_layers else opened for i in range(layers)])
        out[rows] = F.normalize(states.mean(1), dim=-1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--texts", type=int, default=1000)
    parser.add_argument("--prefix_texts", type=int, default=200)
    parser.add_argument("--widths", default="1,2,3,4,6,8")
    parser.add_argument("--open_layers", default="6", help="comma-separated: the block open in the top K layers")
    parser.add_argument("--word_blocks", default=None,
                        help="comma-separated: blocks of N whole words instead of --widths' tokens")
    parser.add_argument("--no_sep", action="store_true", help="leave out the +[SEP] rows")
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
    layers = len(teacher.model.encoder.layer)
    continues = continuation_table(teacher.tokenizer) if args.word_blocks else None
    settings = [(int(w), int(k), sep) for w in (args.word_blocks or args.widths).split(",")
                for k in args.open_layers.split(",") for sep in ((False,) if args.no_sep else (False, True))]
    for width, top, sep in settings:
        final = embed(teacher, ids, width, sep, top, continues)
        every = embed(teacher, prefixes, width, sep, top, continues)
        name = (f"{width} words" if continues is not None else f"W={width}") + (f" top {top}" if top < layers else "")
        name += " +[SEP]" if sep else ""
        rows[name] = {"final_cosine": float((final * reference).sum(-1).mean()),
                      "neighbour_agreement@10": scores.neighbour_agreement(final, reference),
                      "prefix_cosine": float((every * prefix_ref).sum(-1).mean())}
        print(name, {k: round(v, 4) for k, v in rows[name].items()}, flush=True)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({"texts": len(ids), "prefix_texts": args.prefix_texts,
                                       "prefixes": len(prefixes), "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
