"""Text sources behind one interface: a Hub dataset id, local .txt/.jsonl/.csv files, or the offline recipe.

The offline recipe builds an English corpus from Debian packages (WordNet glosses, fortunes, the dictd
dictionaries), cleans and sentence-splits it, deduplicates, records each sentence's source and licence,
and writes a held-out split by a stable hash. Evaluation data stays out of training: the WordNet synsets
chosen for definition retrieval (`wordnet_eval_synset`), and any sentence that also occurs in the Bible
or Lee evaluation texts when those are present.
"""

import logging
import os
import re
import shutil
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence, Union

import datasets

from ..utils import default_cache_dir, stable_bucket
from .evaluation_sets import bible_pairs, lee_documents, wordnet_eval_synset
from .sources import debian_root, dictd_paragraphs, fortunes_entries, wordnet_glosses

logger = logging.getLogger(__name__)

OFFLINE = "offline"
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
               exclude_sources: Optional[Sequence[str]] = None, shuffle_seed: Optional[int] = None
               ) -> datasets.Dataset:
    """Texts from `source` as a Dataset with a `text` column.

    `source` is `"offline"` (the built-in recipe; `split` is `train` or `heldout`), a local `.txt`
    (one text per line), `.jsonl`/`.json` or `.csv` file (or one of them gzip-, bz2-, xz- or
    zstd-compressed) or a folder of them, or a Hub dataset id.
    Empty and whitespace-only texts are dropped (and counted in the log). `only_sources` / `exclude_sources`
    keep or drop rows by their `source` column (the offline corpus records each sentence's package).
    With `shuffle_seed`, `limit` takes a stable random sample instead of the first rows (the offline
    corpus's splits run source by source, so its first rows all come from one source).
    """
    looks_local = _kind_suffix(Path(source)) in _KINDS or source.startswith((".", "/", "~"))
    if source == OFFLINE:
        ds = build_offline_corpus(cache_dir=cache_dir)[split]
    elif Path(source).exists():
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
    if limit is not None:
        ds = ds.select(range(min(limit, len(ds))))
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


def recipe_rows(root: Path, exclude: Optional[set] = None) -> Iterator[Dict[str, str]]:
    """Clean sentences of the extracted packages under `root`, with source and licence, deduplicated."""
    exclude = exclude or set()
    seen = set()

    def emit(text: str, source: str) -> Iterator[Dict[str, str]]:
        key = normalise(text)
        if key in seen or key in exclude:
            return
        seen.add(key)
        yield {"text": text, "source": source, "license": SOURCES[source][0]}

    for synset, _kind, text in wordnet_glosses(root):
        if wordnet_eval_synset(synset):
            continue
        cleaned = clean_sentence(text[0].upper() + text[1:]) if text else None
        if cleaned:
            yield from emit(cleaned, "wordnet-base")
    for entry in fortunes_entries(root):
        for sentence in split_sentences(entry):
            cleaned = clean_sentence(sentence)
            if cleaned:
                yield from emit(cleaned, "fortunes")
    for package, name in (("dict-gcide", "gcide"), ("dict-foldoc", "foldoc"), ("dict-jargon", "jargon")):
        for para in dictd_paragraphs(root / "usr/share/dictd" / f"{name}.dict.dz"):
            for sentence in split_sentences(para):
                cleaned = clean_sentence(sentence)
                if cleaned:
                    yield from emit(cleaned, package)


def build_offline_corpus(cache_dir: Optional[Union[str, Path]] = None, packages_dir: Optional[Path] = None
                         ) -> datasets.DatasetDict:
    """The offline English corpus (`train` and `heldout` splits), built once and cached on disk."""
    cache = Path(cache_dir or default_cache_dir()) / "corpus" / f"offline-v{RECIPE_VERSION}"
    if (cache / "dataset_dict.json").is_file():
        return datasets.load_from_disk(str(cache))
    root = packages_dir or debian_root(list(SOURCES), cache_dir)
    rows = list(recipe_rows(root, exclude=evaluation_texts()))
    ds = datasets.Dataset.from_list(rows)
    ds = ds.map(lambda b: {"split": ["heldout" if stable_bucket(normalise(t)) < HELDOUT_PERCENT else "train"
                                     for t in b["text"]]}, batched=True)
    out = datasets.DatasetDict({name: ds.filter(lambda b, n=name: [s == n for s in b["split"]], batched=True)
                                .remove_columns("split") for name in ("train", "heldout")})
    tmp = cache.with_name(f"{cache.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    out.save_to_disk(str(tmp))
    shutil.rmtree(cache, ignore_errors=True)
    tmp.rename(cache)  # a crash mid-build leaves no half corpus behind
    return datasets.load_from_disk(str(cache))
