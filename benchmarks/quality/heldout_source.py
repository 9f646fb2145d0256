"""Write one source's held-out sentences of the offline corpus (the first 1,000, as the corpus splits them: no
student trains on them) as .jsonl, for `tf2rnn evaluate --texts`: the sentences transfer.sh and student.sh score
a student on when it trained with or without that source.

    python benchmarks/quality/heldout_source.py dict-foldoc outputs/transfer-heldout/dict-foldoc.jsonl
"""

import argparse
import json
from pathlib import Path

from tf2rnn_hf.data.corpus import load_texts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", help="A source of the offline corpus, e.g. dict-foldoc.")
    parser.add_argument("output", type=Path)
    parser.add_argument("--limit", type=int, default=1000)
    args = parser.parse_args()
    rows = load_texts("offline", "heldout", limit=args.limit, only_sources=[args.source])
    args.output.parent.mkdir(parents=True, exist_ok=True)
    with open(args.output, "w") as f:
        f.writelines(json.dumps({"text": t}) + "\n" for t in rows["text"])


if __name__ == "__main__":
    main()
