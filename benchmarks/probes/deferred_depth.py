"""Probe: what a keystroke would keep if the top layers waited for the end of each word.

A keystroke steps the word being typed through every layer, though a word's tokens change at almost every keystroke
and only a space makes them final. If layers above `--tail_layers` read only finished words, a keystroke inside a word
would cost `--tail_layers` layers and a space the rest for that word's tokens (a causal layer's output for a token
does not depend on when it is computed, so finished words come out exactly as now). The embedding while a word is
typed would pool the finished words' top-layer outputs and the current word's outputs of layer `--tail_layers`,
mapped by a linear `adapter`. This probe measures that embedding on a saved causal `tova_attention` student, untrained
for it: the adapter either the identity or fitted by least squares to the top layer's outputs on training texts
(tokens of `--fit_texts` texts); and a student trained for it (`--tail_layers` in examples/distill.py,
TF2RNNConfig.tail_layers) through its own `tail_hidden_state` and adapter. On the held-out trajectories `tf2rnn evaluate` scores (1,000 texts, every token
prefix), it prints the all-prefix and final cosine and NA@10 of: the student as it is (every layer, every token), the
deferred embedding with each adapter, and the finished words alone (the current word left out). Words are what the
streaming encoder calls words: runs between whitespace. A probe for deciding whether to train for it, not a figure.
A student whose upper layers keep open tokens (`tail_open_tokens`) gets its own two embeddings only: its top-layer
outputs depend on where the upper layers last ran, so the rebuilds from one pass's outputs do not apply.

    python benchmarks/probes/deferred_depth.py outputs/student-tova-l4-... --tail_layers 2 \
        --compare outputs/student-tova-l2-... --output benchmarks/probes/results/deferred-depth.json
"""

import argparse
import json
from pathlib import Path
from typing import Dict, List

import torch
import torch.nn.functional as F
from transformers import AutoTokenizer

from tf2rnn_hf import TF2RNNModel
from tf2rnn_hf.data import trajectories
from tf2rnn_hf.data.corpus import load_texts
from tf2rnn_hf.data.teacher import Teacher, teacher_name_of
from tf2rnn_hf.distill.student import least_squares_adapter
from tf2rnn_hf.evaluation.fidelity import fidelity, rows_to_tensors, student_trajectories
from tf2rnn_hf.hub import save_student
from tf2rnn_hf.utils import pad_ids


def word_starts(text: str, ids: List[int], tokenizer) -> torch.Tensor:
    """[T] index of the first token of the whitespace-delimited word holding each token (the streaming encoder's
    words)."""
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, truncation=True,
                    max_length=len(ids))
    if enc["input_ids"] != list(ids):
        raise ValueError(f"Tokens differ from the trajectory's for {text[:60]!r}")
    starts, current = [], 0
    for i, (begin, _) in enumerate(enc["offset_mapping"]):
        if i == 0 or begin == 0 or text[begin - 1].isspace():
            current = i
        starts.append(current)
    return torch.tensor(starts)


@torch.no_grad()
def layer_outputs(model: TF2RNNModel, rows, batch_size: int = 64) -> List[tuple]:
    """Per row: (token vectors [T, E], each layer's outputs [L, T, H], the cell's pooled output [T, H])."""
    out = []
    for start in range(0, len(rows), batch_size):
        chunk = rows[start:start + batch_size]
        ids, mask = pad_ids([r["input_ids"] for r in chunk])
        hidden = model(ids, attention_mask=mask, use_cache=False, output_hidden_states=True).hidden_states
        for i, r in enumerate(chunk):
            n = len(r["input_ids"])
            out.append((hidden[0][i, :n], torch.stack([h[i, :n] for h in hidden[1:-1]]), hidden[-1][i, :n]))
    return out


def pooled(model: TF2RNNModel, top: torch.Tensor, tail: torch.Tensor, starts: torch.Tensor) -> torch.Tensor:
    """[T, H] the cell's pooled output at every step of one text when the tokens of each step's current word
    contribute `tail` in place of `top` (both [T, H]; `TOVAAttentionCell.tail_pooled`)."""
    return model.cell.tail_pooled(top[None], tail[None], torch.ones(1, len(top)), starts[None])[0]


def embed(model: TF2RNNModel, vectors: torch.Tensor, cell_output: torch.Tensor) -> torch.Tensor:
    """The model's embedding from the cell's pooled outputs (`TF2RNNModel.forward`'s readout, token mean, norm)."""
    raw = model.readout(cell_output)
    if model.config.residual_token_mean:
        raw = raw + torch.cumsum(vectors, 0) / torch.arange(1, len(vectors) + 1, dtype=raw.dtype)[:, None]
    return F.normalize(raw, dim=-1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("student")
    parser.add_argument("--tail_layers", type=int, nargs="*", default=[2],
                        help="layers the current word passes, each with an untrained adapter (none: only the trained)")
    parser.add_argument("--compare", nargs="*", default=[], help="students scored as they are on the same rows")
    parser.add_argument("--fit_texts", type=int, default=2000)
    parser.add_argument("--texts", type=int, default=1000)
    parser.add_argument("--output", default=None)
    parser.add_argument("--save_fitted", default=None,
                        help="save the student with tail_layers (the first of --tail_layers) and its least-squares "
                             "adapter here: a start for training the second embedding (examples/distill.py --init_from)")
    args = parser.parse_args()
    torch.set_grad_enabled(False)
    model = TF2RNNModel.from_pretrained(args.student).eval()
    if model.config.cell_type != "tova_attention" or model.config.open_tokens != 1:
        raise SystemExit("deferred_depth.py reads causal tova_attention students (open_tokens 1) only.")
    tokenizer = AutoTokenizer.from_pretrained(args.student)
    teacher = Teacher(teacher_name_of(model.config.teacher_name_or_path))
    held_out = load_texts("offline", "heldout", limit=args.texts, shuffle_seed=0)["text"]
    settings = trajectories.TrajectorySettings(max_tokens=64, prefix_unit="token")
    rows = rows_to_tensors(trajectories.load(trajectories.generate(held_out, teacher, settings, progress=False)))
    if any(len(r["steps"]) != len(r["input_ids"]) for r in rows):
        raise SystemExit("deferred_depth.py needs every prefix's target (stride 1).")
    starts = [word_starts(t, r["input_ids"].tolist(), tokenizer) for t, r in zip(held_out, rows)]
    open_upper = getattr(model.config, "tail_open_tokens", 1) > 1
    outputs = None if open_upper else layer_outputs(model, rows)
    results: Dict[str, dict] = {"student": args.student, "texts": len(rows),
                                "tokens": sum(len(r["input_ids"]) for r in rows),
                                "current_word_tokens_mean": float(torch.cat(
                                    [torch.arange(len(s)) - s + 1 for s in starts]).float().mean())}
    # The pooling with the current word's own top-layer outputs, and this probe's embedding, against the model's
    # own trajectory: the same numbers to float rounding.
    reference = student_trajectories(model, rows)
    if open_upper:
        args.tail_layers, table = [], {"every layer (the student as it is)": fidelity(reference, rows)}
    as_is = [] if open_upper else [embed(model, v, pooled(model, layers[-1], layers[-1], s))
                                   for (v, layers, _), s in zip(outputs, starts)]
    results["check_max_abs_diff"] = max((float((a - b).abs().max()) for a, b in zip(as_is, reference)), default=0.0)
    if results["check_max_abs_diff"] > 1e-4:
        raise SystemExit(f"The probe's pooling differs from the model's by {results['check_max_abs_diff']:.2e}.")
    if not open_upper:
        table = {"every layer (the student as it is)": fidelity(as_is, rows)}
        table["finished words only"] = fidelity(
            [embed(model, v, pooled(model, layers[-1], torch.zeros_like(layers[-1]), s))
             for (v, layers, _), s in zip(outputs, starts)], rows)
    fit = load_texts("offline", "train", limit=args.fit_texts, shuffle_seed=0)["text"] if args.tail_layers else []
    fits = {}
    for layers_k in args.tail_layers:
        if not 1 <= layers_k < model.config.num_hidden_layers:
            raise SystemExit(f"--tail_layers {layers_k}: the student has {model.config.num_hidden_layers} layers.")
        weight, bias = fits[layers_k] = least_squares_adapter(model, tokenizer, fit, layers_k)
        for name, mapped in (("identity", lambda x: x), ("least squares", lambda x: x @ weight.T + bias)):
            table[f"words being typed through {layers_k} layers, {name}"] = fidelity(
                [embed(model, v, pooled(model, layers[-1], mapped(layers[layers_k - 1]), s))
                 for (v, layers, _), s in zip(outputs, starts)], rows)
    if args.save_fitted:
        layers_k = args.tail_layers[0]
        fitted = TF2RNNModel.from_pretrained(args.student, tail_layers=layers_k).eval()
        weight, bias = fits[layers_k]
        fitted.cell.tail_adapter.weight.copy_(weight)
        fitted.cell.tail_adapter.bias.copy_(bias)
        save_student(fitted, tokenizer, args.save_fitted)
        print(f"saved {args.save_fitted}")
    k = model.config.tail_layers
    if k is not None:  # trained for it: the model's own second embedding, its word starts from `starts`
        trained = []
        with torch.no_grad():
            for r, s in zip(rows, starts):
                begins = (s == torch.arange(len(s))).long()[None]
                trained.append(model(r["input_ids"][None], use_cache=False, word_starts=begins).tail_hidden_state[0])
        table[f"words being typed through {k} layers, trained"] = fidelity(trained, rows)
    for path in args.compare:
        other = TF2RNNModel.from_pretrained(path).eval()
        table[f"{Path(path).name} as it is"] = fidelity(student_trajectories(other, rows), rows)
    results["fidelity"] = table
    for name, row in table.items():
        print(f"{name}: " + ", ".join(f"{k} {v:.4f}" for k, v in row.items() if not k.startswith("drift")))
    print({k: v for k, v in results.items() if k != "fidelity"})
    if args.output:
        Path(args.output).write_text(json.dumps(results, indent=1))
        print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
