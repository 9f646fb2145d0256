"""The demo's search: one exact inner-product index per encoder over the same texts, built once and cached,
and a session that follows one person's typing with the student's stream and the teacher's re-encoding.

The index is faiss (`IndexFlatIP`): exact top-k over unit vectors (cosine), under a millisecond at the
demo's 10,000 texts on one core, so the student and teacher lists differ only by their encoders, never by
an approximate search; wheels exist for every platform, and the same library scales the corpus up with
`IndexHNSWFlat` when exact search stops being cheap.
"""

import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, List, Optional, Sequence, Union

import numpy as np
import torch

from ..data.corpus import load_texts
from ..data.teacher import Teacher
from ..inference.encode import encode_texts
from ..inference.streaming import StreamingEncoder
from ..models import TF2RNNModel
from ..utils import default_cache_dir

Encoder = Callable[[Sequence[str]], torch.Tensor]


def demo_texts(n: int = 10_000, path: Optional[Union[str, Path]] = None) -> List[str]:
    """The texts to search: `path` (one per line), or `n` sentences sampled across every source of the
    offline corpus's train split (its held-out sentences and the evaluation sets are never in it)."""
    if path is not None:
        texts = [line.strip() for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
        if not texts:
            raise ValueError(f"The index file {path} holds no text (one document per line).")
        return texts
    return list(load_texts("offline", "train", limit=n, shuffle_seed=0)["text"])


class SearchIndex:
    """Unit vectors of `texts` from one encoder in a faiss inner-product index, cached on disk by the
    texts and `key` (which names the encoder), so a demo builds it once."""

    def __init__(self, texts: Sequence[str], encode: Encoder, key: str, cache_dir: Optional[Union[str, Path]] = None,
                 batch: int = 512):
        import faiss

        self.texts = list(texts)
        digest = hashlib.sha256(("\n".join(self.texts) + "\0" + key).encode()).hexdigest()[:16]
        path = Path(cache_dir or Path(default_cache_dir()) / "demo") / f"{digest}.npy"
        if path.is_file():
            vectors = np.load(path)
        else:
            vectors = np.concatenate([encode(self.texts[i:i + batch]).float().numpy()
                                      for i in range(0, len(self.texts), batch)]).astype(np.float32)
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{digest}.tmp.npy")
            np.save(tmp, vectors)
            tmp.replace(path)  # whole or absent: an interrupted build is redone, never half-read
        self.vectors = vectors
        self.index = faiss.IndexFlatIP(vectors.shape[1])
        self.index.add(vectors)

    def search(self, query: torch.Tensor, k: int = 10) -> List[int]:
        """Ids of the `k` texts nearest to `query` (a unit vector), best first."""
        _, ids = self.index.search(query.detach().float().reshape(1, -1).numpy(), min(k, len(self.texts)))
        return [int(i) for i in ids[0]]


@dataclass
class Results:
    """What the page shows after one update."""

    text: str
    student: List[int]
    teacher: List[int]
    student_ms: float
    teacher_ms: float
    keystrokes: int

    @property
    def overlap(self) -> int:
        return len(set(self.student) & set(self.teacher))


@dataclass
class SearchSession:
    """One person's query box: each change of the text becomes keystrokes on the student's stream (typed
    characters, and deletes as pops), while the teacher re-encodes the whole prefix, as it must."""

    model: TF2RNNModel
    tokenizer: object
    teacher: Teacher
    student_index: SearchIndex
    teacher_index: SearchIndex
    k: int = 10
    keystrokes: int = 0
    stream: StreamingEncoder = field(init=False)

    def __post_init__(self):
        self.stream = StreamingEncoder(self.model, self.tokenizer)

    def update(self, text: str) -> Results:
        """Bring the stream to `text` (the box's new content) and rank both indexes for it."""
        old = self.stream.text
        common = 0
        while common < min(len(old), len(text)) and old[common] == text[common]:
            common += 1
        start = time.perf_counter()
        if len(old) > common:
            self.stream.delete(len(old) - common)
        for char in text[common:]:
            self.stream.type(char)
        student_ms = (time.perf_counter() - start) * 1e3
        self.keystrokes += len(old) - common + len(text) - common
        if not text.strip():
            return Results(text, [], [], student_ms, 0.0, self.keystrokes)
        start = time.perf_counter()
        with torch.inference_mode():
            query = self.teacher.encode([text])[0]
        teacher_ms = (time.perf_counter() - start) * 1e3
        return Results(text, self.student_index.search(self.stream.embedding, self.k),
                       self.teacher_index.search(query, self.k), student_ms, teacher_ms, self.keystrokes)


def build_indexes(model: TF2RNNModel, tokenizer, teacher: Teacher, texts: Sequence[str], model_key: str,
                  cache_dir: Optional[Union[str, Path]] = None):
    """(student index, teacher index) over `texts`: each encoder's embeddings of the whole texts."""
    student = SearchIndex(texts, lambda t: encode_texts(model, tokenizer, t), f"student:{model_key}", cache_dir)
    teacher_index = SearchIndex(texts, lambda t: teacher.encode(list(t)), f"teacher:{teacher.fingerprint()}",
                                cache_dir)
    return student, teacher_index
