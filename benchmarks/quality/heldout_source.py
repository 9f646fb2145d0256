"""Write one source's held-out sentences of a built-in corpus (the first 1,000, as the corpus splits them: no
student trains on them) as .jsonl, for `tf2rnn evaluate --texts`: the sentences transfer.sh and student.sh score
a student on when it trained with or without that source.

    python benchmarks/quality/heldout_source.py dict-foldoc outputs/transfer-heldout/dict-foldoc.jsonl
    python benchmarks/quality/heldout_source.py linux-doc outputs/transfer-heldout/linux-doc.jsonl --corpus offline-xl
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
    args = parser.parse_args()
    rows = load_texts(args.corpus, "heldout", limit=args.limit, only_sources=[args.source])
    args.output.parent.mkdir(parents=True, exist_ok=True)
    with open(args.output, "w") as f:
        f.writelines(json.dumps({"text": t}) + "\n" for t in rows["text"])


if __name__ == "__main__":
    main()
