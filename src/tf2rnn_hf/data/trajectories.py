"""Teacher trajectories: the teacher's embedding of every prefix of every text, cached as a sharded
`datasets` dataset.

Prefixes come in two units: `token` (the teacher's WordPiece tokens[:t]) and `char` (text[:c],
re-tokenised, as a user types). Identical prefix tokenisations within a shard are embedded once, and
the teacher runs on length-sorted batches under a token budget. Shards are written atomically under a
fingerprint of (teacher, texts, settings): a crash loses only the shard in progress, and several
processes each write their own shards before one merge.
"""

import dataclasses
import hashlib
import json
import os
import shutil
import time
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple, Union

import datasets
import numpy as np

from ..utils import default_cache_dir, write_atomic
from .teacher import Teacher, fast_bf16

PREFIX_UNITS = ("token", "char")


@dataclasses.dataclass
class TrajectorySettings:
    """What a trajectory cache holds; every field enters its fingerprint."""

    prefix_unit: str = "token"  # "token": tokens[:t]; "char": text[:c] re-tokenised, as typed (keystrokes)
    max_tokens: Optional[int] = 64  # text tokens kept (without specials); longer texts are truncated
    stride: int = 1  # target every stride-th prefix, plus the first and the last; 1 = the full trajectory
    # Every prefix up to this length keeps a target whatever the stride: short prefixes are the teacher's
    # cheapest calls and the first thing a user types (--stride 3 cost them keystroke cosine).
    dense_prefixes: int = dataclasses.field(default=0, metadata={"key_when_set": True})
    # Teacher under bf16 autocast (cosine 0.99998 to fp32); None: where the teacher's device computes bf16
    # natively (`teacher.fast_bf16`), which the cache's fingerprint then records as True or False.
    bf16: Optional[bool] = None
    token_budget: int = 4096  # padded tokens per teacher call
    shard_size: int = 2000  # texts per shard

    def __post_init__(self):
        if self.prefix_unit not in PREFIX_UNITS:
            raise ValueError(f"Unknown prefix_unit {self.prefix_unit!r}; choose one of {', '.join(PREFIX_UNITS)}.")
        for name in ("stride", "token_budget", "shard_size"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}.")
        if self.dense_prefixes < 0:
            raise ValueError(f"dense_prefixes must be zero or positive, got {self.dense_prefixes}.")
        if self.max_tokens is not None and self.max_tokens <= 0:
            raise ValueError(f"max_tokens must be positive or None, got {self.max_tokens}.")


def target_steps(length: int, stride: int, dense_prefixes: int = 0) -> List[int]:
    """Prefix lengths (1-based) that get a target: every `stride`-th, every one up to `dense_prefixes`, and
    always the first and the last."""
    if length <= 0:
        return []
    return sorted({1, length, *range(stride, length + 1, stride), *range(1, min(dense_prefixes, length) + 1)})


def char_prefixes(text: str, tokenizer, max_tokens: Optional[int]) -> Tuple[List[int], List[List[int]]]:
    """Character prefix ends c and the tokens of text[:c], keeping only the first c of each distinct
    tokenisation (typing a space changes no token, so it needs no new target)."""
    ends, token_lists, last = [], [], None
    encoded = tokenizer([text[:c] for c in range(1, len(text) + 1)], add_special_tokens=False)["input_ids"]
    for c, ids in enumerate(encoded, start=1):
        if max_tokens is not None and len(ids) > max_tokens:
            break
        if ids and ids != last:
            ends.append(c)
            token_lists.append(ids)
            last = ids
    return ends, token_lists


def shared_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens two tokenisations share."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def _features(prefix_unit: str, dim: int) -> datasets.Features:
    common = {
        "text": datasets.Value("string"),
        "input_ids": datasets.Sequence(datasets.Value("int32")),
        "truncated": datasets.Value("bool"),
        "target_steps": datasets.Sequence(datasets.Value("int32")),
        "trajectory": datasets.Array2D(shape=(None, dim), dtype="float16"),
    }
    if prefix_unit == "char":
        common.update({
            "char_ends": datasets.Sequence(datasets.Value("int32")),
            "char_input_ids": datasets.Sequence(datasets.Sequence(datasets.Value("int32"))),
            "shared_tokens": datasets.Sequence(datasets.Value("int32")),
        })
    return datasets.Features(common)


def compute_shard(texts: Sequence[str], teacher: Teacher, settings: TrajectorySettings,
                  progress: bool = False) -> Tuple[datasets.Dataset, Dict[str, int]]:
    """Trajectories of `texts` (one row per non-empty text) and counts of what was computed."""
    stats = {"texts": 0, "skipped_empty": 0, "truncated": 0, "prefixes": 0, "teacher_calls": 0}
    max_tokens = settings.max_tokens
    if max_tokens is None:
        max_tokens = teacher.max_length - len(teacher.wrap([]))
    unique: Dict[Tuple[int, ...], int] = {}
    rows: List[dict] = []
    for text in texts:
        if not text or not text.strip():
            stats["skipped_empty"] += 1
            continue
        ids = teacher.tokenizer(text, add_special_tokens=False)["input_ids"]
        truncated = len(ids) > max_tokens
        ids = ids[:max_tokens]
        row = {"text": text, "input_ids": ids, "truncated": truncated}
        if settings.prefix_unit == "token":
            steps = target_steps(len(ids), settings.stride, settings.dense_prefixes)
            keys = [tuple(ids[:t]) for t in steps]
        else:
            ends, token_lists = char_prefixes(text, teacher.tokenizer, max_tokens)
            picked = target_steps(len(ends), settings.stride, settings.dense_prefixes)
            ends = [ends[i - 1] for i in picked]
            token_lists = [token_lists[i - 1] for i in picked]
            row.update(char_ends=ends, char_input_ids=token_lists,
                       shared_tokens=[shared_prefix(t, ids) for t in token_lists])
            steps, keys = list(range(1, len(ends) + 1)), [tuple(t) for t in token_lists]
        row["target_steps"] = steps
        row["_keys"] = [unique.setdefault(k, len(unique)) for k in keys]
        stats["texts"] += 1
        stats["truncated"] += int(truncated)
        stats["prefixes"] += len(keys)
        rows.append(row)
    stats["teacher_calls"] = len(unique)
    embeddings = teacher.embed_batched([teacher.wrap(k) for k in unique], token_budget=settings.token_budget,
                                       progress=progress).numpy().astype(np.float16)
    for row in rows:
        row["trajectory"] = embeddings[row.pop("_keys")]
    return datasets.Dataset.from_list(rows, features=_features(settings.prefix_unit, teacher.dim)), stats


def byte_rows(char_dataset: datasets.Dataset, offset: int = 3) -> datasets.Dataset:
    """Character-level trajectories re-indexed for a byte-level student: input_ids are the UTF-8 bytes of
    the text as far as its trajectory goes (+ `offset`, ByT5's ids), and each target sits at the byte that
    ends its keystroke."""

    def convert(row):
        text = row["text"][:row["char_ends"][-1]] if row["char_ends"] else ""
        return {"input_ids": [b + offset for b in text.encode("utf-8")],
                "target_steps": [len(row["text"][:c].encode("utf-8")) for c in row["char_ends"]]}

    if "char_ends" not in char_dataset.column_names:
        raise ValueError("A byte-level student trains on character-level trajectories (prefix_unit='char').")
    return char_dataset.map(convert, remove_columns=["char_input_ids", "shared_tokens"], desc="byte rows")


def resolve(settings: TrajectorySettings, teacher: Teacher) -> TrajectorySettings:
    """`settings` with `bf16=None` decided for the teacher's device."""
    if settings.bf16 is not None:
        return settings
    return dataclasses.replace(settings, bf16=fast_bf16(teacher.device))


def texts_fingerprint(texts: Sequence[str]) -> str:
    """A short hash of the texts, in order: the key of their shards and runs."""
    digest = hashlib.sha256()
    for text in texts:
        digest.update(text.encode("utf-8", errors="replace"))
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def cache_root(teacher: Teacher, settings: TrajectorySettings, cache_dir: Optional[Union[str, Path]] = None) -> Path:
    """The cache folder of a teacher and settings. Shards inside are keyed by their own texts, so a larger
    slice of the same corpus reuses every shard a smaller one computed."""
    settings = resolve(settings, teacher)
    # Fields added after caches existed (metadata `key_when_set`) enter the key only when set, so those caches
    # keep their folders.
    fields = {f.name: getattr(settings, f.name) for f in dataclasses.fields(settings)
              if not (f.metadata.get("key_when_set") and getattr(settings, f.name) == f.default)}
    key = json.dumps({"teacher": teacher.fingerprint(), "settings": fields}, sort_keys=True)
    name = f"{settings.prefix_unit}-{hashlib.sha256(key.encode()).hexdigest()[:16]}"
    return Path(cache_dir or default_cache_dir()) / "trajectories" / name


def cache_path(teacher: Teacher, texts: Sequence[str], settings: TrajectorySettings,
               cache_dir: Optional[Union[str, Path]] = None) -> Path:
    """The run manifest of these texts (the ordered list of their shards): <root>/runs/<fingerprint>.json."""
    return cache_root(teacher, settings, cache_dir) / "runs" / f"{texts_fingerprint(texts)}.json"


def generate(texts: Sequence[str], teacher: Teacher, settings: TrajectorySettings,
             cache_dir: Optional[Union[str, Path]] = None, process_index: int = 0, num_processes: int = 1,
             progress: bool = True) -> Path:
    """Compute this process's missing shards (every `num_processes`-th, from `process_index`); returns
    the run manifest. Finished shards are never recomputed."""
    texts = list(texts)
    settings = resolve(settings, teacher)
    run = cache_path(teacher, texts, settings, cache_dir)
    shards = run.parent.parent / "shards"
    shards.mkdir(parents=True, exist_ok=True)
    run.parent.mkdir(exist_ok=True)
    size = settings.shard_size
    chunks = [texts[i:i + size] for i in range(0, len(texts), size)] or [[]]
    keys = [texts_fingerprint(chunk) for chunk in chunks]
    write_atomic(run, json.dumps({"shards": keys, "texts": len(texts), "teacher": teacher.hub_id,
                                   "settings": dataclasses.asdict(settings)}, indent=1))
    mine = [i for i in range(len(chunks)) if i % num_processes == process_index and not (shards / keys[i]).is_dir()]
    iterator: Iterable[int] = mine
    if progress and mine:
        from tqdm.auto import tqdm

        iterator = tqdm(mine, desc=f"trajectories (rank {process_index})", unit="shard")
    teacher.bf16 = settings.bf16
    for index in iterator:
        start = time.perf_counter()
        ds, stats = compute_shard(chunks[index], teacher, settings)
        stats["seconds"] = round(time.perf_counter() - start, 3)
        tmp = shards / f".tmp-{keys[index]}-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        ds.save_to_disk(str(tmp))
        (tmp / "stats.json").write_text(json.dumps(stats))
        try:
            os.replace(tmp, shards / keys[index])  # atomic: a shard exists whole or not at all
        except OSError:  # another process finished the same shard first
            shutil.rmtree(tmp, ignore_errors=True)
    return run


def _shard_dirs(run: Union[str, Path]) -> List[Path]:
    run = Path(run)
    keys = json.loads(run.read_text())["shards"]
    dirs = [run.parent.parent / "shards" / key for key in keys]
    missing = [i for i, d in enumerate(dirs) if not d.is_dir()]
    if missing:
        raise RuntimeError(f"Trajectory cache {run} is missing shards {missing[:10]}; run generate() again.")
    return dirs


def load(run: Union[str, Path]) -> datasets.Dataset:
    """Merge the shards of a finished run, in order."""
    return datasets.concatenate_datasets([datasets.load_from_disk(str(d)) for d in _shard_dirs(run)])


def stats(*runs: Union[str, Path]) -> Dict[str, float]:
    """Summed per-shard counts (texts, prefixes, teacher calls, seconds, ...) of one or more runs."""
    total: Dict[str, float] = {}
    for folder in (d for run in runs for d in _shard_dirs(run)):
        for key, value in json.loads((folder / "stats.json").read_text()).items():
            total[key] = total.get(key, 0) + value
    return total


def build(texts: Sequence[str], teacher: Teacher, settings: Optional[TrajectorySettings] = None,
          cache_dir: Optional[Union[str, Path]] = None, progress: bool = True) -> datasets.Dataset:
    """Generate (sharing the work among accelerate processes when launched that way) and load."""
    import torch
    from accelerate import PartialState

    settings = settings or TrajectorySettings()
    # On a machine without GPUs, `accelerate launch --multi_gpu` processes only connect (over gloo) when
    # the state is created for CPU; the launcher overrides ACCELERATE_USE_CPU, so ask for it here.
    state = PartialState(cpu=not torch.cuda.is_available())
    run = generate(texts, teacher, settings, cache_dir, state.process_index, state.num_processes,
                   progress=progress and state.is_local_main_process)
    state.wait_for_everyone()
    return load(run)
