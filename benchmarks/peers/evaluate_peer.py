#!/usr/bin/env python
"""Score a static peer (a Model2Vec folder, embedded by model2vec's own StaticModel) on every suite that
applies to a model without a trajectory, beside the teacher: STS-B (whole and cut sentences), Bible, WordNet,
Lee, word similarity, and neighbour agreement@10 with the teacher on held-out sentences (pooled and by
source) and on keystroke prefixes. A PCA-rotated space has no cosine to the teacher: agreement of
neighbours is the comparable measure.

    python benchmarks/peers/evaluate_peer.py FOLDER --name model2vec --output results.json
    python benchmarks/peers/evaluate_peer.py FOLDER --texts a.jsonl b.jsonl --output on-texts.json  # your own text

With `--texts`, only neighbour agreement@10 with the teacher on each file's texts (one text per line, or .jsonl with a
'text' field), as `tf2rnn evaluate --texts` scores a student.
"""

import argparse
import json
import time
from pathlib import Path

import torch

from tf2rnn_hf.data import trajectories
from tf2rnn_hf.data.corpus import load_texts
from tf2rnn_hf.data.teacher import Teacher
from tf2rnn_hf.evaluation.report import results_markdown
from tf2rnn_hf.evaluation.scores import neighbour_agreement
from tf2rnn_hf.evaluation.suites import run_suites, sts_b_table, teacher_encoder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder")
    parser.add_argument("--name", default="model2vec")
    parser.add_argument("--output", required=True)
    parser.add_argument("--n-texts", type=int, default=1000)
    parser.add_argument("--distill-seconds", type=float, default=None)
    parser.add_argument("--texts", nargs="+", default=None, metavar="FILE")
    args = parser.parse_args()
    from model2vec import StaticModel

    peer = StaticModel.from_pretrained(args.folder)

    def encode(texts):
        return torch.as_tensor(peer.encode(list(texts)), dtype=torch.float32)

    start = time.perf_counter()
    teacher = Teacher("built-in")
    if args.texts:
        table = {}
        for file in args.texts:
            texts = load_texts(file, limit=args.n_texts)["text"]
            table[Path(file).name] = {"neighbour_agreement@10": neighbour_agreement(encode(texts), teacher.encode(texts)),
                                      "texts": len(texts)}
        Path(args.output).write_text(json.dumps({"peer": args.name, "folder": args.folder, "teacher": teacher.hub_id,
                                                 "on_texts": table}, indent=1))
        print(json.dumps(table, indent=1))
        return
    encoders = {"teacher": teacher_encoder(teacher), args.name: encode}
    suites = {"sts-b": sts_b_table(encoders, teacher.tokenizer)}
    suites.update(run_suites(encoders, ["bible", "wordnet", "lee", "wordsim"]))

    held = load_texts("offline", "heldout", limit=args.n_texts, shuffle_seed=0)  # as `tf2rnn evaluate` samples
    teacher_final = teacher.encode(held["text"])
    peer_final = encode(held["text"])
    table = {args.name: {"neighbour_agreement@10": neighbour_agreement(peer_final, teacher_final)}}
    sources = held["source"]
    for source in sorted(set(sources)):
        idx = [i for i, s in enumerate(sources) if s == source]
        if len(idx) > 10:
            table[args.name][f"neighbour_agreement@10 {source}"] = neighbour_agreement(peer_final[idx],
                                                                                     teacher_final[idx])
    suites["fidelity"] = table

    # Keystrokes: the text typed so far at every keystroke that changes the teacher's tokens.
    keystroke_texts = load_texts("offline", "heldout", limit=min(args.n_texts, 200), shuffle_seed=0)["text"]
    rows = trajectories.compute_shard(keystroke_texts, teacher,
                                      trajectories.TrajectorySettings(prefix_unit="char", bf16=False))[0]
    typed = [text[:end] for text, ends in zip(rows["text"], rows["char_ends"]) for end in ends]
    target = torch.cat([torch.as_tensor(t, dtype=torch.float32) for t in rows.with_format("numpy")["trajectory"]])
    suites["keystroke"] = {args.name: {"neighbour_agreement@10": neighbour_agreement(encode(typed), target)},
                           "_keystrokes": {"count": float(len(typed))}}
    results = {"peer": args.name, "folder": args.folder, "teacher": teacher.hub_id,
               "distill_seconds": args.distill_seconds, "evaluate_seconds": time.perf_counter() - start,
               "suites": suites}
    Path(args.output).write_text(json.dumps(results, indent=1))
    print(results_markdown(results))
    print(f"\nwrote {args.output}")


if __name__ == "__main__":
    main()
