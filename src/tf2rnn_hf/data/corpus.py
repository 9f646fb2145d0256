"""Text sources behind one interface: a Hub dataset id, local .txt/.jsonl/.csv files, or the offline recipe.

The offline recipe builds an English corpus from Debian packages (WordNet glosses, fortunes, the dictd
dictionaries), cleans and sentence-splits it, deduplicates, records each sentence's source and licence,
and writes a held-out split by a stable hash. `"offline-xl"` adds Debian's software documentation (the Linux
kernel's, Python's, Java's, Qt's, PostgreSQL's, Perl's, the man pages, Debian's own manuals and more: DOC_SOURCES),
for runs that can use more text than the default corpus holds (a lent GPU). Its rows include every
row of `"offline"`, each in the same split. Evaluation data stays out of training: the WordNet synsets
chosen for definition retrieval (`wordnet_eval_synset`), and any sentence that also occurs in the Bible
or Lee evaluation texts when those are present.
"""

import logging
import os
import re
import shutil
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Union

import datasets

from ..utils import default_cache_dir, stable_bucket
from .evaluation_sets import bible_pairs, lee_documents, wordnet_eval_synset
from .sources import (
    debian_root,
    dictd_paragraphs,
    fortunes_entries,
    html_paragraphs,
    man_paragraphs,
    pod_paragraphs,
    wordnet_glosses,
)

logger = logging.getLogger(__name__)

OFFLINE = "offline"
OFFLINE_XL = "offline-xl"
RECIPES = (OFFLINE, OFFLINE_XL)
RECIPE_VERSION = "1"
HELDOUT_PERCENT = 2  # of the offline corpus, chosen by a stable hash of the normalised sentence


SOURCES = {
    # package: (licence, what is read)
    "wordnet-base": ("WordNet-3.0", "usr/share/wordnet/data.{noun,verb,adj,adv}"),
    "fortunes": ("BSD-4-Clause-UC", "usr/share/games/fortunes/*"),
    "fortunes-min": ("BSD-4-Clause-UC", "usr/share/games/fortunes/*"),
    "dict-gcide": ("GPL-2.0-or-later", "usr/share/dictd/gcide.dict.dz"),
    "dict-foldoc": ("GFDL-1.1-or-later", "usr/share/dictd/foldoc.dict.dz"),
    "dict-jargon": ("public-domain", "usr/share/dictd/jargon.dict.dz"),
}

# `"offline-xl"`'s documentation, read after SOURCES (a sentence both hold stays with the first). Debian 12's
# package names, which carry versions (elsewhere `apt-get download` names the one it cannot find). A file whose path
# holds the fourth field is not read (the kernel's translations).
DOC_SOURCES = {
    # source: (Debian packages, licence, files read, paths left out)
    "linux-doc": (("linux-doc-6.1",), "GPL-2.0-only", "usr/share/doc/linux-doc-*/html/**/*.html", "/translations/"),
    "python-doc": (("python3.11-doc",), "PSF-2.0", "usr/share/doc/python3.*/html/**/*.html", None),
    "postgresql-doc": (("postgresql-doc-15",), "PostgreSQL", "usr/share/doc/postgresql-doc-*/html/*.html", None),
    "django-doc": (("python-django-doc",), "BSD-3-Clause", "usr/share/doc/python-django-doc/html/**/*.html", None),
    "perl-doc": (("perl-doc",), "GPL-1.0-or-later OR Artistic-1.0-Perl", "usr/share/perl/*/pod/*.pod", None),
    # man-pages' own sections (a page of section N is NAME.N.gz; Perl's 3perl and WordNet's 5WN pages are not)
    "manpages": (("manpages", "manpages-dev"), "GPL-2.0-or-later", "usr/share/man/man[2-7]/*.[2-7].gz", None),
    "debian-handbook": (("debian-handbook",), "GPL-2.0-or-later OR CC-BY-SA-3.0",
                        "usr/share/doc/debian-handbook/html/en-US/*.html", None),
    "debian-reference": (("debian-reference-en",), "GPL-2.0-or-later", "usr/share/debian-reference/*.en.html", None),
    "debian-policy": (("debian-policy",), "GPL-2.0-or-later", "usr/share/doc/debian-policy/**/*.html", None),
    "git-doc": (("git-doc",), "GPL-2.0-only", "usr/share/doc/git-doc/**/*.html", None),
    "openjdk-doc": (("openjdk-17-doc",), "GPL-2.0-only WITH Classpath-exception-2.0",
                    "usr/share/doc/openjdk-17-jre-headless/api/**/*.html", None),
    "qt5-doc": (("qtbase5-doc-html",), "GFDL-1.3-no-invariants-only", "usr/share/qt5/doc/**/*.html", None),
    "scipy-doc": (("python-scipy-doc",), "BSD-3-Clause", "usr/share/doc/python-scipy-doc/**/*.html", None),
    "pandas-doc": (("python-pandas-doc",), "BSD-3-Clause", "usr/share/doc/python-pandas-doc/html/**/*.html", None),
    "sqlalchemy-doc": (("python-sqlalchemy-doc",), "MIT", "usr/share/doc/python-sqlalchemy-doc/html/**/*.html",
                       None),
    "octave-doc": (("octave-doc",), "GPL-3.0-or-later", "usr/share/doc/octave/**/*.html", None),
    "apache-doc": (("apache2-doc",), "Apache-2.0", "usr/share/doc/apache2-doc/manual/en/**/*.html", None),
    "sphinx-doc": (("sphinx-doc",), "BSD-2-Clause", "usr/share/doc/sphinx-doc/html/**/*.html", None),
}
_DOC_READERS = {".html": html_paragraphs, ".pod": pod_paragraphs, ".gz": man_paragraphs}


def normalise(text: str) -> str:
    """Lower-cased, whitespace-collapsed text: the key for deduplication and held-out assignment."""
    return " ".join(text.lower().split())


# ---------------------------------------------------------------- loading any source


def passages(texts: Sequence[str], tokenizer, min_tokens: int = 100, count: Optional[int] = 200) -> List[str]:
    """Consecutive texts joined into passages of at least `min_tokens` tokens (at most `count` of them; None:
    all). The corpus's sentences are short (99% of held-out ones under 54 tokens): drift past the training
    length is measured, and can be trained, on these."""
    out, current, n = [], [], 0
    for text in texts:
        current.append(text)
        n += len(tokenizer(text, add_special_tokens=False)["input_ids"])
        if n >= min_tokens:
            out.append(" ".join(current))
            current, n = [], 0
            if len(out) == count:
                break
    return out


def load_texts(source: str, split: str = "train", text_column: str = "text", limit: Optional[int] = None,
               cache_dir: Optional[Union[str, Path]] = None, only_sources: Optional[Sequence[str]] = None,
               exclude_sources: Optional[Sequence[str]] = None, shuffle_seed: Optional[int] = None,
               hold_out: bool = False) -> datasets.Dataset:
    """Texts from `source` as a Dataset with a `text` column.

    `source` is `"offline"` or `"offline-xl"` (the built-in recipes; `split` is `train` or `heldout`), a local `.txt`
    (one text per line), `.jsonl`/`.json` or `.csv` file (or one of them gzip-, bz2-, xz- or
    zstd-compressed) or a folder of them, or a Hub dataset id.
    Empty and whitespace-only texts are dropped (and counted in the log). `only_sources` / `exclude_sources`
    keep or drop rows by their `source` column (the offline corpus records each sentence's package).
    With `shuffle_seed`, `limit` takes a stable random sample instead of the first rows (the offline
    corpus's splits run source by source, so its first rows all come from one source).
    A local file has no splits and `split` is ignored, unless `hold_out`: then it is split as the built-in corpus is
    (HELDOUT_PERCENT of its texts held out by a stable hash) and `split` ("train" or "heldout") takes one part.
    """
    looks_local = _kind_suffix(Path(source)) in _KINDS or source.startswith((".", "/", "~"))
    local = source not in RECIPES and Path(source).exists()  # no splits of its own
    if source in RECIPES:
        ds = build_offline_corpus(cache_dir=cache_dir, name=source)[split]
    elif local:
        ds = _load_local(Path(source), text_column)
    elif looks_local:
        raise FileNotFoundError(f"Corpus file {source} does not exist.")
    else:
        ds = datasets.load_dataset(source, split=split)
    if text_column not in ds.column_names:
        raise ValueError(f"{source!r} has no column {text_column!r}; it has {ds.column_names}. "
                         "Pass text_column=... to choose one.")
    if text_column != "text":
        ds = ds.rename_column(text_column, "text")
    before = len(ds)
    ds = ds.filter(lambda batch: [bool(t and t.strip()) for t in batch["text"]], batched=True)
    if len(ds) < before:
        logger.info("Skipped %d empty or whitespace-only texts of %s.", before - len(ds), source)
    if hold_out and local:
        if split not in ("train", "heldout"):
            raise ValueError(f"A local corpus is split into 'train' and 'heldout' (held out by a stable hash), "
                             f"not {split!r}.")
        ds = _split_rows(ds)[split]
    if only_sources or exclude_sources:
        if "source" not in ds.column_names:
            raise ValueError(f"{source!r} has no 'source' column to choose texts by source from.")
        known = set(ds.unique("source"))
        unknown = sorted((set(only_sources or ()) | set(exclude_sources or ())) - known)
        if unknown:
            raise ValueError(f"Unknown sources {unknown}; {source!r} has {sorted(known)}.")
        keep = set(only_sources or known) - set(exclude_sources or ())
        ds = ds.filter(lambda batch: [s in keep for s in batch["source"]], batched=True)
    if shuffle_seed is not None:
        ds = ds.shuffle(seed=shuffle_seed)
    if limit is not None and limit < len(ds):
        logger.info("Took %s %d of the %d texts of %s (%s split).", "a stable sample of" if shuffle_seed is not None
                    else "the first", limit, len(ds), source, split)
        ds = ds.select(range(limit))
    return ds


_KINDS = {".txt": "text", ".jsonl": "json", ".json": "json", ".csv": "csv"}
_COMPRESSED = (".gz", ".bz2", ".xz", ".zst")  # datasets decompresses these itself


def _kind_suffix(path: Path) -> str:
    """The suffix that names a file's kind: `.jsonl` for both `a.jsonl` and `a.jsonl.gz`."""
    suffix = path.suffix.lower()
    return Path(path.stem).suffix.lower() if suffix in _COMPRESSED else suffix


def _load_local(path: Path, text_column: str) -> datasets.Dataset:
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    by_kind: Dict[str, List[str]] = {}
    for f in files:
        kind = _KINDS.get(_kind_suffix(f))
        if kind is None:
            if path.is_dir():
                continue
            raise ValueError(f"Cannot read {f}: expected a .txt, .jsonl, .json or .csv file "
                             f"(optionally compressed: {', '.join(_COMPRESSED)}).")
        try:
            with open(f, "rb") as handle:
                handle.read(1)
        except OSError as err:
            raise OSError(f"Cannot read corpus file {f}: {err}") from err
        by_kind.setdefault(kind, []).append(str(f))
    if len(by_kind) != 1:
        raise ValueError(f"{path} must hold files of one kind (.txt, .jsonl or .csv); "
                         f"found {sorted(by_kind) or 'none'}.")
    kind, data_files = next(iter(by_kind.items()))
    try:
        ds = datasets.load_dataset(kind, data_files=data_files, split="train")
    except Exception as err:  # datasets wraps decode errors in several types; name the file
        raise ValueError(f"Cannot parse {', '.join(data_files)} as {kind}: {err}") from err
    if kind == "text" and text_column != "text":
        raise ValueError(f"Plain-text files have only the column 'text', not {text_column!r}.")
    return ds


# ---------------------------------------------------------------- the offline recipe


def split_sentences(text: str) -> List[str]:
    """Sentences of a paragraph (Punkt, via the dependency-free `nupunkt`)."""
    import nupunkt

    return [s.strip() for s in nupunkt.sent_tokenize(text) if s.strip()]


_ALPHA = re.compile(r"[A-Za-z]")
_XREF = re.compile(r"(See|Cf\.|Called also|Also called|Same as|Syn\.)(?:\s|$)")
_BAD = re.compile(r"https?://|www\.|@\w+\.|\t|[{}<>|\\_=#*~^]|\.\.\.\.|--")


def clean_sentence(sentence: str) -> Optional[str]:
    """The sentence if it reads as ordinary English prose (3-60 words, mostly letters), else None."""
    s = " ".join(sentence.split())
    s = re.sub(r"\s+([,;:.!?])", r"\1", s)  # gaps left where markup was removed
    s = re.sub(r"([,;:])(?:\s*[,;:])+", r"\1", s).rstrip(",;: ")
    s = re.sub(r"[,;:]+([.!?])$", r"\1", s)
    words = s.split()
    if not 3 <= len(words) <= 60 or _BAD.search(s) or _XREF.match(s):
        return None
    letters = len(_ALPHA.findall(s))
    if letters < 0.7 * len(s.replace(" ", "")) or not s[0].isalnum():
        return None
    if s[-1] not in ".!?\"'":
        s = s + "."
    return s


def evaluation_texts() -> set:
    """Normalised texts of the evaluation suites that are installed, to keep out of training."""
    texts = set()
    for loader in (bible_pairs, lee_documents):
        try:
            for item in loader():
                for text in item if isinstance(item, tuple) else (item,):
                    texts.add(normalise(text))
        except Exception as err:  # a missing evaluation source simply excludes nothing
            logger.info("Evaluation source %s not available for exclusion: %s", loader.__name__, err)
    return texts


def _unique_rows(sentences: Iterable[str], source: str, licence: str, seen: set, exclude: set
                 ) -> Iterator[Dict[str, str]]:
    """Rows of the sentences that clean to prose and are new: not in `seen` (extended in place) nor `exclude`."""
    for sentence in sentences:
        cleaned = clean_sentence(sentence)
        key = normalise(cleaned) if cleaned else None
        if key and key not in seen and key not in exclude:
            seen.add(key)
            yield {"text": cleaned, "source": source, "license": licence}


def recipe_rows(root: Path, exclude: Optional[set] = None) -> Iterator[Dict[str, str]]:
    """Clean sentences of the extracted packages under `root`, with source and licence, deduplicated."""
    exclude, seen = exclude or set(), set()
    glosses = (text[0].upper() + text[1:] for synset, _kind, text in wordnet_glosses(root)
               if text and not wordnet_eval_synset(synset))
    yield from _unique_rows(glosses, "wordnet-base", SOURCES["wordnet-base"][0], seen, exclude)
    fortunes = (sentence for entry in fortunes_entries(root) for sentence in split_sentences(entry))
    yield from _unique_rows(fortunes, "fortunes", SOURCES["fortunes"][0], seen, exclude)
    for package, name in (("dict-gcide", "gcide"), ("dict-foldoc", "foldoc"), ("dict-jargon", "jargon")):
        paragraphs = dictd_paragraphs(root / "usr/share/dictd" / f"{name}.dict.dz")
        yield from _unique_rows((sentence for para in paragraphs for sentence in split_sentences(para)), package,
                                SOURCES[package][0], seen, exclude)


def doc_rows(root: Path, exclude: Optional[set] = None, seen: Optional[set] = None) -> Iterator[Dict[str, str]]:
    """Clean sentences of the documentation packages (DOC_SOURCES) under `root`, deduplicated against `seen`
    (normalised texts, extended in place) and each other."""
    exclude, seen = exclude or set(), set() if seen is None else seen
    for source, (_packages, licence, pattern, left_out) in DOC_SOURCES.items():
        paths = [path for path in sorted(root.glob(pattern))
                 if path.is_file() and not (left_out and left_out in str(path))]
        sentences = (sentence for path in paths for para in _DOC_READERS[path.suffix](path)
                     for sentence in split_sentences(para))
        yield from _unique_rows(sentences, source, licence, seen, exclude)


def _split_rows(ds: datasets.Dataset) -> datasets.DatasetDict:
    """`train` and `heldout` by a stable hash of each normalised sentence (HELDOUT_PERCENT held out)."""
    ds = ds.map(lambda b: {"split": ["heldout" if stable_bucket(normalise(t)) < HELDOUT_PERCENT else "train"
                                     for t in b["text"]]}, batched=True)
    return datasets.DatasetDict({name: ds.filter(lambda b, n=name: [s == n for s in b["split"]], batched=True)
                                 .remove_columns("split") for name in ("train", "heldout")})


def build_offline_corpus(cache_dir: Optional[Union[str, Path]] = None, packages_dir: Optional[Path] = None,
                         name: str = OFFLINE) -> datasets.DatasetDict:
    """A built-in English corpus (`train` and `heldout` splits; `name` is one of RECIPES), built once and cached on
    disk."""
    if name not in RECIPES:
        raise ValueError(f"Unknown built-in corpus {name!r}; choose from {', '.join(RECIPES)}.")
    cache = Path(cache_dir or default_cache_dir()) / "corpus" / f"{name}-v{RECIPE_VERSION}"
    if (cache / "dataset_dict.json").is_file():
        return datasets.load_from_disk(str(cache))
    exclude = evaluation_texts()
    if name == OFFLINE:
        root = packages_dir or debian_root(list(SOURCES), cache_dir)
        out = _split_rows(datasets.Dataset.from_list(list(recipe_rows(root, exclude=exclude))))
    else:  # the default corpus, each row in its split, then the documentation's new sentences
        base = build_offline_corpus(cache_dir, packages_dir)
        packages = [p for packages, *_ in DOC_SOURCES.values() for p in packages]
        root = packages_dir or debian_root(packages, cache_dir)
        seen = {normalise(t) for split in base.values() for t in split["text"]}
        docs = _split_rows(datasets.Dataset.from_list(list(doc_rows(root, exclude, seen))))
        out = datasets.DatasetDict({split: datasets.concatenate_datasets([base[split], docs[split]])
                                    for split in ("train", "heldout")})
    tmp = cache.with_name(f"{cache.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    out.save_to_disk(str(tmp))
    shutil.rmtree(cache, ignore_errors=True)
    tmp.rename(cache)  # a crash mid-build leaves no half corpus behind
    return datasets.load_from_disk(str(cache))
