"""Readers for the offline evaluation data: Bible KJV/WEB verse pairs, WordNet example/definition pairs,
the Lee document-similarity set and word-similarity lists. Each fetches its source package once."""

import html
import re
import struct
import subprocess
import sys
import tempfile
import zipfile
import zlib
from functools import lru_cache
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from .corpus import debian_root, stable_bucket, wordnet_glosses, wordnet_eval_synset
from .teacher import default_cache_dir

BIBLE_PACKAGES = ["sword-text-kjv", "sword-text-web"]
BIBLE_MODULES = ("engKJV2006eb", "engWEB2015eb")
GENSIM_VERSION = "4.4.0"
GENSIM_FILES = ("lee.cor", "similarities0-1.txt", "wordsim353.tsv", "simlex999.txt")


def _sword_slots(folder: Path, testament: str) -> List[str]:
    """Raw OSIS text of every verse slot of one testament of a SWORD zText module."""
    bzs = (folder / f"{testament}.bzs").read_bytes()
    bzz = (folder / f"{testament}.bzz").read_bytes()
    bzv = (folder / f"{testament}.bzv").read_bytes()
    blocks: Dict[int, bytes] = {}
    slots = []
    for i in range(len(bzv) // 10):
        block, offset, size = struct.unpack("<IIH", bzv[i * 10:i * 10 + 10])
        if size == 0:
            slots.append("")
            continue
        if block not in blocks:
            start, length, _ = struct.unpack("<III", bzs[block * 12:block * 12 + 12])
            blocks[block] = zlib.decompress(bzz[start:start + length])
        slots.append(blocks[block][offset:offset + size].decode("utf-8", errors="replace"))
    return slots


def _strip_osis(text: str) -> str:
    text = re.sub(r"<note\b.*?</note>", " ", text, flags=re.S)
    text = re.sub(r"<title\b.*?</title>", " ", text, flags=re.S)
    text = re.sub(r"<[^>]+>", "", text)
    return " ".join(html.unescape(text).split())


def read_sword_module(folder: Path) -> Dict[str, str]:
    """Verse text by osisID ("Gen.1.1"): a verse's number is its slot's distance from its chapter's slot."""
    verses = {}
    for testament in ("ot", "nt"):
        if not (folder / f"{testament}.bzv").is_file():
            continue
        chapter, chapter_slot = None, 0
        for index, raw in enumerate(_sword_slots(folder, testament)):
            marker = re.search(r'<chapter\b[^>]*osisID="([^"]+)"', raw)
            if marker and "sID" in raw:
                chapter, chapter_slot = marker.group(1), index
                continue
            if chapter is None or re.search(r'type="book"', raw):
                chapter = None if re.search(r'type="book"', raw) else chapter
                continue
            text = _strip_osis(raw)
            if text:
                verses[f"{chapter}.{index - chapter_slot}"] = text
    return verses


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


def gensim_test_data(cache_dir: Optional[Path] = None) -> Path:
    """gensim's test_data folder, extracted from its wheel (downloaded once with pip; gensim is not installed)."""
    dest = Path(cache_dir or default_cache_dir()) / "gensim_test_data"
    if all((dest / name).is_file() for name in GENSIM_FILES):
        return dest
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q", "-d", tmp,
               f"gensim=={GENSIM_VERSION}"]
        result = subprocess.run(cmd, capture_output=True, text=True)
        wheels = list(Path(tmp).glob("gensim-*.whl"))
        if result.returncode != 0 or not wheels:
            raise RuntimeError(f"Could not download the gensim wheel for its test data: {result.stderr[-400:]}")
        dest.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(wheels[0]) as wheel:
            for name in GENSIM_FILES:
                (dest / name).write_bytes(wheel.read(f"gensim/test/test_data/{name}"))
    return dest


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
