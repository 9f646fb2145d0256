"""The bulk path: final embeddings of finished texts, batched and length-sorted (no streaming)."""

from typing import List, Optional, Sequence, Union

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
    steps instead. An int8 `tova_attention` student reads the one text of a call past its cache through its fused
    step, as `model.step` runs single rows (several go batched through its int8 modules)."""
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
    if _fused_tova(model):  # a text past the cache alone: the fused step
        skip = set(model.config.skip_token_ids or ())
        steps = []  # each text's ids less the special tokens forward skips
        for start in range(0, len(texts), batch_size):
            # The batches' own call: without padding, transformers would switch off padding set in the caller's
            # tokenizer backend (the built-in teacher's pads to 128) and leave it off.
            enc = tokenizer(texts[start:start + batch_size], padding=True, truncation=max_length is not None,
                            max_length=max_length)
            steps += [[token for token, real in zip(row, mask) if real and token not in skip]
                      for row, mask in zip(enc["input_ids"], enc["attention_mask"])]
        long = [i for i in order if len(steps[i]) > model.config.num_slots]
        if len(long) == 1:
            out[long[0]] = _fused_embedding(model, steps[long[0]])
            order.remove(long[0])
    for start in range(0, len(order), batch_size):
        idx = order[start:start + batch_size]
        batch = tokenizer([texts[i] for i in idx], padding=True, truncation=max_length is not None,
                          max_length=max_length, return_tensors="pt").to(device)
        out[idx] = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                         use_cache=False).pooler_output.float().cpu()
    return out


def _fused_tova(model: TF2RNNModel) -> bool:
    """Whether `model` is an int8 `tova_attention` student with a fused step (`quantize_int8`)."""
    kernel = getattr(model, "step_kernel", None)
    return kernel is not None and model.config.cell_type == "tova_attention"


def _fused_embedding(model: TF2RNNModel, steps: List[int]) -> torch.Tensor:
    """The embedding after `steps` (token ids, no special tokens) through an int8 `tova_attention` student's fused
    step from the empty state: what its stream of the same text holds, bit for bit. For one text past `num_slots`
    tokens it beats the int8 modules' evicting form; for a batch of them it loses (benchmarks/probes/long_texts.py,
    256 tokens: one text 66 ms against 87, `long-texts-s60-after.json`; at a batch of 64, 52.5 ms a text in
    `long-texts-s60-before.json`, where every long text took this step, against the modules' 21.5)."""
    state, emb = model.init_state(1), torch.zeros(1, model.config.output_size)
    for token in steps:
        emb, state = model.step_kernel(token, state)
    return emb[0]
