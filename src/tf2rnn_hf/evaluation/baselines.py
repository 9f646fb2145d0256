"""The static, order-free baseline, in one implementation: each text embeds as the (weighted) sum of its
tokens' teacher vectors, normalised. It is the method behind Model2Vec (per-token teacher vectors, SIF
weights, PCA), written here; the real Model2Vec runs as a peer in its own environment."""

from typing import Callable, List, Optional, Sequence

import torch
import torch.nn.functional as F

Encoder = Callable[[Sequence[str]], torch.Tensor]


def token_frequencies(tokenizer, texts: Sequence[str]) -> torch.Tensor:
    """Token counts over `texts` (+1 smoothing), for SIF weights."""
    counts = torch.ones(len(tokenizer))
    for ids in tokenizer(list(texts), add_special_tokens=False)["input_ids"]:
        counts += torch.bincount(torch.as_tensor(ids, dtype=torch.long), minlength=len(counts)).float()
    return counts


def sif_weights(counts: torch.Tensor, a: float = 1e-3) -> torch.Tensor:
    """Smooth inverse frequency a / (a + p(w)) (Arora et al. 2017, as Model2Vec weights its vectors)."""
    return a / (a + counts / counts.sum())


class StaticEmbedding:
    """Per-token vectors ([vocab, D], the teacher's embedding of each token alone), optionally weighted
    (SIF) and PCA-reduced (fitted on the table). A text, or a prefix, embeds as its tokens' normalised sum.

    >>> static = StaticEmbedding(teacher.token_vectors())
    >>> static.trajectory(ids)         # after every token: [len(ids), D]
    >>> static.encoder(tokenizer)(["a text"])
    """

    def __init__(self, token_vectors: torch.Tensor, weights: Optional[torch.Tensor] = None,
                 pca_dims: Optional[int] = None):
        table = token_vectors.float()
        if pca_dims:
            centred = table - table.mean(0)
            # Exact SVD (seconds for a [V, D] table, no slower than pca_lowrank): its randomised range finder moved the
            # baseline's scores in the third decimal from one evaluation to the next.
            _, _, vh = torch.linalg.svd(centred, full_matrices=False)
            table = centred @ vh[:pca_dims].T
        self.table = table if weights is None else table * weights[:, None]

    @property
    def dim(self) -> int:
        """Width of the embeddings."""
        return self.table.shape[1]

    def trajectory(self, ids: Sequence[int]) -> torch.Tensor:
        """The embedding after every token of `ids`: [len(ids), D]."""
        vectors = self.table[torch.as_tensor(ids, dtype=torch.long)]
        return F.normalize(torch.cumsum(vectors, 0), dim=-1)

    def embed_ids(self, sequences: Sequence[Sequence[int]]) -> torch.Tensor:
        """One embedding per id sequence ([N, D]); an empty sequence gives zeros."""
        out = torch.zeros(len(sequences), self.dim)
        for i, ids in enumerate(sequences):
            if len(ids):
                out[i] = self.table[torch.as_tensor(ids, dtype=torch.long)].sum(0)
        return F.normalize(out, dim=-1)

    def encoder(self, tokenizer, max_length: Optional[int] = None) -> Encoder:
        """texts -> [N, D], tokenised without special tokens (cut at `max_length` tokens)."""
        def encode(texts: Sequence[str]) -> torch.Tensor:
            ids: List[List[int]] = tokenizer(list(texts), add_special_tokens=False, truncation=max_length is not None,
                                             max_length=max_length)["input_ids"]
            return self.embed_ids(ids)
        return encode
