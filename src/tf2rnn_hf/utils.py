"""Small helpers shared by every stage: the cache folder, atomic writes, padding and word starts."""

import hashlib
import os
from pathlib import Path
from typing import Optional, Sequence, Tuple, Union

import torch


def default_cache_dir() -> Path:
    """Where tf2rnn_hf caches derived artefacts (`TF2RNN_CACHE`, else under HF_HOME or ~/.cache)."""
    if os.environ.get("TF2RNN_CACHE"):
        return Path(os.environ["TF2RNN_CACHE"])
    hf_home = os.environ.get("HF_HOME")
    return Path(hf_home) / "tf2rnn_hf" if hf_home else Path.home() / ".cache" / "tf2rnn_hf"


def write_atomic(path: Union[str, Path], data: Union[str, bytes]) -> None:
    """Write `data` to `path` through a temporary file and a rename: a crash never leaves half a file."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data) if isinstance(data, bytes) else tmp.write_text(data)
    os.replace(tmp, path)


def pad_ids(sequences: Sequence[Sequence[int]], pad_id: int = 0) -> Tuple[torch.Tensor, torch.Tensor]:
    """Right-padded ids and the attention mask for id sequences (lists or tensors): ([N, T], [N, T])."""
    width = max((len(seq) for seq in sequences), default=0)
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    mask = torch.zeros(len(sequences), width, dtype=torch.long)
    for i, seq in enumerate(sequences):
        ids[i, :len(seq)] = torch.as_tensor(seq, dtype=torch.long)
        mask[i, :len(seq)] = 1
    return ids, mask


def stable_bucket(key: str, buckets: int = 100) -> int:
    """A bucket in [0, buckets) that depends only on `key` (not on Python's salted hash)."""
    return int.from_bytes(hashlib.sha1(key.encode("utf-8")).digest()[:8], "big") % buckets


def _cpuinfo_line(field: str) -> Optional[str]:
    """The first /proc/cpuinfo line that starts with `field`, or None (no such file or line)."""
    try:
        return next(line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith(field))
    except (OSError, StopIteration):
        return None


def cpu_flags() -> str:
    """The CPU's feature flags (/proc/cpuinfo), or the processor's name where there is no such file."""
    import platform

    return _cpuinfo_line("flags") or platform.processor()


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo), or the processor's name where there is none: what a timing ran on."""
    import platform

    line = _cpuinfo_line("model name")
    return line.split(":", 1)[1].strip() if line else platform.processor() or platform.machine()


def continuation_table(tokenizer) -> torch.Tensor:
    """[vocab] booleans: the tokens that continue a word (WordPiece's, which start with its "##" prefix)."""
    prefix = getattr(getattr(getattr(tokenizer, "backend_tokenizer", None), "model", None),
                     "continuing_subword_prefix", None)
    if not prefix:
        raise ValueError(f"{type(tokenizer).__name__} has no WordPiece continuation prefix: word starts (for "
                         "tail_layers) are read from a WordPiece tokenizer's '##' tokens.")
    table = torch.zeros(len(tokenizer), dtype=torch.bool)
    for token, i in tokenizer.get_vocab().items():
        table[i] = token.startswith(prefix)
    return table
