"""Streaming: the embedding of a text as it is typed, updated per keystroke at a cost that does not grow
with the text.

WordPiece splits on whitespace first, so the tokens of a word never change once whitespace follows it.
Each stream keeps the model state at every word boundary (a stack: a delete that crosses a boundary is a
pop) and, for the word being typed, the state after each of its current tokens. A keystroke re-tokenises
only the current word and steps the model over the tokens that changed: usually one or two steps.

A byte-level student (`granularity="byte"`) needs no tokenizer state: each character steps its UTF-8
bytes and the state after every character is kept, so a delete is again a pop.

The embedding after any sequence of `type` and `delete` equals the model run on the resulting text from
scratch (tested with random edit scripts). `max_checkpoints` bounds what a stream holds: only the latest
word-boundary (byte-level: character) states are kept, and a delete that goes back further re-encodes the
remaining text once (O(length), where a pop is O(1)). A stream whose text has no token yet (empty, or whitespace and
control characters only for a token-level student) has the all-zero embedding. (ByT5's tokenizer reads
the literal strings "<pad>", "</s>" and "<unk>" as its special tokens; a byte stream reads their bytes.)

A `tova_attention` student's state is a key/value cache (2.4 MB at six layers and 128 slots) of which a step
writes one row per layer, so its checkpoints keep only those rows (`_SlotCheckpoint`). A stream stepped alone
through the fused int8 step keeps one cache of its own (`_LiveCache`) that each keystroke changes in place, the rest
of each step's state in one record (`_RecordCheckpoint`: one allocation and one native call a keystroke), and a
delete undoes the rows written since the state it pops back to: no keystroke or pop copies a whole cache. Steps in
a batch (several streams, or no fused step) keep whole states for the current word and its base, where
re-tokenising restarts, and rebuild an older checkpoint from its ancestors' rows when a delete pops back to it and
typing goes on. With `max_checkpoints` the checkpoints let go stay behind the oldest kept one as rows until they
outweigh one whole state; then the oldest kept checkpoint is made whole, the root of the rows after it, and they go.
So a bounded stream never holds more than an unbounded one (a whole state is 128 tokens' rows at 128 slots).

A student trained with `tail_layers` K defers its upper layers to word ends (`defer_words`, its default): a keystroke
inside a word steps the lower K layers only and shows the second embedding (`TF2RNNModel.step_deferred`, forward's
`tail_hidden_state`); a token that begins a word (not a WordPiece "##" continuation) first runs the finished word
through the upper layers, and so does whitespace, so the embedding after a word and a space is the full one (the
model's `pooler_output`). `full_embedding` gives the full embedding at any time (a pause) without changing the stream.
With `idle_commits` a word ended by the whitespace a `type` call ends with waits for `idle()`, the typist's gap after
the space: the space shows the second embedding and costs no step, `idle()` runs the word through the upper layers and
shows the full one, and a next word typed before `idle()` runs it first (the next word's lower layers never read the
upper layers, so either order gives the same states).
With the fused int8 step a stream types on its live cache (`_DeferredCheckpoint`: one record a keystroke, undone in
place by deletes); without it, whole states (the lower layers' caches new at each keystroke, the upper layers' shared
with the state they stepped from). Streams in a batch step one at a time.
"""

import ctypes
import unicodedata
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, NamedTuple, Optional, Tuple, Union

import torch

from ..models import TF2RNNModel, TF2RNNState
from ..models.tf2rnn.cells_tf2rnn import TOVAAttentionCell
from ..utils import continuation_table
from .encode import check_tokenizer
from .wordpiece import ascii_wordpiece


def is_boundary(char: str) -> bool:
    """Characters where BERT's pre-tokenizer splits words: space, tab, newline, CR and Unicode spaces (Zs).
    (Other control characters are deleted by the normaliser and join their neighbours.)"""
    return char in " \t\n\r" or unicodedata.category(char) == "Zs"


class _SlotCheckpoint:
    """A `tova_attention` student's state after one step, held as what the step wrote: the key and value rows
    it committed in each layer (`slots` [layers][m], `rows` [layers, m, 2, hidden]: m = 1 for a causal student,
    `open_tokens` or 0 with open tokens; a `tail_open_tokens` student's step writes one row in each lower layer and 0
    or a block in each upper one, `rows` padded to the most; the fused live-cache step's one row a layer, `slots`
    [layers] and `rows`
    [layers, 2, hidden]), every smaller tensor by reference, and the state it stepped from. `full` caches the
    whole state while it may be stepped from again (None where the fused step wrote only the rows); `materialize`
    builds it from the nearest ancestor that holds one (the empty state at worst)."""

    __slots__ = ("parent", "slots", "rows", "small", "token_sum", "seen_tokens", "last_embedding", "full", "undo")

    def __init__(self, parent, slots: List[int], rows: torch.Tensor, small: List[torch.Tensor],
                 token_sum: torch.Tensor, seen_tokens: torch.Tensor, last_embedding: torch.Tensor,
                 full: Optional[TF2RNNState] = None, undo: Optional[torch.Tensor] = None):
        self.parent, self.slots, self.rows, self.small, self.full = parent, slots, rows, small, full
        self.token_sum, self.seen_tokens, self.last_embedding = token_sum, seen_tokens, last_embedding
        # Set where the step ran on a live cache: the rows it overwrote (shaped as `rows`), or an empty tensor
        # where it wrote none or only unused slots (the parent's fill already ignores them). None: not undoable.
        self.undo = undo

    def materialize(self) -> TF2RNNState:
        if self.full is not None:
            return self.full
        chain, node = [], self
        while isinstance(node, _SlotCheckpoint) and node.full is None:
            chain.append(node)  # newest first
            node = node.parent
        base = node if isinstance(node, TF2RNNState) else node.full
        cell, small = [], iter(self.small)
        for layer in range(len(self.slots)):
            latest = {}  # slot -> the chain's newest row written to it (a full cache overwrites evicted slots)
            for c in chain:
                for slot, row in c.writes(layer):
                    latest.setdefault(slot, row)
            for kind in (0, 1):  # keys, values
                cache = base.cell_state[3 * layer + kind].clone()
                if latest:
                    cache[0, torch.tensor(list(latest), dtype=torch.long)] = torch.stack(
                        [row[kind] for row in latest.values()])
                cell.append(cache)
            cell.append(next(small))  # the layer's fill
        cell += list(small)
        self.full = TF2RNNState(cell, self.token_sum, self.seen_tokens, self.last_embedding, self.held_outputs)
        return self.full

    @property
    def held_outputs(self) -> Optional[torch.Tensor]:
        """The current word's outputs a deferring stream holds for the upper layers (`_DeferredCheckpoint`): none."""
        return None

    @property
    def held_tokens(self) -> int:
        return 0

    def writes(self, layer: int) -> List[Tuple[int, torch.Tensor]]:
        """(slot, key and value row [2, hidden]) this step wrote in `layer`."""
        if self.rows.dim() == 3:
            return [(self.slots[layer], self.rows[layer])]
        return [(slot, self.rows[layer, j]) for j, slot in enumerate(self.slots[layer])]

    def _tensors(self) -> Tuple[torch.Tensor, ...]:
        return (self.rows, *self.small, self.token_sum, self.seen_tokens, self.last_embedding,
                *(() if self.undo is None else (self.undo,)), *(self.full._tensors() if self.full is not None else ()))

    def own_bytes(self) -> int:
        """Bytes of what this step wrote (not its whole state, nor its ancestors')."""
        return sum(t.untyped_storage().nbytes() for t in (self.rows, *self.small, self.token_sum,
                                                           self.last_embedding, self.undo) if t is not None)


class _RecordCheckpoint(_SlotCheckpoint):
    """A checkpoint the fused step wrote on a live cache: one record (`Int8TOVAStep.step_live`) and the
    counts the next step needs as numbers. Its tensors (`_SlotCheckpoint`'s fields) are views of the record,
    made on first use: a keystroke reads only the record's pointers."""

    __slots__ = ("record", "width", "overwrites", "count", "held", "seen", "kernel")

    def __init__(self, parent, record: torch.Tensor, width: int, overwrites: bool, count: int, held: int,
                 seen: int, token_sum: torch.Tensor, kernel):
        self.parent, self.record, self.width, self.overwrites, self.full = parent, record, width, overwrites, None
        self.count, self.held, self.seen, self.kernel = count, held, seen, kernel
        if token_sum is not None:  # a student without the residual: its parent's (empty) token sum
            self.token_sum = token_sum

    def __getattr__(self, name: str):
        # Called only for a field not set yet: make the record's views.
        if name not in _SlotCheckpoint.__slots__:
            raise AttributeError(name)
        small, emb, token_sum, rows, slots, replaced = self.kernel.record_views(self.record, self.width,
                                                                                self.overwrites)
        self.small, self.last_embedding, self.rows, self.slots = small, emb, rows, slots
        self.undo = replaced if self.overwrites else _NOTHING_REPLACED
        self.seen_tokens = torch.tensor([self.seen])
        if token_sum is not None:
            self.token_sum = token_sum
        return getattr(self, name)

    def embedding(self) -> torch.Tensor:
        """The embedding after this step ([output_size], a copy), without making the other views."""
        return self.kernel.record_embedding(self.record)

    def own_bytes(self) -> int:
        return ctypes.sizeof(self.record)  # without making the views

    def undo_on(self, kv: torch.Tensor) -> None:
        """Put back on the live cache `kv` the rows this step overwrote."""
        if self.overwrites and self.width:
            self.kernel.restore(kv, self.record, self.width)


class _DeferredCheckpoint(_RecordCheckpoint):
    """A deferring stream's checkpoint on a live cache (`BatchStreamingEncoder` with `defer_words`): one record of
    `Int8TOVAStep.step_deferred_live` (the lower layers' step of a token; `width` the word's tokens held before it) or
    of `commit_live` (the upper layers' commit of a word's `width` tokens). `count` counts the tokens the upper layers
    have read, `held` those they have not (`held_tokens`), `seen` both."""

    __slots__ = ("commit", "_writes", "_held")

    def __init__(self, parent, record: torch.Tensor, commit: bool, width: int, count: int, held: int, seen: int,
                 token_sum: Optional[torch.Tensor], kernel):
        super().__init__(parent, record, width, True, count, held, seen, token_sum, kernel)
        self.commit = commit

    def __getattr__(self, name: str):
        # Called only for a field not set yet: make the record's views.
        if name not in _SlotCheckpoint.__slots__ + ("_writes", "_held"):
            raise AttributeError(name)
        small, emb, token_sum, held, writes = self.kernel.deferred_views(self.record, self.commit, self.width)
        self.small, self.last_embedding, self._held, self._writes = small, emb, held, writes
        self.slots = [[slot for slot, _ in layer] for layer in writes]  # materialize counts the layers by it
        self.rows, self.undo = torch.empty(0), None
        self.seen_tokens = torch.tensor([self.seen])
        if token_sum is not None:
            self.token_sum = token_sum
        return getattr(self, name)

    @property
    def held_tokens(self) -> int:
        return self.held

    @property
    def held_outputs(self) -> Optional[torch.Tensor]:
        return self._held if self.held else None

    def held_pointer(self) -> Optional[int]:
        """Where the record holds the word's outputs (None for a commit, which holds none)."""
        if self.commit:
            return None
        return ctypes.addressof(self.record) + 4 * self.kernel._deferred_layout(False, self.width)[1]

    def writes(self, layer: int) -> List[Tuple[int, torch.Tensor]]:
        return self._writes[layer]

    def _tensors(self) -> Tuple[torch.Tensor, ...]:
        return (torch.frombuffer(self.record, dtype=torch.uint8), *(self.full._tensors() if self.full else ()))

    def undo_on(self, kv: torch.Tensor) -> None:
        self.kernel.restore_deferred(kv, self.record, self.commit, self.width)


class _LiveStep(NamedTuple):
    """What one stream's live step reads (`BatchStreamingEncoder._live_step_args`)."""

    live: "_LiveCache"
    small: List[int]  # pointers to the parent's small entries
    tsum: int  # pointer to the parent's token sum
    count: int  # rows the parent has committed
    held: int  # open tokens the parent holds
    seen: int  # tokens the parent has seen
    token_sum: Optional[torch.Tensor]  # what a record without the residual keeps (the parent's)
    width: int  # rows the step writes
    overwrites: bool  # whether they replace rows in use
    keep: object  # the tensors the pointers read, held until the step has run

    def checkpoint(self, parent: "Checkpoint", record: torch.Tensor, kernel) -> "_RecordCheckpoint":
        """The step's new state, now the live cache's."""
        self.live.at = _RecordCheckpoint(parent, record, self.width, self.overwrites, self.count + self.width,
                                         (self.held + 1) % kernel.open, self.seen + 1, self.token_sum, kernel)
        return self.live.at


class _LiveCache:
    """One stream's own keys and values ([layers, 2, 1, slots, hidden]), equal to checkpoint `at`'s. A keystroke
    steps from it and writes its rows in place; moving to an ancestor undoes the rows on the way (a pop), and any
    other move copies the target's caches in. Each layer's keys and values are views, so the fused step reads them
    as a state's entries."""

    __slots__ = ("kv", "at", "pointers", "slots")
    UNDO_LIMIT = 32  # checkpoints undone before a copy is the cheaper move

    def __init__(self, layers: int, slots: int, hidden: int):
        self.kv, self.at, self.slots = torch.zeros(layers, 2, 1, slots, hidden), None, slots
        self.pointers = None  # the fused step's state pointers into kv (`Int8TOVAStep.cache_pointers`)

    def seek(self, target: "Checkpoint") -> None:
        """Make the caches equal `target`'s."""
        node, path = self.at, []
        while node is not target and isinstance(node, _SlotCheckpoint) and (
                isinstance(node, _RecordCheckpoint) or node.undo is not None) and len(path) < self.UNDO_LIMIT:
            path.append(node)
            node = node.parent
        if node is target:
            for step in path:  # newest first
                if isinstance(step, _RecordCheckpoint):
                    step.undo_on(self.kv)
                elif step.undo.numel():
                    layers = torch.arange(len(self.kv))
                    slots = torch.tensor(step.slots)  # [layers], or [layers, m] for a block of open tokens
                    self.kv[layers if slots.dim() == 1 else layers[:, None], :, 0, slots] = step.undo
        else:
            cell = _full(target).cell_state
            for layer in range(len(self.kv)):
                self.kv[layer, 0].copy_(cell[3 * layer])
                self.kv[layer, 1].copy_(cell[3 * layer + 1])
        self.at = target


_NOTHING_REPLACED = torch.empty(0)  # a step into unused slots: undoing it needs no rows


Checkpoint = Union[TF2RNNState, _SlotCheckpoint]


def _full(state: Checkpoint) -> TF2RNNState:
    return state.materialize() if isinstance(state, _SlotCheckpoint) else state


def _release(state: Optional[Checkpoint]) -> None:
    """Let a checkpoint's whole state go (it is rebuilt from rows if it is stepped from again)."""
    if isinstance(state, _SlotCheckpoint) and state.parent is not None:  # a chain's root keeps it
        state.full = None


def _rebase(state: Optional[Checkpoint]) -> None:
    """Make a checkpoint whole and the root of its chain, so that the checkpoints before it can go."""
    if isinstance(state, _SlotCheckpoint):
        state.materialize()
        state.parent = None


@dataclass
class _Boundary:
    """A word boundary: restored whole when a delete pops it. `state` and `word_states` are None once
    `max_checkpoints` has let them go."""

    start: int  # character index just after the boundary
    state: Optional[Checkpoint]  # after every token before it
    word_tokens: Optional[List[int]]  # the finished word's tokens
    word_states: Optional[List[Checkpoint]]  # and the state after each of them


@dataclass
class _Stream:
    text: str = ""
    boundaries: List[_Boundary] = field(default_factory=list)
    word_tokens: List[int] = field(default_factory=list)  # tokens of the current word already run
    word_states: List[Checkpoint] = field(default_factory=list)  # state after each of them
    char_states: List[Optional[Checkpoint]] = field(default_factory=list)  # byte-level: state after each character
    live: Optional[_LiveCache] = None  # tova_attention at batch 1: the cache keystrokes change in place
    dropped: int = 0  # how many of the oldest checkpoints (boundaries, or characters) max_checkpoints let go


class BatchStreamingEncoder:
    """Many concurrent streams (a server's sessions), stepped together in batches.

    `open()` returns a stream id; `type({id: text})` and `delete({id: n})` apply edits to several
    streams at once and step all of them in one batched model call per token position (an int8 inherited
    student: each stream's own cache, in the fused kernel). `defer_words` (default: whether the student was trained
    with `tail_layers`) runs its upper layers at word ends only (the module's docstring); False runs every layer at
    every keystroke. `idle_commits` (a deferring student): a word that whitespace ends at the end of a `type` call
    waits for `idle()` to run its upper layers, off the keystroke path (the module's docstring).
    """

    def __init__(self, model: TF2RNNModel, tokenizer, max_checkpoints: Optional[int] = None,
                 defer_words: Optional[bool] = None, idle_commits: bool = False):
        if max_checkpoints is not None and (not isinstance(max_checkpoints, int) or isinstance(max_checkpoints, bool)
                                            or max_checkpoints < 1):
            raise ValueError(f"max_checkpoints must be at least 1 (the state the current word grows from) and a whole "
                             f"number, or None; got {max_checkpoints!r}.")
        check_tokenizer(model, tokenizer)
        self.max_checkpoints = max_checkpoints
        self.byte_level = getattr(model.config, "granularity", "token") == "byte"
        self.model = model.eval()
        self.backend = tokenizer.backend_tokenizer if hasattr(tokenizer, "backend_tokenizer") else None
        if self.backend is not None and (self.backend.padding or self.backend.truncation):
            # Words go through the backend directly; padding or truncation set there (the built-in teacher's
            # tokenizer.json pads every encoding to 128) would step pads. A copy without them, so the
            # caller's tokenizer is untouched.
            from tokenizers import Tokenizer

            self.backend = Tokenizer.from_str(self.backend.to_str())
            self.backend.no_padding()
            self.backend.no_truncation()
        self.tokenizer = tokenizer
        # Words of ASCII letters and digits skip the tokenizer's pipeline (wordpiece.py: the same ids, cheaper cold).
        self._plain_words = ascii_wordpiece(tokenizer, self.backend) if self.backend is not None else None
        can_defer = getattr(model.config, "tail_layers", None) is not None and hasattr(model, "step_deferred")
        if defer_words and not can_defer:
            raise ValueError("defer_words steps a student trained with tail_layers (its upper layers at word ends); "
                             "this one has none.")
        # The tokens that continue a word: any other begins one, which ends the word before it.
        self._continues = continuation_table(tokenizer).tolist() if can_defer and defer_words is not False else None
        if idle_commits and self._continues is None:
            raise ValueError("idle_commits defers the upper layers of a student that defers them to word ends "
                             "(tail_layers, defer_words); this stream runs every layer at every keystroke.")
        self.idle_commits = bool(idle_commits)
        slot_cache = model.config.cell_type == "tova_attention"  # its checkpoints hold rows
        # Single keystrokes type on a live cache: a step writes its rows (one a layer, or a block of open
        # tokens when they commit) in place. A `tail_open_tokens` student does where it defers its upper layers;
        # its every-layer step (each token a word of its own) steps whole states.
        self._upper_open = getattr(model.config, "tail_open_tokens", 1) > 1
        self._live = slot_cache and (self._continues is not None or not self._upper_open)
        self._slot_layers = model.config.num_hidden_layers if slot_cache else 0
        self._empty = model.init_state(1)
        self._state_bytes = self._empty.nbytes()
        self._small = TOVAAttentionCell.rewritten_entries(self._slot_layers, len(self._empty.cell_state)) \
            if slot_cache else []
        self.streams: Dict[int, _Stream] = {}
        self._next_id = 0

    # ------------------------------------------------------------ streams

    def open(self, n: int = 1) -> List[int]:
        """Open `n` empty streams; returns their ids."""
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError(f"open(n) takes a whole number of streams, at least 1; got {n!r}.")
        ids = list(range(self._next_id, self._next_id + n))
        for i in ids:
            self.streams[i] = _Stream()
        self._next_id += n
        return ids

    def close(self, stream_id: int) -> None:
        self._get(stream_id)
        del self.streams[stream_id]

    def reset(self, stream_id: int) -> None:
        self._get(stream_id)
        self.streams[stream_id] = _Stream()

    def _get(self, stream_id: int) -> _Stream:
        if stream_id not in self.streams:
            raise KeyError(f"No open stream {stream_id}.")
        return self.streams[stream_id]

    def text(self, stream_id: int) -> str:
        return self._get(stream_id).text

    # Batched steps run under inference_mode (~10% off their keystroke; entering it cost a fused single-stream
    # keystroke more than it saved); what leaves the encoder is cloned into ordinary tensors, so callers may use
    # it anywhere, autograd included.
    def embedding(self, stream_id: int) -> torch.Tensor:
        """The current embedding of a stream ([output_size]; zeros before its first token)."""
        state = self._state(self._get(stream_id))
        return state.embedding() if isinstance(state, _RecordCheckpoint) else state.last_embedding[0].clone()

    def full_embedding(self, stream_id: int) -> torch.Tensor:
        """The full embedding of a stream's text ([output_size]): `embedding`, but for a stream that defers its upper
        layers (`defer_words`) with the current word run through them too (what a pause can afford), leaving the
        stream's text and embeddings as they are (a word left to `idle()` is committed, as `idle()` would)."""
        s = self._get(stream_id)
        if self._continues is not None and not s.word_states:
            self._commit_base(s)  # a word left to idle(): idle()'s in-place commit, not a whole state built for a copy
        state = self._state(s)
        if self._continues is None or not state.held_tokens:
            return self.embedding(stream_id)
        kept = isinstance(state, _SlotCheckpoint) and state.full is not None
        with torch.inference_mode():
            emb = self.model.commit_word(_full(state))[0]
        if not kept:
            _release(state)  # a pause's whole state is not kept: the stream goes on from rows
        return emb[0].clone()

    def idle(self, stream_ids: Optional[Iterable[int]] = None) -> Dict[int, torch.Tensor]:
        """Run the finished word each stream (default: every open one) holds for its upper layers (`idle_commits`), as
        an app does in the gap after a keystroke; returns each stream's embedding, now the full one after a word and a
        space. A stream with no such word is left as it is."""
        ids = list(self.streams) if stream_ids is None else list(stream_ids)
        for stream_id in ids:
            self._get(stream_id)
        if self._continues is not None:
            self._prewake()
            for stream_id in ids:
                self._commit_base(self.streams[stream_id])
        return {i: self.embedding(i) for i in ids}

    def _commit_base(self, s: _Stream) -> None:
        """The finished word the stream's last boundary holds (a space typed with `idle_commits`, no token since)
        through the upper layers, the boundary keeping the result: typing restarts from it."""
        if s.word_states or not s.boundaries:
            return
        boundary = s.boundaries[-1]
        if boundary.state is not None and boundary.state.held_tokens:
            boundary.state = self._commit(s, boundary.state)

    def state(self, stream_id: int) -> TF2RNNState:
        """The model state of the stream's whole text (batch of 1)."""
        return _full(self._state(self._get(stream_id))).clone()

    def nbytes(self, stream_id: int) -> int:
        """Bytes of model state a stream holds: its current state plus the checkpoints kept so that deletes
        are pops (one per finished word, and per token of the current word; per character for bytes)."""
        s = self._get(stream_id)
        states = [self._state(s), *(b.state for b in s.boundaries), *s.word_states, *s.char_states,
                  *(st for b in s.boundaries for st in b.word_states or ())]
        seen = {} if s.live is None else {s.live.kv.untyped_storage().data_ptr(): s.live.kv.untyped_storage().nbytes()}
        visited = set() if states[0] is self._empty else {id(self._empty)}  # shared by every stream
        for state in filter(None, states):
            while state is not None and id(state) not in visited:  # a row checkpoint holds its ancestors
                visited.add(id(state))
                held = getattr(state, "held_outputs", None)  # a deferring stream's current word
                for t in (*state._tensors(), *(() if held is None else (held,))):
                    seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
                state = getattr(state, "parent", None)
        return sum(seen.values())

    def _base(self, s: _Stream) -> Checkpoint:
        return s.boundaries[-1].state if s.boundaries else self._empty

    def _state(self, s: _Stream) -> Checkpoint:
        if self.byte_level:
            return s.char_states[-1] if s.char_states else self._empty
        return s.word_states[-1] if s.word_states else self._base(s)

    # ------------------------------------------------------------ edits

    def type(self, edits: Dict[int, str]) -> Dict[int, torch.Tensor]:
        """Append text to streams; returns each edited stream's new embedding. A call that raises leaves
        every stream as it was."""
        for stream_id, text in edits.items():
            self._get(stream_id)
            if not isinstance(text, str):
                raise TypeError(f"type() takes str, got {type(text).__name__} for stream {stream_id}.")
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as err:
                raise ValueError(f"type() got text that is not valid UTF-8 for stream {stream_id} (a lone surrogate "
                                 f"at character {err.start}: {text[err.start:err.end]!r}).") from None
        self._prewake()
        marks = {i: self._mark(self.streams[i]) for i in edits}
        try:
            return self._type(edits)
        except BaseException:
            for stream_id, mark in marks.items():
                self._undo(stream_id, mark)
            raise

    @staticmethod
    def _mark(s: _Stream) -> tuple:
        # Typing only appends to the checkpoint lists and replaces (never edits) the current word's lists,
        # so their lengths and the word's lists undo it: O(1), not a copy of every checkpoint per keystroke.
        return s.text, len(s.boundaries), s.word_tokens, s.word_states, len(s.char_states), s.dropped

    def _undo(self, stream_id: int, mark: tuple) -> None:
        s = self.streams[stream_id]
        text, boundaries, word_tokens, word_states, chars, dropped = mark
        if s.dropped > dropped:  # max_checkpoints let go of checkpoints the marked stream still needs
            self.streams[stream_id] = _Stream()
            self._type({stream_id: text})  # re-encode once, as a delete past the kept checkpoints does
            return
        s.text, s.word_tokens, s.word_states = text, word_tokens, word_states
        del s.boundaries[boundaries:], s.char_states[chars:]

    def _type(self, edits: Dict[int, str]) -> Dict[int, torch.Tensor]:
        if self.byte_level:
            self._type_bytes(edits)
            return {i: self.embedding(i) for i in edits}
        for stream_id, text in edits.items():
            s = self._get(stream_id)
            dirty = False
            # With idle_commits the whitespace after the call's last word leaves that word to idle().
            last_word = max((k for k, char in enumerate(text) if not is_boundary(char)), default=-1) \
                if self.idle_commits else len(text)
            for k, char in enumerate(text):
                if is_boundary(char):
                    if dirty:  # the word was typed in this same call: run it before closing it
                        self._refresh([stream_id])
                        dirty = False
                    # The word is complete and its state computed, so this is a push. Re-tokenising restarts
                    # only from the new base or the next word's states: the older checkpoints keep their rows.
                    current = self._state(s)
                    for old in (self._base(s), *s.word_states):
                        if old is not current:
                            _release(old)
                    if self._continues is not None and current.held_tokens and k < last_word:
                        current = self._commit(s, current)  # the word through the upper layers
                    s.boundaries.append(_Boundary(len(s.text) + 1, current, s.word_tokens, s.word_states))
                    s.word_tokens, s.word_states = [], []
                    self._cap(s, s.boundaries, lambda b: _Boundary(b.start, None, None, None))
                else:
                    dirty = True
                s.text += char
        self._refresh(list(edits))
        return {i: self.embedding(i) for i in edits}

    def delete(self, edits: Dict[int, int]) -> Dict[int, torch.Tensor]:
        """Remove the last n characters of streams; returns each stream's new embedding."""
        for stream_id, n in edits.items():
            s = self._get(stream_id)
            if not isinstance(n, int) or isinstance(n, bool):
                raise TypeError(f"delete() takes a whole number of characters, got {n!r} for stream {stream_id}.")
            if n < 0:
                raise ValueError(f"Cannot delete a negative number of characters ({n}).")
            if n > len(s.text):
                raise ValueError(f"Cannot delete {n} characters from stream {stream_id}: it holds {len(s.text)}.")
        self._prewake()
        rebuild = {}
        for stream_id, n in edits.items():
            s = self._get(stream_id)
            s.text = s.text[:len(s.text) - n]
            del s.char_states[len(s.text):]  # byte-level: one state per character, popped
            while s.boundaries and s.boundaries[-1].start > len(s.text):
                popped = s.boundaries.pop()  # a pop, never a re-encode
                s.word_tokens, s.word_states = popped.word_tokens, popped.word_states
            s.dropped = min(s.dropped, len(s.char_states) if self.byte_level else len(s.boundaries))
            if (s.word_states is None or (s.boundaries and s.boundaries[-1].state is None)
                    or (s.char_states and s.char_states[-1] is None)):
                rebuild[stream_id] = s.text  # deleted past the checkpoints max_checkpoints kept
        for stream_id in rebuild:
            self.streams[stream_id] = _Stream()
        if rebuild:
            self.type(rebuild)
        if not self.byte_level:
            self._refresh([i for i in edits if i not in rebuild])
        return {i: self.embedding(i) for i in edits}

    def _cap(self, s: _Stream, checkpoints: list, drop) -> None:
        """Let go of the oldest checkpoints beyond max_checkpoints (they are a prefix of the list)."""
        if self.max_checkpoints is None or len(checkpoints) - s.dropped <= self.max_checkpoints:
            return
        while len(checkpoints) - s.dropped > self.max_checkpoints:
            checkpoints[s.dropped] = drop(checkpoints[s.dropped])
            s.dropped += 1
        # Row checkpoints chain back through the ones let go: once those outweigh a whole state, the oldest kept one
        # becomes whole, the root, and they go (rebasing at every cap held a whole state where a few rows would do:
        # 1.2 MB against 873 KB a stream after 13 words, experiments.md, session 35).
        kept = checkpoints[s.dropped]
        if isinstance(kept, _Boundary):  # its word's first state stepped from the boundary let go
            kept = kept.word_states[0] if kept.word_states else kept.state
        if self._rebase_pays(kept):
            _rebase(kept)

    def _rebase_pays(self, kept: Optional[Checkpoint]) -> bool:
        """Whether making `kept` whole frees at least what it costs: the row checkpoints behind it (let go, held only
        as its ancestors) outweigh a whole state, or end at a whole state of the stream's own."""
        if not isinstance(kept, _SlotCheckpoint) or kept.parent is None:
            return False  # a whole state, or a root already: nothing behind it
        if kept.full is not None:
            return True  # whole already: cutting the chain only frees
        held, node = 0, kept.parent
        while isinstance(node, _SlotCheckpoint) and node.full is None:
            held += node.own_bytes()
            if held > self._state_bytes:
                return True
            node = node.parent
        return node is not self._empty  # the empty state is shared by every stream; any other whole one is not

    def _prewake(self) -> None:
        # The fused step's helper thread takes ~10 us to wake: waking it now overlaps that with the Python below.
        kernel = getattr(self.model, "step_kernel", None)
        if kernel is not None and hasattr(kernel, "prewake"):
            kernel.prewake()

    def _word_tokens(self, word: str) -> List[int]:
        if self._plain_words is not None:
            tokens = self._plain_words(word)
            if tokens is not None:
                return tokens
        if self.backend is not None:
            return self.backend.encode(word, add_special_tokens=False).ids
        return self.tokenizer(word, add_special_tokens=False)["input_ids"]

    @torch.inference_mode()
    def _type_bytes(self, edits: Dict[int, str]) -> None:
        """Byte-level: step each stream's new bytes, batched across streams, keeping the state after each
        character."""
        offset = self.tokenizer.offset
        pending = []  # [stream, [(byte id, ends a character)], current state]
        for stream_id, text in edits.items():
            s = self._get(stream_id)
            steps = [(b + offset, k == len(enc) - 1) for ch in text for enc in [ch.encode("utf-8")]
                     for k, b in enumerate(enc)]
            s.text += text
            if steps:
                pending.append([s, steps, self._state(s)])
        for r in range(max((len(p[1]) for p in pending), default=0)):
            active = [p for p in pending if len(p[1]) > r]
            for p, new in zip(active, self._step([p[2] for p in active], [p[1][r][0] for p in active])):
                _release(p[2])  # bytes restart only from the current character's state
                p[2] = new
                if p[1][r][1]:
                    p[0].char_states.append(new)
                    self._cap(p[0], p[0].char_states, lambda _: None)

    def _refresh(self, stream_ids: Iterable[int]) -> None:
        """Re-tokenise each stream's current word and step the tokens that changed, batched."""
        pending: List[Tuple[_Stream, List[int]]] = []
        for i in stream_ids:
            s = self.streams[i]
            tokens = self._word_tokens(s.text[s.boundaries[-1].start if s.boundaries else 0:])
            old, keep = s.word_tokens, 0
            same = min(len(tokens), len(old))
            while keep < same and tokens[keep] == old[keep]:
                keep += 1
            # New lists, never the old ones cut in place: `_mark` holds the old ones to undo a failed call.
            s.word_tokens, s.word_states = old[:keep], s.word_states[:keep]
            if len(tokens) > keep:
                if not keep and self._continues is not None:
                    self._commit_base(s)  # a word left to idle() that did not come: before the next word's tokens
                pending.append((s, tokens[keep:]))
        if len(pending) == 1:  # one stream (a keystroke): its tokens in turn, without the rounds' lists
            s, tokens = pending[0]
            for tok in tokens:
                s.word_states.append(self._step([self._state(s)], [tok], [s])[0])
                s.word_tokens.append(tok)
            return
        rounds = max((len(t) for _, t in pending), default=0)
        for r in range(rounds):
            active = [(s, t[r]) for s, t in pending if len(t) > r]
            stepped = self._step([self._state(s) for s, _ in active], [tok for _, tok in active],
                                 [s for s, _ in active])
            for (s, tok), new in zip(active, stepped):
                s.word_tokens.append(tok)
                s.word_states.append(new)

    def _step(self, states: List[Checkpoint], ids: List[int],
              streams: Optional[List[_Stream]] = None) -> List[Checkpoint]:
        """One step of several streams in one batched model call (`model.step`); a single stream (a
        keystroke at batch 1) skips the concatenating and splitting, and an int8 inherited student steps each
        stream's live cache in its fused kernel."""
        kernel = getattr(self.model, "step_kernel", None)  # an ONNX student has none
        if self._continues is not None:
            if streams and self._live and hasattr(kernel, "step_deferred_live"):
                return [self._step_deferred_live(s, state, token, kernel)
                        for s, state, token in zip(streams, states, ids)]
            return [self._step_deferred(state, token, kernel) for state, token in zip(states, ids)]
        if streams and self._live and hasattr(kernel, "step_live"):
            # Several streams too: gathering their caches (0.4 MB each at 128 slots) into one batched call and
            # splitting them back cost more than each stream's fused step in place (benchmarks/probes/
            # batched_streams.py). A causal student's streams step in one native call, each on its own cache.
            if len(streams) > 1 and kernel.open == 1:
                return self._step_live_many(streams, states, ids, kernel)
            return [self._step_live(s, state, token, kernel) for s, state, token in zip(streams, states, ids)]
        if len(states) == 1 and kernel is not None and not self._slot_layers:
            # Straight to the fused step: model.step's input checks cost a GRU keystroke a sixth of its time, and
            # the state and token are the encoder's own (the kernel checks the id is in the vocabulary).
            return [kernel(ids[0], states[0])[1]]
        with torch.inference_mode():  # PyTorch's ops, as the fused steps above make next to none
            full = [_full(state) for state in states]
            batch = full[0] if len(states) == 1 else TF2RNNState.concat(full)
            _, new = self.model.step(torch.tensor(ids, dtype=torch.long, device=batch.device), batch)
            new = [new] if len(states) == 1 else [new.index_select([row]) for row in range(len(states))]
            if not self._slot_layers:
                return new
            return [self._checkpoint(parent, before, after) for parent, before, after in zip(states, full, new)]

    def _step_deferred(self, state: TF2RNNState, token: int, kernel) -> TF2RNNState:
        """One token of a stream that defers its upper layers to word ends (`TF2RNNModel.step_deferred`): the fused
        step where the model carries one (its input checks cost a keystroke more than its lower layers' products)."""
        begins = not self._continues[token]
        with torch.inference_mode():
            if kernel is not None and hasattr(kernel, "step_deferred"):
                return kernel.step_deferred(token, state, begins)[1]
            return self.model.step_deferred(torch.tensor([token]), state, begins)[1]

    def _commit(self, s: _Stream, state: Checkpoint) -> Checkpoint:
        """The word `state` holds through the upper layers: on the stream's live cache where it has one."""
        kernel = getattr(self.model, "step_kernel", None)
        if self._live and hasattr(kernel, "commit_live"):
            return self._commit_live(s, state, kernel)
        with torch.inference_mode():
            return self.model.commit_word(_full(state))[1]

    def _step_deferred_live(self, s: _Stream, parent: Checkpoint, token: int, kernel) -> "_DeferredCheckpoint":
        """`_step_deferred` on the stream's live cache: one record and one native call a keystroke (two where the token
        begins a word and a word is held: its commit first), as `_step_live`."""
        if not self._continues[token] and parent.held_tokens:
            parent = self._commit_live(s, parent, kernel)
        a, count, seen, held, held_n = self._deferred_args(s, parent, kernel)
        record = kernel.step_deferred_live(token, a.live.pointers, a.small, a.tsum, seen, held, held_n)
        a.live.at = _DeferredCheckpoint(parent, record, False, held_n, count, held_n + 1, seen + 1, a.token_sum,
                                        kernel)
        return a.live.at

    def _commit_live(self, s: _Stream, parent: Checkpoint, kernel) -> "_DeferredCheckpoint":
        """`_commit` on the stream's live cache: the upper layers' rows written in place, one record."""
        a, count, seen, held, n = self._deferred_args(s, parent, kernel)
        record = kernel.commit_live(a.live.pointers, a.small, a.tsum, seen, held, n)
        a.live.at = _DeferredCheckpoint(parent, record, True, n, count + n, 0, seen, a.token_sum, kernel)
        return a.live.at

    def _deferred_args(self, s: _Stream, parent: Checkpoint, kernel):
        """(`_live_step_args`, which also holds what its pointers read; the tokens the upper layers have read; the
        tokens seen; where the held word's outputs are, or None; how many) for a deferring live step from `parent`."""
        a = self._live_step_args(s, parent, kernel)
        held_n = parent.held_tokens
        if isinstance(parent, _DeferredCheckpoint):
            return a, parent.count, parent.seen, parent.held_pointer(), held_n
        held = parent.held_outputs
        if held is not None:
            held = held.contiguous()
            a = a._replace(keep=(a.keep, held))  # alive until the native call
        return a, a.count, int(parent.seen_tokens), None if held is None else held.data_ptr(), held_n

    def _step_live(self, s: _Stream, parent: Checkpoint, token: int, kernel) -> _SlotCheckpoint:
        """A keystroke of one stream on its live cache. Its new state is `parent` plus the rows the step commits
        (one per layer; with open tokens a block every `open_tokens` steps, else none): the fused step writes only
        those, into the cache, and the rest of the new state into one record, with the rows they replace so a
        delete can undo them (copying a whole cache per keystroke, or building one from rows, cost a third of a
        keystroke or more)."""
        a = self._live_step_args(s, parent, kernel)
        record = kernel.step_live(token, a.live.pointers, a.small, a.tsum, a.seen, a.width, a.overwrites)
        return a.checkpoint(parent, record, kernel)

    def _step_live_many(self, streams: List[_Stream], parents: List[Checkpoint], tokens: List[int],
                        kernel) -> List[_SlotCheckpoint]:
        """`_step_live` for several streams of a causal student in one native call (`step_live_many`): the products
        read each weight once per few streams instead of once per stream."""
        args = [self._live_step_args(s, parent, kernel) for s, parent in zip(streams, parents)]
        records = kernel.step_live_many(tokens, [a.live.pointers for a in args], [a.small for a in args],
                                        [a.tsum for a in args], [a.seen for a in args], [a.overwrites for a in args])
        return [a.checkpoint(parent, record, kernel) for a, parent, record in zip(args, parents, records)]

    def _live_step_args(self, s: _Stream, parent: Checkpoint, kernel) -> "_LiveStep":
        """What a live step of stream `s` from `parent` reads, its live cache moved to `parent`."""
        live = s.live
        if live is None:
            config = self.model.config
            live = s.live = _LiveCache(self._slot_layers, config.num_slots, config.hidden_size)
            live.pointers = kernel.cache_pointers(live.kv)
        if live.at is not parent:
            live.seek(parent)
        if isinstance(parent, _RecordCheckpoint):
            small, tsum = kernel.record_pointers(parent.record)
            count, held, seen = parent.count, parent.held, parent.seen
            token_sum = None if kernel.residual else parent.token_sum
            keep = parent.record
        else:  # a whole state, or a checkpoint the batched path wrote
            entries = parent.small if isinstance(parent, _SlotCheckpoint) else \
                [parent.cell_state[i] for i in self._small]
            entries = [t.contiguous() for t in entries]
            token_sum = parent.token_sum.contiguous()
            small, tsum = [t.data_ptr() for t in entries], token_sum.data_ptr()
            count, seen = int(entries[-2]), int(parent.seen_tokens)
            held = int(entries[self._slot_layers + 1]) if kernel.open > 1 else 0
            keep = entries, token_sum
            token_sum = None if kernel.residual else token_sum
        width = kernel.rows_written(held)
        overwrites = count + width > live.slots  # rows in use are replaced
        return _LiveStep(live, small, tsum, count, held, seen, token_sum, width, overwrites, keep)

    def _checkpoint(self, parent: Checkpoint, before: TF2RNNState, after: TF2RNNState) -> Checkpoint:
        """`after` as a row checkpoint of `parent` (whose whole state is `before`): a step commits `open_tokens`
        rows per layer (one for a causal student), or none while its tokens stay open; whole where it wrote
        otherwise."""
        layers, cell = self._slot_layers, after.cell_state
        count, stepped = int(before.cell_state[-2]), int(cell[-2])
        width = self.model.config.open_tokens
        if self._upper_open:  # a row in each lower layer and, where the block fills, a block in each upper one
            slots = [((cell[3 * layer][0] != before.cell_state[3 * layer][0]).any(-1)
                      | (cell[3 * layer + 2][0] != before.cell_state[3 * layer + 2][0])).nonzero().flatten().tolist()
                     for layer in range(layers)]
        elif stepped == count and width > 1:
            slots: List[List[int]] = [[] for _ in range(layers)]
        elif stepped != count + width:
            return after
        elif count + width <= self.model.config.num_slots:
            slots = [list(range(count, count + width))] * layers  # caches fill in order until full
        else:  # a full cache overwrote the slots it evicted
            slots = []
            for layer in range(layers):
                changed = (cell[3 * layer][0] != before.cell_state[3 * layer][0]).any(-1).nonzero().flatten()
                if changed.numel() != width:
                    return after
                slots.append(changed.tolist())
        # [layers, m, 2, hidden]: a layer that wrote fewer rows than m leaves the rest zero (`writes` reads its slots')
        rows = cell[0].new_zeros(layers, max(map(len, slots)), 2, self.model.config.hidden_size)
        for layer, layer_slots in enumerate(slots):
            for j, slot in enumerate(layer_slots):
                rows[layer, j, 0], rows[layer, j, 1] = cell[3 * layer][0, slot], cell[3 * layer + 1][0, slot]
        small = [cell[i] for i in TOVAAttentionCell.rewritten_entries(layers, len(cell))]
        return _SlotCheckpoint(parent, slots, rows, small, after.token_sum, after.seen_tokens, after.last_embedding,
                               after)


class StreamingEncoder:
    """One stream: `type("Hel")`, `delete(1)`, `.embedding`, `.text`, `reset()`.

    >>> enc = StreamingEncoder(model, tokenizer)
    >>> enc.type("search as you ty"); enc.delete(2); enc.type("type")
    >>> enc.embedding  # equals model(tokenizer("search as you type")).pooler_output[0]

    Where torch has two threads, an int8 keystroke splits its products with a helper thread. torch's own OpenMP
    workers spin for milliseconds after each parallel op, so a keystroke right after one (a large matmul, a teacher
    call) can wait 1-6 ms for that core: `OMP_WAIT_POLICY=PASSIVE` (set before torch loads) or one torch thread
    avoids it (docs/experiments.md, session 68).
    """

    def __init__(self, model: TF2RNNModel, tokenizer, batch: Optional[BatchStreamingEncoder] = None,
                 max_checkpoints: Optional[int] = None, defer_words: Optional[bool] = None,
                 idle_commits: bool = False):
        self._batch = batch or BatchStreamingEncoder(model, tokenizer, max_checkpoints=max_checkpoints,
                                                     defer_words=defer_words, idle_commits=idle_commits)
        (self._id,) = self._batch.open(1)

    def type(self, text: str) -> torch.Tensor:
        """Append `text` (any number of characters); returns the new embedding."""
        return self._batch.type({self._id: text})[self._id]

    def delete(self, n: int = 1) -> torch.Tensor:
        """Remove the last `n` characters; ValueError if the stream holds fewer."""
        return self._batch.delete({self._id: n})[self._id]

    def reset(self) -> None:
        self._batch.reset(self._id)

    def idle(self) -> torch.Tensor:
        """`BatchStreamingEncoder.idle`: the finished word left by `idle_commits` through the upper layers, in the
        typist's gap; returns the embedding."""
        return self._batch.idle([self._id])[self._id]

    @property
    def text(self) -> str:
        return self._batch.text(self._id)

    @property
    def embedding(self) -> torch.Tensor:
        return self._batch.embedding(self._id)

    @property
    def full_embedding(self) -> torch.Tensor:
        """`BatchStreamingEncoder.full_embedding`: the current word through every layer too (a pause)."""
        return self._batch.full_embedding(self._id)

    @property
    def state(self) -> TF2RNNState:
        return self._batch.state(self._id)


def keystroke_embeddings(model: TF2RNNModel, tokenizer, text: str) -> torch.Tensor:
    """The streamed embedding after each character of `text` is typed: [len(text), output_size]."""
    encoder = StreamingEncoder(model, tokenizer)
    return torch.stack([encoder.type(char) for char in text]) if text else torch.zeros(0, model.config.output_size)
