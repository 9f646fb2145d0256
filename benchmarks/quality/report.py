#!/usr/bin/env python
"""Markdown tables from the quality results: the loss ablation, the cell comparison and the release.

    python benchmarks/quality/report.py > benchmarks/quality/RESULTS.md
"""

import json
from pathlib import Path

from tf2rnn_hf.evaluation import format_table

RESULTS = Path(__file__).parent / "results"
KEYS = ("final_cosine", "prefix_cosine", "neighbour_agreement@10", "drift_9-16", "drift_33-64")


def load(name):
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.is_file() else None


def main():
    out = []
    rows = {}
    for name in ("transition", "rollout", "mix", "rollout-similarity"):
        r = load(f"ablation-{name}")
        if r:
            rows[name] = {k: r["fidelity"]["student"][k] for k in KEYS if k in r["fidelity"]["student"]}
            rows[name]["epochs"] = r["train"].get("epoch", float("nan"))
            base = r
    if rows:
        for system in ("one token late", "static mean"):
            rows[f"baseline: {system}"] = {k: base["fidelity"][system][k] for k in KEYS}
        out.append(format_table(rows, "Loss ablation: GRU-768, 60k sentences, 10 CPU-minutes (one core) each, "
                                      "held-out free-running fidelity (1,000 texts)"))
    rows = {}
    for name in ("gru", "lstm", "linear_attention", "rem", "multistate-k8", "multistate-k32"):
        r = load(f"cells-{name}")
        if r:
            s = r["fidelity"]["student"]
            rows[name] = {k: s[k] for k in KEYS if k in s}
            rows[name]["epochs"] = r["train"].get("epoch", float("nan"))
    if rows:
        out.append(format_table(rows, "Cell comparison: ~2.9M recurrent parameters each, rollout loss, 5 CPU-minutes "
                                      "(one core) each, same data"))
    release = load("release")
    if release:
        from tf2rnn_hf.evaluation import results_markdown

        out.append("### Release (tf2rnn-minilm)\n\n" + results_markdown(release))
    print("\n\n".join(out))


if __name__ == "__main__":
    main()
