"""Streaming: any edit script gives the embedding of the resulting text from scratch; bad input."""

import pytest
import torch
from conftest import apply_edits
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tf2rnn_hf.distill import build_student
from tf2rnn_hf.inference.quantization import quantize_int8
from tf2rnn_hf.inference.streaming import (
    BatchStreamingEncoder,
    StreamingEncoder,
    _SlotCheckpoint,
    is_boundary,
    keystroke_embeddings,
)
from tf2rnn_hf.utils import continuation_table

ALPHABET = "abcdefghij klmnoXYZ.,!?'-\t\n0123é\u0301\u00a0\u200b😀\x01"


@pytest.fixture(scope="module", params=["token", "byte"])
def student(teacher, request):
    torch.manual_seed(0)
    model, tokenizer = build_student(teacher, cell_type="gru", hidden_size=32, num_hidden_layers=2,
                                                token_init="input_embeddings", granularity=request.param)
    return model.eval(), tokenizer


@pytest.fixture(scope="module")
def inherited(teacher):
    """An inherited student, whose checkpoints hold rows (`_SlotCheckpoint`): 4 slots, so that edit scripts
    overflow its caches and pops rebuild states that evictions wrote."""
    model, tokenizer = build_student(teacher, cell_type="tova_attention", num_hidden_layers=1, num_slots=4)
    return model.eval(), tokenizer


@pytest.fixture(scope="module")
def open_block(teacher):
    """An inherited student with three open tokens: its steps commit blocks of rows (4 slots: evictions too)."""
    model, tokenizer = build_student(teacher, cell_type="tova_attention", num_hidden_layers=1, num_slots=4,
                                     open_tokens=3)
    return model.eval(), tokenizer


@pytest.fixture(scope="module")
def deferring(teacher):
    """A student trained with tail_layers (its upper layer at word ends), its adapter away from the identity so that a
    stream showing the wrong embedding shows; 4 slots: edit scripts overflow the caches."""
    torch.manual_seed(0)
    model, tokenizer = build_student(teacher, cell_type="tova_attention", num_hidden_layers=2, num_slots=4,
                                     tail_layers=1)
    with torch.no_grad():
        model.cell.tail_adapter.weight.add_(torch.randn_like(model.cell.tail_adapter.weight) * 0.05)
    return model.eval(), tokenizer


@pytest.fixture(scope="module")
def open_upper(teacher):
    """A deferring student whose upper layer keeps 3 tokens open (`tail_open_tokens`): a word's end commits blocks of
    3 there, inside words and across them; 128 slots, as its parallel form (the expected values) holds no more."""
    torch.manual_seed(0)
    model, tokenizer = build_student(teacher, cell_type="tova_attention", num_hidden_layers=2, num_slots=128,
                                     tail_layers=1, tail_open_tokens=3)
    with torch.no_grad():
        model.cell.tail_adapter.weight.add_(torch.randn_like(model.cell.tail_adapter.weight) * 0.05)
    return model.eval(), tokenizer


def deferred_scratch(model, tokenizer, text):
    """What a deferring stream shows for `text`, from scratch: the full embedding where the text after its last
    whitespace has no token, else forward's `tail_hidden_state` at the last token."""
    ids = tokenizer(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
    if ids.shape[1] == 0:
        return torch.zeros(model.config.output_size)
    with torch.no_grad():
        out = model(ids, use_cache=False, word_starts=(~continuation_table(tokenizer)[ids]).long())
    last = max((i for i, char in enumerate(text) if is_boundary(char)), default=-1)
    if not tokenizer(text[last + 1:], add_special_tokens=False)["input_ids"]:
        return out.pooler_output[0]
    return out.tail_hidden_state[0, -1]


def scratch(model, tokenizer, text):
    ids = tokenizer(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
    if ids.shape[1] == 0:
        return torch.zeros(model.config.output_size)
    with torch.no_grad():
        return model(ids, use_cache=False).pooler_output[0]


edit = st.one_of(st.tuples(st.just("type"), st.text(alphabet=ALPHABET, min_size=1, max_size=6)),
                 st.tuples(st.just("delete"), st.integers(min_value=1, max_value=5)))


# max_checkpoints=2: deletes that go back further than the kept checkpoints re-encode, still exactly.
@pytest.mark.parametrize("max_checkpoints", [None, 2])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(script=st.lists(edit, min_size=1, max_size=12))
def test_any_edit_script_equals_scratch(student, max_checkpoints, script):
    run_script(*student, StreamingEncoder(*student, max_checkpoints=max_checkpoints), script)


@pytest.mark.parametrize("max_checkpoints", [None, 2])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(script=st.lists(edit, min_size=1, max_size=12))
def test_inherited_edit_scripts_equal_scratch(inherited, max_checkpoints, script):
    run_script(*inherited, StreamingEncoder(*inherited, max_checkpoints=max_checkpoints), script)


@pytest.mark.parametrize("max_checkpoints", [None, 2])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(script=st.lists(edit, min_size=1, max_size=12))
def test_open_token_edit_scripts_equal_scratch(open_block, max_checkpoints, script):
    run_script(*open_block, StreamingEncoder(*open_block, max_checkpoints=max_checkpoints), script)


@pytest.mark.parametrize("max_checkpoints", [None, 2])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(script=st.lists(edit, min_size=1, max_size=12))
def test_deferring_edit_scripts_show_the_second_embedding_inside_a_word_and_the_full_one_after(
        deferring, max_checkpoints, script):
    model, tokenizer = deferring
    enc = StreamingEncoder(model, tokenizer, max_checkpoints=max_checkpoints)
    run_script(model, tokenizer, enc, script, expect=deferred_scratch)
    assert (enc.full_embedding - scratch(model, tokenizer, enc.text)).abs().max() <= 1e-5


def test_deferring_is_the_default_of_a_tail_student_and_can_be_turned_off(deferring, inherited):
    model, tokenizer = deferring
    text = "search as you ty"
    deferred, full = StreamingEncoder(model, tokenizer), StreamingEncoder(model, tokenizer, defer_words=False)
    deferred.type(text)
    full.type(text)
    assert (deferred.embedding - deferred_scratch(model, tokenizer, text)).abs().max() <= 1e-5
    assert (full.embedding - scratch(model, tokenizer, text)).abs().max() <= 1e-5
    assert (deferred.embedding - full.embedding).abs().max() > 1e-3  # mid-word they differ: the test can fail
    assert (deferred.full_embedding - full.embedding).abs().max() <= 1e-5
    assert deferred.text == text  # a pause's full embedding leaves the stream as it was
    deferred.type("pe ")
    full.type("pe ")
    assert (deferred.embedding - full.embedding).abs().max() <= 1e-5  # after a word and a space: the full one
    with pytest.raises(ValueError, match="tail_layers"):
        StreamingEncoder(*inherited, defer_words=True)


def held_scratch(model, tokenizer, text):
    """What a stream with `idle_commits` shows for `text` while its last word waits for `idle()`: forward's
    `tail_hidden_state` at the last token, that word's tokens through the lower layers only."""
    ids = tokenizer(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        return model(ids, use_cache=False, word_starts=(~continuation_table(tokenizer)[ids]).long()
                     ).tail_hidden_state[0, -1]


idle_edit = st.one_of(edit, st.just(("idle", None)))


# The open-upper student once (its stream runs in PyTorch, ~30 s here): these scripts also commit eagerly, at spaces
# inside one `type` call, and re-encode past the two kept checkpoints.
@pytest.mark.parametrize("which, max_checkpoints", [("deferring", None), ("deferring", 2), ("open_upper", 2)])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(script=st.lists(idle_edit, min_size=1, max_size=14))
def test_idle_commits_show_the_held_word_until_idle_and_the_full_embedding_after(request, which, max_checkpoints,
                                                                                 script):
    """With idle_commits a space leaves its word to idle(): after any edit the stream shows what a deferring stream
    shows, or, where nothing but whitespace (or characters without a token) follows the last word, that word still held;
    after idle() exactly what a deferring stream shows, the full embedding after a word and a space."""
    model, tokenizer = request.getfixturevalue(which)
    enc, text = StreamingEncoder(model, tokenizer, max_checkpoints=max_checkpoints, idle_commits=True), ""
    for op, arg in script:
        if op == "idle":
            emb = enc.idle()
            assert (emb - enc.embedding).abs().max() == 0
        elif op == "type":
            enc.type(arg)
            text += arg
        else:
            n = min(arg, len(text))
            enc.delete(n)
            text = text[:len(text) - n]
        assert enc.text == text
        expected = deferred_scratch(model, tokenizer, text)
        gap = (enc.embedding - expected).abs().max()
        if op != "idle" and gap > 1e-5:  # the one other state: the last word waiting for idle()
            tail = text[max((i for i, char in enumerate(text) if is_boundary(char)), default=-1) + 1:]
            assert not tokenizer(tail, add_special_tokens=False)["input_ids"], repr(text)
            gap = (enc.embedding - held_scratch(model, tokenizer, text)).abs().max()
        assert gap <= 1e-5, repr(text)
    assert (enc.full_embedding - scratch(model, tokenizer, text)).abs().max() <= 1e-5


def test_idle_commits_take_the_upper_layers_off_the_space(deferring, inherited, monkeypatch):
    """The space that ends a word runs no upper layer: the word waits, held, for idle() (or for the next word's first
    token, which runs it first); what the stream shows then equals the stream that committed at the space."""
    model, tokenizer = deferring
    commits = []
    real = type(model).commit_word
    monkeypatch.setattr(type(model), "commit_word", lambda self, state: commits.append(1) or real(self, state))
    eager, idle = StreamingEncoder(model, tokenizer), StreamingEncoder(model, tokenizer, idle_commits=True)
    for enc in (eager, idle):
        enc.type("search as you")
    commits.clear()
    idle.type(" ")
    assert not commits  # the space stepped nothing
    assert (idle.embedding - held_scratch(model, tokenizer, "search as you ")).abs().max() <= 1e-5
    eager.type(" ")
    assert commits  # the eager stream ran the word's upper layers at the space
    assert (idle.embedding - eager.embedding).abs().max() > 1e-3  # they differ until idle(): the test can fail
    commits.clear()
    assert (idle.idle() - eager.embedding).abs().max() <= 1e-5
    assert len(commits) == 1
    assert idle.idle() is not None and len(commits) == 1  # nothing left to run: a second idle() runs nothing
    # A next word typed before idle() runs the held word first, once, however its first token re-tokenises.
    for enc in (eager, idle):
        enc.type("type ")
    commits.clear()
    for chars in ("u", "n", "b", "e", "l", "i", "e", "v"):
        for enc in (eager, idle):
            enc.type(chars)
        assert (idle.embedding - eager.embedding).abs().max() <= 1e-5
    assert len(commits) == 1  # the idle stream's held "type", once (the eager one ran it at its space)
    with pytest.raises(ValueError, match="idle_commits"):
        StreamingEncoder(*inherited, idle_commits=True)
    with pytest.raises(ValueError, match="idle_commits"):
        StreamingEncoder(model, tokenizer, defer_words=False, idle_commits=True)


def run_script(model, tokenizer, enc: StreamingEncoder, script, expect=scratch) -> None:
    """Apply `script` to `enc`, checking its text and embedding against the model from scratch (`expect`) after each
    edit."""
    apply_edits(enc, script, lambda text: expect(model, tokenizer, text), atol=1e-5)


def batched_edits(model, tokenizer, expect=scratch) -> BatchStreamingEncoder:
    """Three streams edited together, each checked against the model from scratch (`expect`)."""
    batch = BatchStreamingEncoder(model, tokenizer)
    ids = batch.open(3)
    batch.type({ids[0]: "hello wor", ids[1]: "streams of", ids[2]: "x"})
    batch.type({ids[0]: "ld", ids[2]: "yz abc, d"})
    batch.delete({ids[1]: 3})
    for i, text in zip(ids, ["hello world", "streams", "xyz abc, d"]):
        assert batch.text(i) == text
        assert (batch.embedding(i) - expect(model, tokenizer, text)).abs().max() <= 1e-5
        assert batch.nbytes(i) > 0
    return batch


@pytest.mark.parametrize("which", ["deferring", "open_upper"])
def test_deferring_batched_streams_match_single_streams(request, which):
    batched_edits(*request.getfixturevalue(which), expect=deferred_scratch)


@pytest.mark.parametrize("max_checkpoints", [None, 2])
def test_open_upper_streams_can_run_every_layer_at_every_keystroke(open_upper, max_checkpoints):
    """`defer_words=False` steps a `tail_open_tokens` student through every layer at every keystroke, each token a
    word of its own: after every edit the full embedding of the text so far, as a pass gives it. Deletes pop back to
    checkpoints kept as rows (a step writes a row in the lower layer and a block or nothing in the upper one), which
    a stream whose state was let go rebuilds."""
    script = [("type", "search as you ty"), ("type", "pe fast"), ("delete", 6), ("type", "unbelievably fast and "),
              ("delete", 15), ("type", "ly slow words"), ("delete", 30), ("type", "antidisestablishment")]
    apply_edits(StreamingEncoder(*open_upper, defer_words=False, max_checkpoints=max_checkpoints), script,
                lambda text: scratch(*open_upper, text), atol=1e-5)


def test_batch_streams_match_single_streams(student):
    batch = batched_edits(*student)
    ids = list(batch.streams)
    batch.close(ids[1])
    with pytest.raises(KeyError, match="No open stream"):
        batch.embedding(ids[1])


def test_delete_is_a_pop_not_a_reencode(student):
    model, tokenizer = student
    enc = StreamingEncoder(model, tokenizer)
    enc.type("one two three four")
    calls = []
    original = model.step
    model.step = lambda *a, **k: calls.append(1) or original(*a, **k)
    try:
        enc.delete(5)  # back to "one two three": the checkpoint after "three" is popped, nothing re-run
        assert calls == [] and enc.text == "one two three"
    finally:
        model.step = original
    assert (enc.embedding - scratch(model, tokenizer, "one two three")).abs().max() <= 1e-5


def test_bad_input(student):
    model, tokenizer = student
    enc = StreamingEncoder(model, tokenizer)
    with pytest.raises(ValueError, match="Cannot delete 1 characters from stream 0: it holds 0"):
        enc.delete(1)
    with pytest.raises(TypeError, match="takes str"):
        enc.type(b"bytes")
    # Emoji, combining and control characters: documented results, never NaN.
    for text in ["😀", "e\u0301", "\x00\x01", "   "]:
        enc.reset()
        emb = enc.type(text)
        assert torch.isfinite(emb).all()
        assert (emb - scratch(model, tokenizer, text)).abs().max() <= 1e-5
    enc.reset()
    if model.config.granularity == "token":  # the normaliser drops control characters: no token, zeros
        assert torch.equal(enc.type("\x01 \x02"), torch.zeros(model.config.output_size))
    else:  # a byte student reads every byte
        assert (enc.type("\x01 \x02") - scratch(model, tokenizer, "\x01 \x02")).abs().max() <= 1e-5


def test_a_long_line_streams_in_bounded_steps(student):
    model, tokenizer = student
    enc = StreamingEncoder(model, tokenizer)
    words = 20_000 if model.config.granularity == "token" else 2_000  # a byte student steps every byte
    enc.type("word " * words)  # 100 kB (10 kB) typed in one call
    calls = []
    original = model.step
    model.step = lambda *a, **k: calls.append(1) or original(*a, **k)
    try:
        enc.type("x")
    finally:
        model.step = original
    assert len(calls) == 1  # one step for one keystroke, whatever the text length
    assert enc.state.seen_tokens.item() == (words if model.config.granularity == "token" else 5 * words) + 1


def test_keystroke_embeddings(student):
    model, tokenizer = student
    emb = keystroke_embeddings(model, tokenizer, "hi there")
    assert emb.shape == (8, model.config.output_size)
    assert (emb[-1] - scratch(model, tokenizer, "hi there")).abs().max() <= 1e-5


def test_nbytes_counts_the_state_and_its_checkpoints(student):
    model, tokenizer = student
    batch = BatchStreamingEncoder(model, tokenizer)
    (i,) = batch.open(1)
    one = model.init_state(1).nbytes()
    assert batch.nbytes(i) == one  # the shared empty state
    batch.type({i: "one two three"})
    grown = batch.nbytes(i)
    assert grown >= 3 * one  # a checkpoint per word (per character for bytes) so that deletes are pops
    batch.delete({i: len("two three")})
    assert one <= batch.nbytes(i) < grown


def test_max_checkpoints_bounds_what_a_stream_holds(student):
    model, tokenizer = student
    batch = BatchStreamingEncoder(model, tokenizer, max_checkpoints=3)
    (i,) = batch.open(1)
    batch.type({i: "one two three four five six "})
    held = batch.nbytes(i)
    batch.type({i: "seven eight nine ten eleven twelve "})
    assert batch.nbytes(i) == held  # flat in the text typed, unlike the unbounded default
    calls = []
    original = model.step
    model.step = lambda *a, **k: calls.append(1) or original(*a, **k)
    try:
        # Checkpoints are word boundaries for tokens, characters for bytes.
        first = len("twelve ") if model.config.granularity == "token" else 2
        batch.delete({i: first})  # within the kept checkpoints: a pop
        assert calls == []
        batch.delete({i: len("seven eight nine ten eleven twelve ") - first})  # past them: re-encoded once
        assert calls
    finally:
        model.step = original
    text = "one two three four five six "
    assert batch.text(i) == text
    assert (batch.embedding(i) - scratch(model, tokenizer, text)).abs().max() <= 1e-5
    with pytest.raises(ValueError, match="max_checkpoints must be at least 1"):
        BatchStreamingEncoder(model, tokenizer, max_checkpoints=0)


@pytest.mark.parametrize("open_tokens", [1, 3])  # 3: a step commits a block of three rows per layer, or none
def test_inherited_checkpoints_hold_rows_not_caches(teacher, open_tokens):
    model, tokenizer = build_student(teacher, cell_type="tova_attention", num_hidden_layers=2, num_slots=64,
                                     open_tokens=open_tokens)
    model.eval()
    batch = BatchStreamingEncoder(model, tokenizer)
    (i,) = batch.open(1)
    text = " ".join(f"word{k}" for k in range(12)) + " and more"
    batch.type({i: text})
    tokens = int(batch.state(i).seen_tokens)
    whole = model.init_state(1).nbytes()
    rows = 2 * model.config.num_hidden_layers * model.config.hidden_size * 4  # one key and value row per layer
    # Whole states for the current word and its base only; one checkpoint per token, each of a few rows.
    assert tokens > 24 and batch.nbytes(i) <= 4 * whole + tokens * (rows + 8 * 1024)
    assert batch.nbytes(i) < tokens * whole / 4
    # Deletes pop back across words to checkpoints that hold rows; typing on rebuilds their caches exactly.
    batch.delete({i: len(text) - len("word0 word1 wo")})
    batch.type({i: "rd2 after the pop"})
    final = "word0 word1 word2 after the pop"
    assert (batch.embedding(i) - scratch(model, tokenizer, final)).abs().max() <= 1e-5
    ids = tokenizer(final, add_special_tokens=False, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        whole_state = model(ids, use_cache=True).past_state
    for ours, theirs in zip(batch.state(i).cell_state, whole_state.cell_state):  # every cache row, every fill
        assert ours.shape == theirs.shape and (ours - theirs).abs().max() <= 1e-5



# int8: the fused step's records on a live cache (without a C compiler, int8's PyTorch path: bounded all the same)
@pytest.mark.parametrize("int8", [False, True])
def test_bounded_checkpoints_never_hold_more_than_the_unbounded_log(teacher, int8):
    """At 32 slots a whole state outweighs ~20 tokens' rows: `max_checkpoints` keeps the rows behind its oldest
    checkpoint until they outweigh it, so a bounded stream holds no more than an unbounded one after any word, and
    stays flat once it has made that checkpoint whole."""
    torch.manual_seed(0)
    model, tokenizer = build_student(teacher, cell_type="tova_attention", num_hidden_layers=1, num_slots=32)
    model = quantize_int8(model.eval()) if int8 else model.eval()
    bounded, unbounded = BatchStreamingEncoder(model, tokenizer, max_checkpoints=2), BatchStreamingEncoder(model,
                                                                                                         tokenizer)
    (b,), (u,) = bounded.open(1), unbounded.open(1)
    whole, held, text = model.init_state(1).nbytes(), [], ""
    for k in range(60):
        word = f"w{k} "
        bounded.type({b: word})
        unbounded.type({u: word})
        text += word
        held.append(bounded.nbytes(b))
        assert held[-1] <= unbounded.nbytes(u), k
    assert held[5] < 2 * whole  # early on, rows only: no root made yet (the old rule made one at the first cap)
    assert max(held[20:]) <= 4 * whole < unbounded.nbytes(u) / 2  # a root, the rows behind and after it, two words

    def fresh(text):  # the same steps from the empty state (for int8 the fused step's own arithmetic)
        encoder = BatchStreamingEncoder(model, tokenizer)
        (i,) = encoder.open(1)
        return encoder.type({i: text})[i]

    assert torch.equal(bounded.embedding(b), unbounded.embedding(u))
    assert (bounded.embedding(b) - fresh(text)).abs().max() <= 1e-5
    bounded.delete({b: len("w58 w59 ")})  # within the kept checkpoints: a pop, then on
    bounded.type({b: "w60"})
    assert (bounded.embedding(b) - fresh(text[:-len("w58 w59 ")] + "w60")).abs().max() <= 1e-5


def test_inherited_batched_streams_match_single_streams(inherited, monkeypatch):
    model, tokenizer = inherited
    rebuilt = []  # tokens seen by each checkpoint rebuilt from rows
    materialize = _SlotCheckpoint.materialize
    monkeypatch.setattr(_SlotCheckpoint, "materialize",
                        lambda self: (self.full is None and rebuilt.append(int(self.seen_tokens))) or materialize(self))
    batch = BatchStreamingEncoder(model, tokenizer)
    ids = batch.open(2)
    batch.type({ids[0]: "zero one two three four five six", ids[1]: "a second stream of words"})
    batch.delete({ids[0]: 6, ids[1]: 12})  # pops across words; the batched step below rebuilds both bases
    batch.type({ids[0]: "ve six seven", ids[1]: "eam its own"})
    for i, text in zip(ids, ["zero one two three four five six seven", "a second stream its own"]):
        assert batch.text(i) == text
        assert (batch.embedding(i) - scratch(model, tokenizer, text)).abs().max() <= 1e-5
    assert max(rebuilt) > model.config.num_slots  # one of them from a chain of rows that evictions wrote


def test_inherited_max_checkpoints_bounds_the_rows_too(inherited):
    model, tokenizer = inherited
    batch = BatchStreamingEncoder(model, tokenizer, max_checkpoints=3)
    (i,) = batch.open(1)
    batch.type({i: "one two three four five six "})
    held = batch.nbytes(i)
    batch.type({i: "seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen "})
    # The oldest kept word starts from a whole state; what came before it is let go, rows included.
    assert batch.nbytes(i) <= 1.25 * held
    assert batch.nbytes(i) <= 4 * model.init_state(1).nbytes()
    batch.type({i: "and on"})
    text = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen " \
           "seventeen and on"
    assert (batch.embedding(i) - scratch(model, tokenizer, text)).abs().max() <= 1e-5
    batch.delete({i: len("sixteen seventeen and on")})  # within the kept checkpoints: popped, then typed on
    batch.type({i: "again"})
    assert (batch.embedding(i) - scratch(model, tokenizer, text[:-len("sixteen seventeen and on")] + "again")
            ).abs().max() <= 1e-5
