"""TF2RNN: a recurrent sentence encoder whose state follows a transformer's prefix-embedding trajectory."""

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel
from transformers import initialization as init
from transformers.utils import ModelOutput

from .cells_tf2rnn import build_cell
from .configuration_tf2rnn import NO_LENGTH_LIMIT, TF2RNNConfig


class TF2RNNState:
    """Everything needed to continue a batch of texts where they stopped (the model's `past_state`).

    Holds the cell's tensors, the running sum of token vectors and count of real steps (for the
    mean-pooling readout), and the embedding after each row's last real step. Every tensor is
    batch-first, so rows can be selected, reordered or concatenated for batched streams.

    A `tail_layers` student stepped by `TF2RNNModel.step_deferred` also holds `held_outputs` [B, P, H]: the current
    word's P tokens as the lower layers wrote them, which the upper layers have not read yet (None: no word held).
    """

    def __init__(self, cell_state: Sequence[torch.Tensor], token_sum: torch.Tensor, seen_tokens: torch.Tensor,
                 last_embedding: torch.Tensor, held_outputs: Optional[torch.Tensor] = None):
        self.cell_state = tuple(cell_state)
        self.token_sum = token_sum
        self.seen_tokens = seen_tokens
        self.last_embedding = last_embedding
        self.held_outputs = held_outputs

    def _tensors(self) -> Tuple[torch.Tensor, ...]:
        return (*self.cell_state, self.token_sum, self.seen_tokens, self.last_embedding)

    @classmethod
    def _from_tensors(cls, tensors: Sequence[torch.Tensor]) -> "TF2RNNState":
        return cls(tensors[:-3], *tensors[-3:])

    def _map(self, fn) -> "TF2RNNState":
        state = self._from_tensors([fn(t) for t in self._tensors()])
        state.held_outputs = None if self.held_outputs is None else fn(self.held_outputs)
        return state

    @property
    def held_tokens(self) -> int:
        """How many tokens of the current word the upper layers have not read (`step_deferred`): 0 for any other
        state."""
        return 0 if self.held_outputs is None else self.held_outputs.shape[1]

    @property
    def batch_size(self) -> int:
        return self.last_embedding.shape[0]

    @property
    def dtype(self) -> torch.dtype:
        return self.last_embedding.dtype

    @property
    def device(self) -> torch.device:
        return self.last_embedding.device

    def nbytes(self) -> int:
        """Bytes held by this state (all rows)."""
        held = () if self.held_outputs is None else (self.held_outputs,)
        return sum(t.numel() * t.element_size() for t in (*self._tensors(), *held))

    def index_select(self, indices: Union[torch.Tensor, Sequence[int]]) -> "TF2RNNState":
        """The rows at `indices`, in that order (select, drop or reorder streams)."""
        idx = torch.as_tensor(indices, dtype=torch.long, device=self.device)
        return self._map(lambda t: t.index_select(0, idx))


    @classmethod
    def concat(cls, states: Sequence["TF2RNNState"]) -> "TF2RNNState":
        """Stack the rows of several states into one batch (each holding the same number of a word's tokens)."""
        held = {s.held_tokens for s in states}
        if len(held) > 1:
            raise ValueError(f"These states hold {sorted(held)} tokens of a word the upper layers have not read "
                             "(step_deferred): only states holding as many stack; commit_word each first.")
        state = cls._from_tensors([torch.cat(ts, 0) for ts in zip(*(s._tensors() for s in states))])
        if held != {0}:
            state.held_outputs = torch.cat([s.held_outputs for s in states], 0)
        return state

    def to(self, device=None, dtype=None) -> "TF2RNNState":
        """Move to `device`; cast floating tensors to `dtype` (the step counts stay integers)."""
        return self._map(lambda t: t.to(device=device, dtype=dtype if t.is_floating_point() else None))

    def detach(self) -> "TF2RNNState":
        """Cut the autograd graph (truncated backprop through time)."""
        return self._map(torch.Tensor.detach)

    def clone(self) -> "TF2RNNState":
        return self._map(torch.Tensor.clone)

    def reset(self, rows: Optional[Union[torch.Tensor, Sequence[int]]] = None) -> "TF2RNNState":
        """A copy with `rows` (default: all) back at the initial state, i.e. an empty text."""
        if rows is None:
            state = self._map(torch.zeros_like)
            state.held_outputs = None
            return state
        if self.held_tokens:
            raise ValueError("reset(rows) of a state holding a word's tokens (step_deferred) would keep them in the "
                             "other rows only: commit_word first, or reset every row.")
        keep = torch.ones(self.batch_size, dtype=torch.bool, device=self.device)
        keep[torch.as_tensor(rows, dtype=torch.long, device=self.device)] = False
        return self._map(lambda t: t * keep.view(-1, *([1] * (t.dim() - 1))).to(t.dtype))

    def __repr__(self) -> str:
        return f"TF2RNNState(batch_size={self.batch_size}, tensors={len(self._tensors())}, bytes={self.nbytes()})"


@dataclass
class TF2RNNModelOutput(ModelOutput):
    """
    Args:
        last_hidden_state (`torch.FloatTensor` of shape `(batch_size, steps, output_size)`):
            The L2-normalised embedding after every step: the student's trajectory. At a masked position
            it repeats the embedding after the row's previous real step.
        pooler_output (`torch.FloatTensor` of shape `(batch_size, output_size)`):
            The embedding after each row's last real step: the sentence embedding.
        past_state (`TF2RNNState`, *optional*):
            The state to continue from, returned when `use_cache=True`.
        hidden_states (`tuple(torch.FloatTensor)`, *optional*):
            The input vectors and each layer's output at every step, when `output_hidden_states=True`.
        tail_hidden_state (`torch.FloatTensor` of shape `(batch_size, steps, output_size)`, *optional*):
            A student with `config.tail_layers`, given `word_starts`: the embedding after every step when the
            current word has passed only the first `tail_layers` layers (TF2RNNConfig.tail_layers).
    """

    last_hidden_state: Optional[torch.FloatTensor] = None
    pooler_output: Optional[torch.FloatTensor] = None
    past_state: Optional[TF2RNNState] = None
    hidden_states: Optional[Tuple[torch.FloatTensor, ...]] = None
    tail_hidden_state: Optional[torch.FloatTensor] = None


class TF2RNNPreTrainedModel(PreTrainedModel):
    """Base class: the config class, weight loading and `_is_stateful` for every TF2RNN model."""

    config_class = TF2RNNConfig
    base_model_prefix = "tf2rnn"
    main_input_name = "input_ids"
    supports_gradient_checkpointing = False
    _is_stateful = True
    _no_split_modules = []
    # Training-only weights (distill's teacher-transition lift) that checkpoints may carry.
    _keys_to_ignore_on_load_unexpected = [r"^state_lift\."]

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        # transformers covers Linear, Embedding, norms and LSTM; a GRU and the cells' own parameters would
        # otherwise keep uninitialised memory wherever a checkpoint lacks them (a partial load).
        super()._init_weights(module)
        if isinstance(module, nn.GRU):
            bound = 1.0 / math.sqrt(module.hidden_size)  # PyTorch's own GRU initialisation
            for param in module.parameters():
                init.uniform_(param, -bound, bound)
        if hasattr(module, "init_parameters"):
            module.init_parameters(init.copy_)

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *args, **kwargs):
        """`PreTrainedModel.from_pretrained`, refusing a folder that does not exist (a path that cannot be a Hub
        id) and weights that hold NaN or inf. Finite corruption (flipped bits that stay finite) is not detected."""
        name = pretrained_model_name_or_path
        if isinstance(name, (str, os.PathLike)) and not os.path.isdir(name) and _is_path(str(name)):
            raise OSError(f"No saved model at {name}: that folder does not exist.")
        loaded = super().from_pretrained(name, *args, **kwargs)
        model = loaded[0] if isinstance(loaded, tuple) else loaded
        bad = [n for n, p in model.named_parameters() if p.device.type != "meta" and not torch.isfinite(p).all()]
        if bad:
            raise ValueError(f"The weights at {name} hold non-finite values (NaN or inf) in {', '.join(bad[:5])}: "
                             "the file is corrupted. Download or save it again.")
        return loaded


def _is_path(name: str) -> bool:
    """Whether `name` can only be a local path (no Hub id looks like it)."""
    return name.startswith((".", "/", "~")) or name.count("/") > 1 or os.sep != "/" and os.sep in name


class TF2RNNModel(TF2RNNPreTrainedModel):
    """Token table -> recurrent cell -> readout into the teacher's embedding space (L2-normalised).

    With `config.residual_token_mean`, the embedding after step t is normalize(mean of the token vectors
    so far + readout(cell output)): the teacher mean-pools its token outputs, so the student starts at
    the order-free static baseline and the cell learns the order- and context-dependent correction.
    """

    def __init__(self, config: TF2RNNConfig):
        super().__init__(config)
        # from_pretrained(path, num_slots=0) sets its overrides on the config after TF2RNNConfig.__init__ checked it.
        config._validate()
        if config.residual_token_mean and config.embedding_size != config.output_size:
            raise ValueError(
                f"residual_token_mean needs embedding_size == output_size, got {config.embedding_size} "
                f"and {config.output_size}."
            )
        self.embeddings = nn.Embedding(config.vocab_size, config.embedding_size)
        self.dropout = nn.Dropout(config.dropout)
        self.cell = build_cell(config)
        self.readout = (nn.Linear(config.hidden_size, config.output_size) if config.readout_hidden_size is None
                        else nn.Sequential(nn.Linear(config.hidden_size, config.readout_hidden_size), nn.GELU(),
                                           nn.Linear(config.readout_hidden_size, config.output_size)))
        # A faster implementation of `step` for one row (the int8 kernel that
        # `tf2rnn_hf.inference.quantization.quantize_int8` attaches); None: the PyTorch reference.
        self.step_kernel: Optional[Callable[[torch.Tensor, TF2RNNState], Tuple[torch.Tensor, TF2RNNState]]] = None
        # Not a buffer: checkpoint loading builds modules on the meta device and never refills
        # non-persistent buffers, so the ids are rebuilt from the config per device instead.
        self._skip_ids = {}
        self._row_shapes = None
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.embeddings

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.embeddings = value

    def init_state(self, batch_size: int, device=None, dtype=None, read_only: bool = False) -> TF2RNNState:
        """The state of `batch_size` empty texts; `read_only` expands one zero per cell tensor (no memory), for a
        forward that reads it and returns none."""
        device = device if device is not None else self.device
        dtype = dtype if dtype is not None else self.dtype
        cfg = self.config
        return TF2RNNState(
            self.cell.init_state(batch_size, device=device, dtype=dtype, read_only=read_only),
            torch.zeros(batch_size, cfg.output_size if cfg.residual_token_mean else 0, device=device, dtype=dtype),
            torch.zeros(batch_size, dtype=torch.long, device=device),
            torch.zeros(batch_size, cfg.output_size, device=device, dtype=dtype),
        )

    def _check_inputs(self, input_ids: torch.Tensor, past_state: Optional[TF2RNNState],
                      attention_mask: Optional[torch.Tensor] = None, deferred: bool = False) -> None:
        if not isinstance(input_ids, torch.Tensor) or input_ids.dtype not in (torch.long, torch.int, torch.int16,
                                                                               torch.int8, torch.uint8):
            raise TypeError(f"input_ids must be an integer tensor, got {getattr(input_ids, 'dtype', type(input_ids))}.")
        if input_ids.dim() != 2:
            raise ValueError(f"input_ids must have shape [batch, steps], got {tuple(input_ids.shape)}.")
        if attention_mask is not None:
            if not isinstance(attention_mask, torch.Tensor) or attention_mask.shape != input_ids.shape:
                raise ValueError(f"attention_mask must have the shape of input_ids {tuple(input_ids.shape)}, got "
                                 f"{tuple(getattr(attention_mask, 'shape', ()))}.")
            if attention_mask.numel() and bool(((attention_mask != 0) & (attention_mask != 1)).any()):
                raise ValueError("attention_mask must hold only 0 (padding) and 1 (a real step).")
        vocab = self.config.vocab_size
        if input_ids.numel():
            low, high = input_ids.aminmax()
            if int(low) < 0 or int(high) >= vocab:
                bad = input_ids[(input_ids < 0) | (input_ids >= vocab)]
                raise ValueError(f"input_ids hold token ids outside the vocabulary [0, {vocab}): "
                                 f"{bad.unique()[:8].tolist()}.")
        if past_state is None:
            return
        if not isinstance(past_state, TF2RNNState):
            raise TypeError(f"past_state must be a TF2RNNState, got {type(past_state).__name__}.")
        if past_state.batch_size != input_ids.shape[0]:
            raise ValueError(
                f"past_state holds {past_state.batch_size} rows but input_ids has {input_ids.shape[0]}; "
                "select rows with past_state.index_select(...)."
            )
        # The token table's dtype and device stand for the model's: PreTrainedModel's properties walk every
        # parameter, and this runs at every keystroke.
        weight = self.embeddings.weight
        if past_state.dtype != weight.dtype:
            raise ValueError(f"past_state has dtype {past_state.dtype} but the model has {weight.dtype}; "
                             "use past_state.to(dtype=model.dtype).")
        if past_state.device != weight.device:
            raise ValueError(f"past_state is on device {past_state.device} but the model is on {weight.device}; "
                             "use past_state.to(model.device).")
        if past_state.held_tokens and not deferred:
            raise ValueError(f"past_state holds {past_state.held_tokens} tokens of a word that only the lower layers "
                             "have read (step_deferred): run model.commit_word(past_state) first.")
        got = [tuple(t.shape[1:]) for t in past_state._tensors()]
        if got != self._state_row_shapes():
            raise ValueError(f"past_state does not fit this model: its tensors have row shapes {got}, the model's "
                             f"{self._state_row_shapes()}; was it made by another model?")

    def _state_row_shapes(self) -> list:
        """Per-row shape of each tensor of this model's `TF2RNNState` (computed once)."""
        if self._row_shapes is None:
            cfg = self.config
            self._row_shapes = [tuple(shape) for shape in self.cell.state_shapes()] + [
                (cfg.output_size if cfg.residual_token_mean else 0,), (), (cfg.output_size,)]
        return self._row_shapes

    def step_mask(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Which positions are real steps: the attention mask minus the skipped special tokens."""
        mask = torch.ones_like(input_ids, dtype=torch.bool) if attention_mask is None else attention_mask.bool()
        if self.config.skip_token_ids:
            skip = self._skip_ids.get(input_ids.device)
            if skip is None:
                skip = torch.tensor(self.config.skip_token_ids, dtype=torch.long, device=input_ids.device)
                self._skip_ids[input_ids.device] = skip
            mask = mask & ~(input_ids[..., None] == skip).any(-1)  # isin, in ops every ONNX runtime has
        return mask

    def forward(
        self,
        input_ids: torch.LongTensor,
        attention_mask: Optional[torch.Tensor] = None,
        past_state: Optional[TF2RNNState] = None,
        use_cache: Optional[bool] = None,
        output_hidden_states: Optional[bool] = None,
        return_dict: Optional[bool] = None,
        output_steps: Optional[torch.Tensor] = None,
        word_starts: Optional[torch.Tensor] = None,
        **kwargs,
    ) -> Union[Tuple, TF2RNNModelOutput]:
        r"""
        input_ids (`torch.LongTensor` of shape `(batch_size, steps)`):
            Token ids. Special tokens in `config.skip_token_ids` are no-ops, so tokenising with or without
            them gives the same result.
        attention_mask (`torch.Tensor` of shape `(batch_size, steps)`, *optional*):
            1 for real steps, 0 for padding (on either side, or anywhere). A masked step leaves the state
            unchanged.
        past_state (`TF2RNNState`, *optional*):
            The state returned by an earlier call: feeding a text in chunks equals feeding it whole.
        use_cache (`bool`, *optional*):
            Return the state to continue from (default: `config.use_cache`).
        output_steps (`torch.Tensor` of shape `(batch_size, steps)`, *optional*):
            The steps whose embeddings the caller reads (a loss's targets). A student with open tokens
            (`config.open_tokens` > 1) then skips the extra work of the others, whose embeddings are unspecified.
        word_starts (`torch.Tensor` of shape `(batch_size, steps)`, *optional*):
            A student with `config.tail_layers`, from the empty state: 1 where a token begins a word (the
            WordPiece tokens that do not continue one); the output then holds `tail_hidden_state`.

        An empty sequence (`steps == 0`) is allowed: it returns the state unchanged, and a row that has
        seen no real step has an all-zero embedding.
        """
        use_cache = use_cache if use_cache is not None else self.config.use_cache
        output_hidden_states = (
            output_hidden_states if output_hidden_states is not None else self.config.output_hidden_states
        )
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        self._check_inputs(input_ids, past_state, attention_mask)
        if word_starts is not None:
            if self.config.tail_layers is None:
                raise ValueError("word_starts is read by a student with config.tail_layers; this one has none.")
            if past_state is not None:
                raise ValueError("word_starts reads a text from the empty state (training); drop past_state.")
            if word_starts.shape != input_ids.shape:
                raise ValueError(f"word_starts has shape {tuple(word_starts.shape)}; input_ids has "
                                 f"{tuple(input_ids.shape)}.")
        batch, steps = input_ids.shape
        # Without a cache to return, the empty state is only read: the tova cell's is 25 MB a layer at a training
        # batch of 64, zeroed at every step before (with the cell's padded cache, 634 -> 562 ms a step at 16 tokens).
        state = past_state if past_state is not None else self.init_state(batch, read_only=not use_cache)
        mask = self.step_mask(input_ids, attention_mask)

        # Move each row's real steps to the front, so cells only handle right padding.
        lengths = mask.sum(1)
        # A stable sort of "is padding", as a sort of unique keys (ONNX export has no stable sort); the
        # positions come from a cumsum, not from the Python length, which a traced graph would freeze.
        positions = torch.cumsum(torch.ones_like(input_ids), 1) - 1
        order = torch.argsort((~mask).long() * (1 << 40) + positions, dim=1)
        compact_ids = input_ids.gather(1, order)
        vectors = self.embeddings(compact_ids)
        starts = None
        if word_starts is not None and steps:
            # Each step's word begins at the last word start at or before it (a row's first token begins one).
            index = torch.arange(steps, device=input_ids.device)[None]
            begins = (word_starts.gather(1, order) != 0) | (index == 0)
            starts = torch.cummax(torch.where(begins, index, 0), 1).values
        tail_open = getattr(self.config, "tail_open_tokens", 1) > 1
        if steps:
            extra = {}
            if output_steps is not None and (self.config.open_tokens > 1 or tail_open):
                # Position t reads the last real step at or before it (see the scatter below).
                reads = torch.cumsum(mask.long(), 1) - 1
                wanted = (output_steps.bool() & (reads >= 0)).long()
                needed = torch.zeros_like(reads).scatter_add_(1, reads.clamp(min=0), wanted) > 0
                if tail_open and starts is not None:  # the second embedding reads the step before each word
                    previous = (starts - 1).clamp(min=0)
                    needed = needed | (torch.zeros_like(reads).scatter_add_(1, previous, needed.long()) > 0)
                extra["needed"] = needed
            outputs, cell_state = self.cell(self.dropout(vectors), state.cell_state, lengths, use_cache=use_cache,
                                            **extra)
        else:
            outputs = [vectors.new_zeros(batch, 0, self.config.hidden_size)] * self.cell.num_outputs
            cell_state = state.cell_state

        positions = torch.arange(steps, device=input_ids.device)
        valid = (positions[None] < lengths[:, None]).to(vectors.dtype)
        counts = state.seen_tokens[:, None] + torch.cumsum(valid, 1).long()
        token_sum = state.token_sum
        token_mean = None
        if self.config.residual_token_mean:
            sums = token_sum[:, None] + torch.cumsum(vectors * valid[..., None], 1)
            token_mean = sums / counts.clamp(min=1)[..., None].to(sums.dtype)
            token_sum = sums[:, -1] if steps else token_sum
        # Scatter back: position t shows the embedding after the last real step at or before t.
        last_real = torch.cumsum(mask.long(), 1) - 1  # [B, T] index into the compact steps

        def embedding(cell_output: torch.Tensor) -> torch.Tensor:
            raw = self.readout(cell_output)
            compact = F.normalize(raw if token_mean is None else raw + token_mean, dim=-1)
            gathered = compact.gather(1, last_real.clamp(min=0)[..., None].expand(-1, -1, compact.shape[-1]))
            return torch.where((last_real >= 0)[..., None], gathered, state.last_embedding[:, None])

        trajectory = embedding(outputs[-1])
        pooled = trajectory[:, -1] if steps else state.last_embedding
        tail = None
        if starts is not None:
            typed = self.cell.tail_adapter(outputs[self.config.tail_layers - 1])
            tail = embedding(self.cell.tail_pooled(outputs[-2], typed, valid, starts,
                                                   pooled=outputs[-1] if tail_open else None))

        new_state = None
        if use_cache:
            new_state = TF2RNNState(cell_state, token_sum, state.seen_tokens + lengths, pooled)

        hidden_states = None
        if output_hidden_states:
            def scatter(x):
                g = x.gather(1, last_real.clamp(min=0)[..., None].expand(-1, -1, x.shape[-1]))
                return g * (last_real >= 0)[..., None].to(g.dtype)
            hidden_states = tuple(scatter(x) for x in [vectors, *outputs])

        if not return_dict:
            return tuple(v for v in (trajectory, pooled, new_state, hidden_states, tail) if v is not None)
        return TF2RNNModelOutput(last_hidden_state=trajectory, pooler_output=pooled, past_state=new_state,
                                 hidden_states=hidden_states, tail_hidden_state=tail)

    def step(self, input_ids: torch.LongTensor, past_state: Optional[TF2RNNState] = None
             ) -> Tuple[torch.Tensor, TF2RNNState]:
        """One real step per row (input_ids [batch]): the streams' path. Returns (embedding, state).

        Equals `forward` on one step. A single row runs `step_kernel` when one is attached; every other
        call runs `step_reference`. Autograd works wherever the caller enables it.
        """
        if not isinstance(input_ids, torch.Tensor):
            raise TypeError(f"input_ids must be an integer tensor of one id per row, got {type(input_ids).__name__}.")
        input_ids = input_ids.reshape(-1)
        self._check_inputs(input_ids[:, None], past_state)
        if self.step_kernel is not None and input_ids.shape[0] == 1:
            return self.step_kernel(input_ids, past_state if past_state is not None else self.init_state(1))
        return self.step_reference(input_ids, past_state)

    def step_reference(self, input_ids: torch.LongTensor, past_state: Optional[TF2RNNState] = None
                       ) -> Tuple[torch.Tensor, TF2RNNState]:
        """`step` in PyTorch (no input checks): the reference every step kernel is tested against."""
        state = past_state if past_state is not None else self.init_state(input_ids.shape[0])
        vec = self.embeddings(input_ids)
        out, cell_state = self.cell.step(self.dropout(vec) if self.training else vec, state.cell_state)
        seen = state.seen_tokens + 1
        token_sum = state.token_sum + vec if self.config.residual_token_mean else state.token_sum
        emb = self._readout(out, token_sum, seen)
        return emb, TF2RNNState(cell_state, token_sum, seen, emb)

    def step_deferred(self, input_ids: torch.LongTensor, past_state: Optional[TF2RNNState] = None,
                      begins_word: bool = True) -> Tuple[torch.Tensor, TF2RNNState]:
        """A keystroke of a `config.tail_layers` student: one token per row through the lower `tail_layers` layers
        only. `begins_word`: the token starts a word (not a WordPiece "##" continuation), so the word held so far is
        final and first runs through the upper layers (`commit_word`). Returns the second embedding (forward's
        `tail_hidden_state` at this step) and the state, which holds the current word's tokens for the upper layers;
        `commit_word` gives the full embedding. Every row holds as many tokens (one word boundary for all)."""
        if self.config.tail_layers is None:
            raise ValueError("step_deferred steps a student with config.tail_layers; this one has none: use step.")
        if not isinstance(input_ids, torch.Tensor):
            raise TypeError(f"input_ids must be an integer tensor of one id per row, got {type(input_ids).__name__}.")
        input_ids = input_ids.reshape(-1)
        self._check_inputs(input_ids[:, None], past_state, deferred=True)
        state = past_state if past_state is not None else self.init_state(input_ids.shape[0])
        if self.step_kernel is not None and input_ids.shape[0] == 1 and hasattr(self.step_kernel, "step_deferred"):
            return self.step_kernel.step_deferred(input_ids, state, begins_word)
        return self.step_deferred_reference(input_ids, state, begins_word)

    def step_deferred_reference(self, input_ids: torch.LongTensor, state: TF2RNNState, begins_word: bool = True
                                ) -> Tuple[torch.Tensor, TF2RNNState]:
        """`step_deferred` in PyTorch (no input checks): the reference its kernel is tested against."""
        if begins_word and state.held_tokens:
            state = self.commit_word_reference(state)[1]
        vec = self.embeddings(input_ids)
        lower, cell_state = self.cell.step_lower(vec, state.cell_state, state.held_tokens)
        held = lower[:, None] if state.held_outputs is None else torch.cat([state.held_outputs, lower[:, None]], 1)
        token_sum = state.token_sum + vec if self.config.residual_token_mean else state.token_sum
        seen = state.seen_tokens + 1
        emb = self._readout(self.cell.held_pooled(held, cell_state), token_sum, seen)
        return emb, TF2RNNState(cell_state, token_sum, seen, emb, held)

    def commit_word(self, past_state: TF2RNNState) -> Tuple[torch.Tensor, TF2RNNState]:
        """Run the word a `step_deferred` state holds through the upper layers: (the full embedding, as `step` would
        have given after the same tokens; the state, holding no word). A state holding none is returned as it is."""
        if not isinstance(past_state, TF2RNNState):
            raise TypeError(f"past_state must be a TF2RNNState, got {type(past_state).__name__}.")
        if self.step_kernel is not None and past_state.batch_size == 1 and hasattr(self.step_kernel, "commit_word"):
            return self.step_kernel.commit_word(past_state)
        return self.commit_word_reference(past_state)

    def commit_word_reference(self, past_state: TF2RNNState) -> Tuple[torch.Tensor, TF2RNNState]:
        """`commit_word` in PyTorch: the reference its kernel is tested against."""
        if not past_state.held_tokens:
            return past_state.last_embedding, past_state
        cell_state = self.cell.step_upper(past_state.held_outputs, past_state.cell_state)
        emb = self._readout(cell_state[-1], past_state.token_sum, past_state.seen_tokens)
        return emb, TF2RNNState(cell_state, past_state.token_sum, past_state.seen_tokens, emb)

    def _readout(self, cell_output: torch.Tensor, token_sum: torch.Tensor, seen: torch.Tensor) -> torch.Tensor:
        """The embedding from the cell's output [B, H], the token sum and the tokens seen (`step_reference`'s)."""
        raw = self.readout(cell_output)
        if self.config.residual_token_mean:
            raw = raw + token_sum / seen[:, None]  # float / long stays float
        return F.normalize(raw, dim=-1)

    def check_savable(self) -> None:
        """Refuse, before anything is written, a model that `save_pretrained` cannot save whole (int8)."""
        if any(type(m).__module__.startswith("torch.ao.nn.quantized") for m in self.modules()):
            raise ValueError("An int8 (quantize_int8) model cannot be saved: save the fp32 model, and quantize "
                             "after loading it.")

    def save_pretrained(self, save_directory, *args, **kwargs) -> None:
        """`PreTrainedModel.save_pretrained`, plus the sentence-transformers files, so that
        `SentenceTransformer(save_directory)` reads the same embedding as the model."""
        self.check_savable()
        super().save_pretrained(save_directory, *args, **kwargs)
        if kwargs.get("is_main_process", True):
            write_sentence_transformers_files(save_directory, self.config)


def write_sentence_transformers_files(path: Union[str, Path], config: TF2RNNConfig) -> None:
    """modules.json and configs so `SentenceTransformer(path)` loads the student: the Transformer module
    returns the trajectory, last-token pooling reads the embedding after the last step (special tokens are
    no-ops, so the [SEP] position repeats it), then normalisation (a no-op on unit vectors). Texts are read
    whole, as everywhere else (no cut at the teacher's 256 tokens)."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ]
    (path / "modules.json").write_text(json.dumps(modules, indent=2))
    (path / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": NO_LENGTH_LIMIT,
                                                                "do_lower_case": False}, indent=2))
    pooling = {"word_embedding_dimension": config.output_size, "pooling_mode_cls_token": False,
               "pooling_mode_mean_tokens": False, "pooling_mode_max_tokens": False,
               "pooling_mode_mean_sqrt_len_tokens": False, "pooling_mode_weightedmean_tokens": False,
               "pooling_mode_lasttoken": True, "include_prompt": True}
    (path / "1_Pooling").mkdir(exist_ok=True)
    (path / "1_Pooling" / "config.json").write_text(json.dumps(pooling, indent=2))
    (path / "2_Normalize").mkdir(exist_ok=True)
    (path / "config_sentence_transformers.json").write_text(json.dumps(
        {"model_type": "SentenceTransformer", "prompts": {}, "default_prompt_name": None,
         "similarity_fn_name": "cosine"}, indent=2))


TF2RNNModel.register_for_auto_class("AutoModel")
