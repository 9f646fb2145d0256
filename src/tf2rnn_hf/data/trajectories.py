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


def shard_rows(texts: Sequence[str], tokenizer, settings: TrajectorySettings,
               max_tokens: int) -> Tuple[List[dict], List[Tuple[int, ...]], Dict[str, int]]:
    """The CPU half of a shard: rows of the non-empty `texts`, each with `_keys` into the distinct prefix
    tokenisations (returned second, unwrapped) that the teacher must embed, and counts of what was found."""
    stats = {"texts": 0, "skipped_empty": 0, "truncated": 0, "prefixes": 0, "teacher_calls": 0}
    kept = [text for text in texts if text and text.strip()]
    stats["skipped_empty"] = len(texts) - len(kept)
    # One batched call: the fast tokenizer's per-call overhead was half of a shard's CPU time.
    encoded = tokenizer(kept, add_special_tokens=False)["input_ids"] if kept else []
    unique: Dict[Tuple[int, ...], int] = {}
    rows: List[dict] = []
    for text, ids in zip(kept, encoded):
        truncated = len(ids) > max_tokens
        ids = ids[:max_tokens]
        row = {"text": text, "input_ids": ids, "truncated": truncated}
        if settings.prefix_unit == "token":
            steps = target_steps(len(ids), settings.stride, settings.dense_prefixes)
            keys = [tuple(ids[:t]) for t in steps]
        else:
            ends, token_lists = char_prefixes(text, tokenizer, max_tokens)
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
    return rows, list(unique), stats


def shard_dataset(rows: List[dict], embeddings: np.ndarray, settings: TrajectorySettings,
                  dim: int) -> datasets.Dataset:
    """The rows of `shard_rows` with their trajectories: the embeddings [teacher calls, dim] their keys index."""
    for row in rows:
        row["trajectory"] = embeddings[row.pop("_keys")]
    return datasets.Dataset.from_list(rows, features=_features(settings.prefix_unit, dim))


def _max_tokens(teacher: Teacher, settings: TrajectorySettings) -> int:
    if settings.max_tokens is not None:
        return settings.max_tokens
    return teacher.max_length - len(teacher.wrap([]))


def _embed(teacher: Teacher, unique: List[Tuple[int, ...]], settings: TrajectorySettings,
           progress: bool = False) -> np.ndarray:
    return teacher.embed_batched([teacher.wrap(k) for k in unique], token_budget=settings.token_budget,
                                 progress=progress).numpy().astype(np.float16)


def compute_shard(texts: Sequence[str], teacher: Teacher, settings: TrajectorySettings,
                  progress: bool = False) -> Tuple[datasets.Dataset, Dict[str, int]]:
    """Trajectories of `texts` (one row per non-empty text) and counts of what was computed."""
    rows, unique, stats = shard_rows(texts, teacher.tokenizer, settings, _max_tokens(teacher, settings))
    return shard_dataset(rows, _embed(teacher, unique, settings, progress), settings, teacher.dim), stats


def _save_shard(ds: datasets.Dataset, stats: Dict[str, float], shards: Path, key: str) -> None:
    tmp = shards / f".tmp-{key}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    ds.save_to_disk(str(tmp))
    (tmp / "stats.json").write_text(json.dumps(stats))
    try:
        os.replace(tmp, shards / key)  # atomic: a shard exists whole or not at all
    except OSError:  # another process finished the same shard first
        shutil.rmtree(tmp, ignore_errors=True)


# Shard workers (`generate(workers=N)`): processes that tokenise and write shards while the parent keeps the
# teacher busy. Module-level, so that a pool can pickle them.
_worker_tokenizer = None


def _init_worker(tokenizer) -> None:
    global _worker_tokenizer
    _worker_tokenizer = tokenizer


def _prepare_in_worker(texts, settings, max_tokens):
    return shard_rows(texts, _worker_tokenizer, settings, max_tokens)


def _write_in_worker(rows, embeddings, settings, dim, stats, shards, key) -> None:
    _save_shard(shard_dataset(rows, embeddings, settings, dim), stats, shards, key)


def _generate_pipelined(chunks: List[List[str]], keys: List[str], mine: List[int], teacher: Teacher,
                        settings: TrajectorySettings, shards: Path, workers: int, progress: bool) -> None:
    """`generate`'s loop with `workers` processes doing the CPU halves: a GPU teacher's pass was bound by one
    core tokenising and writing (a shard's CPU half took longer than its teacher calls)."""
    import multiprocessing
    from collections import deque
    from concurrent.futures import ProcessPoolExecutor

    max_tokens = _max_tokens(teacher, settings)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(mine), desc=f"trajectories ({workers} workers)", unit="shard")
    # fork where there is one: spawn re-imports the caller's main module, which without a `__main__` guard
    # hung the pass, and costs each worker seconds of imports. The workers never touch the parent's CUDA.
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context(method), initializer=_init_worker,
                             initargs=(teacher.tokenizer,)) as pool:
        todo = deque(mine)
        prepared = deque()
        writes = []
        while todo and len(prepared) < 2 * workers:
            index = todo.popleft()
            prepared.append((index, pool.submit(_prepare_in_worker, chunks[index], settings, max_tokens)))
        last = time.perf_counter()
        while prepared:
            index, future = prepared.popleft()
            rows, unique, stats = future.result()
            if todo:
                nxt = todo.popleft()
                prepared.append((nxt, pool.submit(_prepare_in_worker, chunks[nxt], settings, max_tokens)))
            embeddings = _embed(teacher, unique, settings)
            now = time.perf_counter()
            stats["seconds"] = round(now - last, 3)  # this shard's share of the pass's wall time
            last = now
            writes.append(pool.submit(_write_in_worker, rows, embeddings, settings, teacher.dim, stats, shards,
                                      keys[index]))
            # Surface a failed write now rather than after the whole pass.
            while writes and writes[0].done():
                writes.pop(0).result()
                if bar is not None:
                    bar.update()
        for future in writes:
            future.result()
            if bar is not None:
                bar.update()
    if bar is not None:
        bar.close()


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
             progress: bool = True, workers: int = 0) -> Path:
    """Compute this process's missing shards (every `num_processes`-th, from `process_index`); returns
    the run manifest. Finished shards are never recomputed. `workers` > 0 starts that many processes to
    tokenise and write shards while this one runs the teacher (for a GPU teacher; the shards are the same)."""
    if workers < 0:
        raise ValueError(f"workers must be zero (no shard workers) or positive, got {workers}.")
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
    teacher.bf16 = settings.bf16
    if workers > 0 and len(mine) > 1:
        _generate_pipelined(chunks, keys, mine, teacher, settings, shards, workers, progress)
        return run
    iterator: Iterable[int] = mine
    if progress and mine:
        from tqdm.auto import tqdm

        iterator = tqdm(mine, desc=f"trajectories (rank {process_index})", unit="shard")
    for index in iterator:
        start = time.perf_counter()
        ds, stats = compute_shard(chunks[index], teacher, settings)
        stats["seconds"] = round(time.perf_counter() - start, 3)
        _save_shard(ds, stats, shards, keys[index])
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
          cache_dir: Optional[Union[str, Path]] = None, progress: bool = True, workers: int = 0) -> datasets.Dataset:
    """Generate (sharing the work among accelerate processes when launched that way, each with `workers`
    shard workers) and load."""
    import torch
    from accelerate import PartialState

    settings = settings or TrajectorySettings()
    # On a machine without GPUs, `accelerate launch --multi_gpu` processes only connect (over gloo) when
    # the state is created for CPU; the launcher overrides ACCELERATE_USE_CPU, so ask for it here.
    state = PartialState(cpu=not torch.cuda.is_available())
    run = generate(texts, teacher, settings, cache_dir, state.process_index, state.num_processes,
                   progress=progress and state.is_local_main_process, workers=workers)
    state.wait_for_everyone()
    return load(run)
