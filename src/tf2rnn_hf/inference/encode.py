"""The bulk path: final embeddings of finished texts, batched and length-sorted (no streaming)."""

from typing import Optional, Sequence, Union

import torch

from ..models import TF2RNNModel


def check_tokenizer(model: TF2RNNModel, tokenizer) -> None:
    """Refuse a tokenizer whose vocabulary is not the model's (a byte tokenizer for a token student, or
    another model's): its ids would index the wrong rows, and the embeddings would mean nothing."""
    size = len(tokenizer) if hasattr(tokenizer, "__len__") else None
    if size != model.config.vocab_size:
        raise ValueError(f"This tokenizer ({type(tokenizer).__name__}, {size} ids) is not the model's: the model "
                         f"has a vocabulary of {model.config.vocab_size}. Load the tokenizer saved with the model "
                         "(AutoTokenizer.from_pretrained(model_folder)).")
    if model.config.granularity == "byte" and not hasattr(tokenizer, "offset"):
        raise ValueError(f"A byte-level student reads bytes with its ByT5 tokenizer; got {type(tokenizer).__name__}.")


@torch.no_grad()
def encode_texts(model: TF2RNNModel, tokenizer, texts: Union[str, Sequence[str]], batch_size: int = 64,
                 max_length: Optional[int] = None) -> torch.Tensor:
    """Final embeddings of `texts` ([N, output_size], float32 on CPU; one string gives [output_size]).

    Each text is read whole, as the streams and `forward` read it; `max_length` cuts texts at that many
    steps instead."""
    if isinstance(texts, str):
        return encode_texts(model, tokenizer, [texts], batch_size, max_length)[0]
    texts = list(texts)
    bad = next((i for i, t in enumerate(texts) if not isinstance(t, str)), None)
    if bad is not None:
        raise TypeError(f"texts must be strings; item {bad} is a {type(texts[bad]).__name__}.")
    check_tokenizer(model, tokenizer)
    model.eval()
    device = next(model.parameters()).device
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # less padding per batch
    out = torch.zeros(len(texts), model.config.output_size)
    for start in range(0, len(order), batch_size):
        idx = order[start:start + batch_size]
        batch = tokenizer([texts[i] for i in idx], padding=True, truncation=max_length is not None,
                          max_length=max_length, return_tensors="pt").to(device)
        out[idx] = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                         use_cache=False).pooler_output.float().cpu()
    return out
