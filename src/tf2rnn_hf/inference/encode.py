"""The bulk path: final embeddings of finished texts, batched and length-sorted (no streaming)."""

from typing import Optional, Sequence

import torch

from ..models import TF2RNNModel


@torch.no_grad()
def encode_texts(model: TF2RNNModel, tokenizer, texts: Sequence[str], batch_size: int = 64,
                 max_length: Optional[int] = None) -> torch.Tensor:
    """Final embeddings of `texts` ([N, output_size], float32 on CPU), each text cut at `max_length` steps
    (default `model.config.max_input_length`: 256 tokens, as the teacher reads, or 1,024 bytes)."""
    texts = list(texts)
    max_length = max_length if max_length is not None else model.config.max_input_length
    model.eval()
    device = next(model.parameters()).device
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # less padding per batch
    out = torch.zeros(len(texts), model.config.output_size)
    for start in range(0, len(order), batch_size):
        idx = order[start:start + batch_size]
        batch = tokenizer([texts[i] for i in idx], padding=True, truncation=True, max_length=max_length,
                          return_tensors="pt").to(device)
        out[idx] = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                         use_cache=False).pooler_output.float().cpu()
    return out
