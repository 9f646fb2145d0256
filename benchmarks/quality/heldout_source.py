"""Write one source's held-out sentences of a built-in corpus (the first 1,000, as the corpus splits them: no
student trains on them) as .jsonl, for `tf2rnn evaluate --texts`: the sentences transfer.sh and student.sh score
a student on when it trained with or without that source. With `--split train` (and `--seed`, a stable sample),
sentences a student may train on instead: a stand-in for a user's own text (`--others`: every other source's).

    python benchmarks/quality/heldout_source.py dict-foldoc outputs/transfer-heldout/dict-foldoc.jsonl
    python benchmarks/quality/heldout_source.py linux-doc outputs/transfer-heldout/linux-doc.jsonl --corpus offline-xl
    python benchmarks/quality/heldout_source.py dict-foldoc outputs/own-text/foldoc.jsonl --split train --limit 2000 \
        --seed 0
"""

import argparse
import json
from pathlib import Path

from tf2rnn_hf.data.corpus import RECIPES, load_texts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", help="A source of the corpus, e.g. dict-foldoc (offline) or linux-doc (offline-xl).")
    parser.add_argument("output", type=Path)
    parser.add_argument("--limit", type=int, default=1000)
    parser.add_argument("--corpus", default="offline", choices=RECIPES)
    parser.add_argument("--split", default="heldout", choices=["heldout", "train"])
    parser.add_argument("--seed", type=int, default=None, help="A stable random sample instead of the first rows.")
    parser.add_argument("--others", action="store_true", help="Every source but SOURCE.")
    args = parser.parse_args()
    by_source = {"exclude_sources": [args.source]} if args.others else {"only_sources": [args.source]}
    rows = load_texts(args.corpus, args.split, limit=args.limit, shuffle_seed=args.seed, **by_source)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    with open(args.output, "w") as f:
        f.writelines(json.dumps({"text": t}) + "\n" for t in rows["text"])


if __name__ == "__main__":
    main()
