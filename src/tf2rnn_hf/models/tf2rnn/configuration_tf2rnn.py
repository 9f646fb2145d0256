"""TF2RNN configuration: a recurrent student that follows a transformer's prefix-embedding trajectory."""

import math
from typing import List, Optional

from transformers import PretrainedConfig

CELL_TYPES = ("gru", "lstm", "linear_attention", "rem", "multistate", "tova_attention")
GRANULARITIES = ("token", "byte")
# A student reads the whole text wherever it runs (forward, step, streams, bulk encoding and
# sentence-transformers): a recurrence has no position limit, and one policy keeps them equal.
NO_LENGTH_LIMIT = 1 << 30


class TF2RNNConfig(PretrainedConfig):
    r"""
    Configuration of a [`TF2RNNModel`]: token table -> recurrent cell layers -> readout to the teacher's space.

    Args:
        vocab_size (`int`, defaults to 30522):
            Size of the token table; the teacher's vocabulary when built with `TF2RNNModel.from_teacher`.
        embedding_size (`int`, *optional*):
            Width of the token table. Defaults to `output_size`, so the table can start from the teacher's
            own output vector for each token.
        hidden_size (`int`, defaults to 768):
            Width of each recurrent layer's state (for attention-like cells: the model width).
        num_hidden_layers (`int`, defaults to 1):
            Number of stacked recurrent layers.
        residual_layers (`bool`, defaults to `False`):
            `gru` only: each layer after the first reads a LayerNorm of its input and adds its output to that
            input (pre-norm residual blocks, as in transformers), so a deeper stack trains like a shallow one.
        readout_hidden_size (`int`, *optional*):
            Width of a two-layer MLP readout (Linear -> GELU -> Linear); `None`: one linear map.
        cell_type (`str`, defaults to `"gru"`):
            One of `"gru"`, `"lstm"`, `"linear_attention"`, `"rem"`, `"multistate"`, `"tova_attention"` (the
            teacher's own layers made causal over a TOVA-bounded cache; built with
            `tf2rnn_hf.distill.build_student(..., cell_type="tova_attention")`, which copies the teacher in).
        output_size (`int`, defaults to 384):
            Width of the embedding; must equal the teacher's embedding width.
        teacher_hidden_size (`int`, *optional*):
            The teacher's embedding width, recorded to check `output_size` against it.
        num_attention_heads (`int`, defaults to 4):
            Heads of the `linear_attention` and `rem` cells.
        intermediate_size (`int`, *optional*):
            Feed-forward width of the attention-like cells (defaults to 2 * hidden_size).
        rem_real_heads (`int`, defaults to 1):
            `rem` only: heads with a real decay lambda = tanh(eta).
        rem_cyclic_heads (`int`, defaults to 1):
            `rem` only: heads with a damped rotation gamma = sigmoid(nu), angle theta. The remaining heads
            are linear-attention heads.
        num_slots (`int`, defaults to 32):
            `multistate` and `tova_attention`: K, the most slot vectors (keys/values) a layer keeps; when full,
            the lowest-weight slot is evicted (TOVA). For `tova_attention` it is also an inference budget: the
            same weights load at another count (`from_pretrained(path, num_slots=128)`), fewer slots being
            cheaper per keystroke on long texts and more keeping long passages closer to the teacher.
        max_position_embeddings (`int`, defaults to 512):
            `tova_attention` only: size of the position table (the teacher's); later steps reuse the last row.
        bidirectional_pooling (`bool`, defaults to `False`):
            `tova_attention` only: add to the pooled mean an O(1) bidirectional linear-attention term, the mean
            over every token of its attention to every token of the prefix, later ones included (what a causal
            layer cannot see); kept as running sums, it costs the same at every step.
        open_tokens (`int`, defaults to 1):
            `tova_attention` only: how many of the newest tokens stay open. Open tokens attend to each other both
            ways (and to the cache), are recomputed at every step, and enter the cache together once `open_tokens`
            of them are open: each token has read up to `open_tokens - 1` later ones, as the bidirectional teacher's
            have. 1 is the causal student; a step costs up to `open_tokens` tokens through every layer.
        pooling_position_exponent (`float`, *optional*):
            `tova_attention` only: pool the top layer's outputs with weight (n + 1) ** p for step n (the sink is
            step 0), p a learned scalar that starts here, instead of the plain mean (None, the teacher's
            pooling). SGPT (Muennighoff 2022) pools a causal model's tokens better with p = 1: later tokens
            have read the whole prefix. One more number of state per row.
        tail_layers (`int`, *optional*):
            `tova_attention` with `open_tokens` 1 only: train a second embedding, the one a keystroke would show
            if the layers above the first `tail_layers` read only finished words. A word's tokens change at
            nearly every keystroke and only its end makes them final; a causal layer's output for a token does
            not depend on when it is computed, so the finished words come out exactly as now. The second
            embedding pools the finished words' top-layer outputs and the current word's outputs of layer
            `tail_layers`, mapped by a learned linear `tail_adapter` (the identity in a fresh model; the distillation
            recipe starts it at a least-squares fit). `forward` returns
            it as `tail_hidden_state` where given `word_starts`; `TF2RNNModel.step_deferred` steps a token through
            the lower layers only and `commit_word` runs a finished word through the upper ones, and the streaming
            encoders use them (a keystroke inside a word shows the second embedding, a word's end the full one).
            `step`, `forward` and bulk encoding still run every layer on every token (the full embedding).
        tail_open_tokens (`int`, defaults to 1):
            With `tail_layers`: how many of the newest tokens stay open in the upper layers only (as `open_tokens`
            does in every layer; the lower layers stay causal). The upper layers run at word ends, off the
            keystroke, so open tokens there cost a keystroke nothing. A text's embedding after a word does not
            depend on where its words end (blocks commit as they fill), so `step` and `forward` run each token as a
            word of its own; `forward` runs texts from the empty state in one parallel pass (no longer than
            `num_slots`; else, and from a past state, step by step). The fused int8 step runs a word's end as
            `tf2rnn_tova_commit_open`.
        residual_token_mean (`bool`, defaults to `True`):
            Add the running mean of the token vectors to the readout, mirroring the teacher's mean pooling;
            the cell then learns a correction instead of the whole embedding.
        dropout (`float`, defaults to 0.0):
            Dropout on the cell's inputs during training.
        skip_token_ids (`List[int]`, *optional*):
            Token ids treated as no-ops (the tokenizer's [CLS], [SEP], [PAD]), so text tokenised with or
            without special tokens gives the same embedding.
        granularity (`str`, defaults to `"token"`):
            Unit of one step: `"token"` (the teacher's WordPiece tokens) or `"byte"` (UTF-8 bytes with
            ByT5's byte tokenizer: one step per ASCII keystroke, no tokenizer state, any script).
        teacher_name_or_path (`str`, *optional*):
            The teacher the student was distilled from, for model cards and evaluation.
        initializer_range (`float`, defaults to 0.02):
            Standard deviation of the normal initialisation of linear layers.
        layer_norm_eps (`float`, defaults to 1e-5):
            Epsilon of layer norms in the attention-like cells.
        state_lift (`bool`, defaults to `False`):
            Training only: the distillation student (`tf2rnn_hf.distill.TF2RNNForDistillation`) adds a learned
            map from a teacher embedding to a cell state (`gru`/`lstm` only) for the teacher-transition loss
            and scheduled sampling. `TF2RNNModel` ignores it, and ignores those weights in a checkpoint.
        use_cache (`bool`, defaults to `True`):
            Whether `forward` returns the `past_state` to continue from.

    Example:

    ```python
    >>> from tf2rnn_hf import TF2RNNConfig, TF2RNNModel

    >>> # A one-layer GRU-768 student of a 384-dimensional teacher (all-MiniLM-L6-v2)
    >>> configuration = TF2RNNConfig(cell_type="gru", hidden_size=768, output_size=384)
    >>> model = TF2RNNModel(configuration)  # randomly initialised; see tf2rnn_hf.distill.build_student
    >>> configuration = model.config
    ```
    """

    model_type = "tf2rnn"

    def __init__(
        self,
        vocab_size: int = 30522,
        embedding_size: Optional[int] = None,
        hidden_size: int = 768,
        num_hidden_layers: int = 1,
        residual_layers: bool = False,
        readout_hidden_size: Optional[int] = None,
        cell_type: str = "gru",
        output_size: int = 384,
        teacher_hidden_size: Optional[int] = None,
        num_attention_heads: int = 4,
        intermediate_size: Optional[int] = None,
        rem_real_heads: int = 1,
        rem_cyclic_heads: int = 1,
        num_slots: int = 32,
        max_position_embeddings: int = 512,
        bidirectional_pooling: bool = False,
        open_tokens: int = 1,
        pooling_position_exponent: Optional[float] = None,
        tail_layers: Optional[int] = None,
        tail_open_tokens: int = 1,
        residual_token_mean: bool = True,
        dropout: float = 0.0,
        skip_token_ids: Optional[List[int]] = None,
        granularity: str = "token",
        teacher_name_or_path: Optional[str] = None,
        initializer_range: float = 0.02,
        layer_norm_eps: float = 1e-5,
        state_lift: bool = False,
        use_cache: bool = True,
        pad_token_id: int = 0,
        **kwargs,
    ):
        self.vocab_size = vocab_size
        self.embedding_size = embedding_size if embedding_size is not None else output_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.residual_layers = residual_layers
        self.readout_hidden_size = readout_hidden_size
        self.cell_type = cell_type
        self.output_size = output_size
        self.teacher_hidden_size = teacher_hidden_size
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size if intermediate_size is not None else 2 * hidden_size
        self.rem_real_heads = rem_real_heads
        self.rem_cyclic_heads = rem_cyclic_heads
        self.num_slots = num_slots
        self.max_position_embeddings = max_position_embeddings
        self.bidirectional_pooling = bidirectional_pooling
        self.open_tokens = open_tokens
        self.pooling_position_exponent = pooling_position_exponent
        self.tail_layers = tail_layers
        self.tail_open_tokens = tail_open_tokens
        self.residual_token_mean = residual_token_mean
        self.dropout = dropout
        self.skip_token_ids = list(skip_token_ids) if skip_token_ids is not None else []
        self.granularity = granularity
        self.teacher_name_or_path = teacher_name_or_path
        self.initializer_range = initializer_range
        self.layer_norm_eps = layer_norm_eps
        self.state_lift = state_lift
        self.use_cache = use_cache
        self._validate()
        super().__init__(pad_token_id=pad_token_id, **kwargs)

    def _validate(self) -> None:
        if self.cell_type not in CELL_TYPES:
            raise ValueError(f"Unknown cell_type {self.cell_type!r}; choose one of {', '.join(CELL_TYPES)}.")
        if self.granularity not in GRANULARITIES:
            raise ValueError(f"Unknown granularity {self.granularity!r}; choose one of {', '.join(GRANULARITIES)}.")
        for name in ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers", "output_size",
                     "num_attention_heads", "intermediate_size", "num_slots", "max_position_embeddings"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"{name} must be a positive integer, got {value!r}.")
        width = self.readout_hidden_size
        if width is not None and (not isinstance(width, int) or isinstance(width, bool) or width <= 0):
            raise ValueError(f"readout_hidden_size must be a positive integer or None, got {width!r}.")
        if self.residual_layers and self.cell_type != "gru":
            raise ValueError(f"residual_layers stacks gru layers; cell_type {self.cell_type!r} has its own blocks.")
        if self.teacher_hidden_size is not None and self.teacher_hidden_size != self.output_size:
            raise ValueError(
                f"output_size ({self.output_size}) differs from the teacher's embedding size "
                f"({self.teacher_hidden_size}); the student must embed into the teacher's space."
            )
        if self.cell_type == "tova_attention" and self.embedding_size != self.hidden_size:
            raise ValueError(f"cell_type 'tova_attention' reads the token table directly: embedding_size "
                             f"({self.embedding_size}) must equal hidden_size ({self.hidden_size}).")
        attention_like = self.cell_type in ("linear_attention", "rem", "tova_attention")
        if attention_like and self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"hidden_size ({self.hidden_size}) must be divisible by num_attention_heads "
                f"({self.num_attention_heads}) for cell_type {self.cell_type!r}."
            )
        if self.cell_type == "rem":
            if min(self.rem_real_heads, self.rem_cyclic_heads) < 0 or (
                self.rem_real_heads + self.rem_cyclic_heads > self.num_attention_heads
            ):
                raise ValueError(
                    f"rem_real_heads ({self.rem_real_heads}) + rem_cyclic_heads ({self.rem_cyclic_heads}) must be "
                    f"non-negative and at most num_attention_heads ({self.num_attention_heads})."
                )
        if self.bidirectional_pooling and self.cell_type != "tova_attention":
            raise ValueError(f"bidirectional_pooling is a tova_attention option, not one of {self.cell_type!r}.")
        if isinstance(self.open_tokens, bool) or not isinstance(self.open_tokens, int) or self.open_tokens < 1:
            raise ValueError(f"open_tokens must be a whole number >= 1, got {self.open_tokens!r}.")
        if self.open_tokens > 1:
            if self.cell_type != "tova_attention":
                raise ValueError(f"open_tokens is a tova_attention option, not one of {self.cell_type!r}.")
            if self.bidirectional_pooling:
                raise ValueError("open_tokens > 1 and bidirectional_pooling are two ways of reading later tokens; "
                                 "choose one.")
            if self.open_tokens > self.num_slots:
                raise ValueError(f"open_tokens ({self.open_tokens}) must fit the cache: at most num_slots "
                                 f"({self.num_slots}).")
        if self.pooling_position_exponent is not None:
            if self.cell_type != "tova_attention":
                raise ValueError(f"pooling_position_exponent is a tova_attention option, not one of "
                                 f"{self.cell_type!r}.")
            p = self.pooling_position_exponent
            if isinstance(p, bool) or not isinstance(p, (int, float)) or not math.isfinite(p):
                raise ValueError(f"pooling_position_exponent must be a finite number or None, got "
                                 f"{self.pooling_position_exponent!r}.")
        if self.tail_layers is not None:
            k = self.tail_layers
            if self.cell_type != "tova_attention" or self.open_tokens != 1 or self.bidirectional_pooling:
                raise ValueError("tail_layers is an option of the causal tova_attention student (open_tokens 1, no "
                                 f"bidirectional_pooling), not of this {self.cell_type!r} one.")
            if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k < self.num_hidden_layers:
                raise ValueError(f"tail_layers must be a whole number from 1 to num_hidden_layers - 1 "
                                 f"({self.num_hidden_layers - 1}), got {k!r}.")
        w = self.tail_open_tokens
        if isinstance(w, bool) or not isinstance(w, int) or w < 1:
            raise ValueError(f"tail_open_tokens must be a whole number >= 1, got {w!r}.")
        if w > 1 and self.tail_layers is None:
            raise ValueError("tail_open_tokens opens the upper layers of a tail_layers student; set tail_layers.")
        if w > self.num_slots:
            raise ValueError(f"tail_open_tokens ({w}) must fit the cache: at most num_slots ({self.num_slots}).")
        if self.state_lift and self.cell_type not in ("gru", "lstm"):
            raise ValueError(f"state_lift is available for the gru and lstm cells, not {self.cell_type!r}.")
        if not isinstance(self.dropout, (int, float)) or not 0.0 <= float(self.dropout) < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout!r}.")
        for name in ("layer_norm_eps", "initializer_range"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 < float(value) < float("inf"):
                raise ValueError(f"{name} must be a positive finite number, got {value!r}.")
        bad = [i for i in self.skip_token_ids if not 0 <= int(i) < self.vocab_size]
        if bad:
            raise ValueError(f"skip_token_ids {bad} lie outside the vocabulary [0, {self.vocab_size}).")


TF2RNNConfig.register_for_auto_class()
