"""The fused int8 keystrokes (one-layer GRU, tova_attention): each computes its int8 arithmetic written in
PyTorch, follows the fp32 model step by step, the streaming encoders use it for single streams (edits
included), two threads compute what one does (forked processes included), and without a compiler everything falls
back to PyTorch."""

import multiprocessing
import time
from typing import List, Optional

import pytest
import torch
from conftest import apply_edits

from tf2rnn_hf import TF2RNNConfig, TF2RNNModel
from tf2rnn_hf.distill import build_student
from tf2rnn_hf.distill.quantization_aware import round_weight
from tf2rnn_hf.evaluation.suites import student_encoder
from tf2rnn_hf.inference import kernels
from tf2rnn_hf.inference.kernels import (
    Int8GRUStep,
    Int8TOVAStep,
    find_compiler,
    load_library,
    pack_int4,
    quantize_rows4,
)
from tf2rnn_hf.inference.kernels.naive import (
    int8_gru_step,
    int8_tova_commit,
    int8_tova_step,
    int8_tova_step_deferred,
)
from tf2rnn_hf.inference.quantization import quantize_int8
from tf2rnn_hf.inference.streaming import StreamingEncoder

# Skipped only where no compiler exists: with one, a kernel that fails to build fails these tests.
pytestmark = pytest.mark.skipif(find_compiler() is None, reason="no C compiler to build the kernel")


def _student(hidden: int, residual: bool, layers: int = 1, cell: str = "gru") -> TF2RNNModel:
    torch.manual_seed(hidden)
    config = TF2RNNConfig(vocab_size=300, embedding_size=48, output_size=48, hidden_size=hidden, cell_type=cell,
                          num_hidden_layers=layers, residual_token_mean=residual)
    model = TF2RNNModel(config).eval()
    with torch.no_grad():  # trained-looking scales: the default init leaves the cell nearly idle
        for p in model.parameters():
            p.normal_(0, 0.15)
    return model


# 128 exercises the vectorised dot products, 100 (not a multiple of 64) their scalar tails.
@pytest.mark.parametrize("hidden,residual", [(128, True), (100, True), (128, False)])
@torch.no_grad()
def test_fused_step_is_the_int8_arithmetic_and_follows_the_fp32_model(hidden, residual):
    model = _student(hidden, residual)
    step = Int8GRUStep(model)
    ours, theirs = model.init_state(1), model.init_state(1)
    for token in torch.randint(0, 300, (40,)).tolist():
        expected, h_expected = int8_gru_step(model, token, ours)
        e_ours, new = step(token, ours)
        assert (e_ours - expected).abs().max() <= 1e-4  # the kernel computes what it says
        assert (new.cell_state[0].reshape(-1) - h_expected).abs().max() <= 1e-4
        ours = new
        e_theirs, theirs = model.step(torch.tensor([token]), theirs)
        # int8 noise against fp32 (these random weights are harsher than trained ones)
        assert torch.nn.functional.cosine_similarity(e_ours, e_theirs).item() >= 0.995
    assert (ours.cell_state[0] - theirs.cell_state[0]).abs().max() <= 0.05  # noise, not drift
    assert torch.equal(ours.seen_tokens, theirs.seen_tokens)
    assert (ours.last_embedding.norm() - 1).abs() <= 1e-5


def test_streams_take_the_fused_step_and_stay_exact_under_edits(teacher, monkeypatch):
    model, tokenizer = build_student(teacher, hidden_size=64, token_init="input_embeddings")
    quantized = quantize_int8(model)
    assert isinstance(quantized.step_kernel, Int8GRUStep)
    calls = []
    real = quantized.step_kernel.__call__
    monkeypatch.setattr(Int8GRUStep, "__call__", lambda self, *a: calls.append(1) or real(*a))
    encoder = StreamingEncoder(quantized, tokenizer)
    encoder.type("search as you tyep")
    encoder.delete(2)
    emb = encoder.type("pe now")
    assert calls  # single-stream keystrokes ran in the kernel
    scratch = student_encoder(model, tokenizer)(["search as you type now"])[0]
    assert torch.dot(emb, scratch) >= 0.999  # fp32 from scratch vs the int8 stream after edits


def _tova(hidden: int, residual: bool, slots: int = 6, seed: int = 0, **overrides) -> TF2RNNModel:
    torch.manual_seed(seed)
    config = TF2RNNConfig(vocab_size=300, embedding_size=hidden, output_size=overrides.pop("output_size", 48),
                          hidden_size=hidden,
                          cell_type="tova_attention", num_hidden_layers=overrides.pop("num_hidden_layers", 2),
                          num_attention_heads=4,
                          intermediate_size=2 * hidden, num_slots=slots, max_position_embeddings=32,
                          residual_token_mean=residual, **overrides)
    if residual:
        config.output_size = hidden
    model = TF2RNNModel(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.15)
    return model


# 128 takes the vectorised dot products, 100 their scalar form; 40 tokens overflow the 6-slot caches
# (TOVA evicts) and the 32-entry position table (positions clamp). The third pools a position-weighted mean; the
# next two keep three open tokens (`tf2rnn_tova_open_step`: blocks enter the cache, and evict, three at a time); the
# last two keep them open in the upper layers only (`tail_open_tokens`: each token a word of its own, its end
# `tf2rnn_tova_commit_open`).
@pytest.mark.parametrize("hidden,residual,exponent,open_tokens,tail_open", [
    (128, False, None, 1, 1), (100, True, None, 1, 1), (128, False, 1.3, 1, 1), (128, False, 1.3, 3, 1),
    (100, True, None, 3, 1), (128, False, 1.3, 1, 3), (100, True, None, 1, 4)])
@torch.no_grad()
def test_tova_step_is_the_int8_arithmetic_and_follows_the_fp32_model(hidden, residual, exponent, open_tokens,
                                                                    tail_open):
    # 44 readout rows without the residual: gemv_rows' eight-row blocks, then a four-row one
    upper = {} if tail_open == 1 else {"num_hidden_layers": 3, "tail_layers": 1, "tail_open_tokens": tail_open}
    model = _tova(hidden, residual, pooling_position_exponent=exponent, open_tokens=open_tokens,
                  **({} if residual else {"output_size": 44}), **upper)
    if exponent is not None:
        model.cell.pooling_exponent.fill_(exponent)  # _tova draws every parameter at random
    _follows_the_int8_arithmetic_and_the_fp32_model(model, Int8TOVAStep(model), open_tokens)


def _follows_the_int8_arithmetic_and_the_fp32_model(model: TF2RNNModel, step: Int8TOVAStep, open_tokens: int) -> None:
    """40 random tokens through `step`: each keystroke `naive.py`'s arithmetic, near the fp32 model."""
    ours, theirs = model.init_state(1), model.init_state(1)
    exact = 0
    for token in torch.randint(0, 300, (40,)).tolist():
        before = [t.clone() for t in ours._tensors()]
        expected, state_expected = int8_tova_step(model, token, ours)
        e_ours, new = step(torch.tensor([token]), ours)
        assert all(torch.equal(a, b) for a, b in zip(before, ours._tensors()))  # earlier states stay valid
        # The kernel computes what it says. A value one float ulp from a rounding boundary can land one
        # int8 step apart in C and in PyTorch (~1e-3 downstream), so most steps must match exactly, and
        # all closely: a wrong position, slot or eviction is off by far more. Relative to each entry's largest value:
        # a `tail_open_tokens` state holds the open block's output sum weighted by (n + 1) ** 1.3 (~40 at n = 16).
        gaps = [(e_ours - expected).abs().max()] + [
            (a.float() - b.float()).abs().max() / b.float().abs().max().clamp(min=1) if a.numel() else 0
            for a, b in zip(new._tensors(), state_expected._tensors())]
        assert max(gaps) <= 2e-2
        exact += max(gaps) <= 1e-4
        ours = new
        e_theirs, theirs = model.step(torch.tensor([token]), theirs)
        assert torch.nn.functional.cosine_similarity(e_ours, e_theirs).item() >= 0.99  # int8 noise vs fp32
    assert exact >= 36
    assert torch.equal(ours.cell_state[-2], theirs.cell_state[-2])
    assert int(ours.cell_state[-2]) == 40 // open_tokens * open_tokens  # tokens committed to the cache
    assert (ours.last_embedding.norm() - 1).abs() <= 1e-5


# 40 tokens overflow the 6-slot caches; the second pools a position-weighted mean over the residual, the third defers
# two layers of three, the fourth too with int4 weights scaled per 128 columns (--weight_group 128), the fifth with
# only the two layers a keystroke runs on that grid (the word's layer kept off it, read as int8). The last three keep
# tokens open in the upper layers (`tail_open_tokens`): a word's end joins the open block, whose full blocks enter
# the caches (and evict) as they fill, whichever word fills them.
@pytest.mark.parametrize("hidden,residual,exponent,layers,tail,group,grid_layers,tail_open", [
    (128, False, None, 2, 1, None, None, 1), (100, True, 1.3, 2, 1, None, None, 1),
    (128, False, 1.3, 3, 2, None, None, 1), (256, False, 1.3, 3, 2, 128, None, 1),
    (256, False, 1.3, 3, 2, 128, [0, 1], 1), (128, False, 1.3, 3, 1, None, None, 3),
    (100, True, None, 2, 1, None, None, 4), (256, False, 1.3, 3, 2, 128, None, 2)])
@torch.no_grad()
def test_deferred_keystrokes_and_commits_are_the_int8_arithmetic_and_follow_the_fp32_model(hidden, residual, exponent,
                                                                                          layers, tail, group,
                                                                                          grid_layers, tail_open):
    model = _tova(hidden, residual, pooling_position_exponent=exponent, num_hidden_layers=layers, tail_layers=tail,
                  tail_open_tokens=tail_open, **({} if residual else {"output_size": 44}))
    if group:
        model = _on_int4_grid(model, grid_layers is None, group, grid_layers)
    if exponent is not None:
        model.cell.pooling_exponent.fill_(exponent)
    step = Int8TOVAStep(model)
    products = ("qkv", "out", "up", "down") + (("o",) if grid_layers is None else ())
    assert step.int4_groups == (products if group and step.lib.tf2rnn_int4_products() else ())
    ours, theirs, fp32 = model.init_state(1), model.init_state(1), model.init_state(1)
    # Blocks scaled per 128 columns add in fp32 in the kernel and in fp64 in naive.py, so an activation a hair from an
    # int8 rounding boundary lands one step apart now and then (1-4 keystrokes in 40 here, one scale a row 0-1), and
    # the cache carries it on: those students are held to naive.py from the kernel's own state at every step, most
    # steps exactly, as the causal steps are. So are `tail_open_tokens` students: a word's end reruns the open block
    # through the upper layers, more activations to round (one commit in 40 keystrokes here lands apart).
    same_state, exact = group is not None or tail_open > 1, 0
    g = torch.Generator().manual_seed(0)
    for t, token in enumerate(torch.randint(0, 300, (40,), generator=g).tolist()):
        begins = t == 0 or bool(torch.rand(1, generator=g) < 0.5)
        before = [x.clone() for x in ours._tensors()]
        e_ours, new = step.step_deferred(token, ours, begins)
        assert all(torch.equal(a, b) for a, b in zip(before, ours._tensors()))  # earlier states stay valid
        e_expected, expected = int8_tova_step_deferred(model, token, ours if same_state else theirs, begins)
        gap = max((e_ours - e_expected).abs().max(), (new.held_outputs - expected.held_outputs).abs().max())
        assert gap <= (2e-2 if same_state else 1e-4)
        exact += gap <= 1e-4
        e_fp32, fp32 = model.step_deferred(torch.tensor([token]), fp32, begins)
        assert torch.nn.functional.cosine_similarity(e_ours, e_fp32).item() >= 0.99  # int8 noise vs fp32
        ours, theirs = new, (new if same_state else expected)
    assert exact >= 36 and ours.held_tokens >= 1
    full, committed = step.commit_word(ours)
    full_expected, committed_expected = int8_tova_commit(model, theirs)
    assert (full - full_expected).abs().max() <= 1e-4
    assert all((a - b).abs().max() <= 1e-4 for a, b in zip(committed._tensors(), committed_expected._tensors())
               if a.numel())
    assert committed.held_tokens == 0 and int(committed.cell_state[-2]) == 40
    # The model dispatches a single row to the kernel it carries.
    model.step_kernel = step
    assert torch.equal(model.step_deferred(torch.tensor([5]), committed)[0], step.step_deferred(5, committed)[0])
    assert torch.equal(model.commit_word(ours)[0], full)


def test_deferring_streams_take_the_fused_steps_and_stay_close_under_edits(teacher, monkeypatch):
    model, tokenizer = build_student(teacher, cell_type="tova_attention", num_hidden_layers=3, num_slots=4,
                                     tail_layers=2)
    quantized = quantize_int8(model)
    calls = []
    for name in ("step_deferred_live", "commit_live"):
        real = getattr(Int8TOVAStep, name)
        monkeypatch.setattr(Int8TOVAStep, name, lambda self, *a, real=real, name=name: calls.append(name) or
                            real(self, *a))
    encoder = StreamingEncoder(quantized, tokenizer)
    encoder.type("search as you tyep")
    encoder.delete(2)
    encoder.type("pe, now ")
    assert {"step_deferred_live", "commit_live"} <= set(calls)  # keystrokes and word ends ran in the kernel
    scratch = student_encoder(model, tokenizer)(["search as you type, now"])[0]
    assert torch.dot(encoder.embedding, scratch) >= 0.995  # fp32 from scratch vs the int8 stream after edits


@pytest.mark.parametrize("defer_words", [True, False])
def test_streams_of_an_upper_open_student_take_the_fused_steps(teacher, monkeypatch, defer_words):
    """A `tail_open_tokens` student's streams step in the kernel (deferring: on the live cache; every layer at every
    keystroke: whole states, each token a word of its own) and keep the fp32 embedding after edits."""
    model, tokenizer = build_student(teacher, cell_type="tova_attention", num_hidden_layers=3, num_slots=6,
                                     tail_layers=1, tail_open_tokens=3)
    quantized = quantize_int8(model)
    calls = []
    for name in ("step_deferred_live", "commit_live", "__call__"):
        real = getattr(Int8TOVAStep, name)
        monkeypatch.setattr(Int8TOVAStep, name, lambda self, *a, real=real, name=name: calls.append(name) or
                            real(self, *a))
    encoder = StreamingEncoder(quantized, tokenizer, defer_words=defer_words)
    encoder.type("search as you tyep")
    encoder.delete(2)
    encoder.type("pe, now with a longer tail of words ")
    assert {"step_deferred_live", "commit_live"} <= set(calls) if defer_words else "__call__" in calls
    text = "search as you type, now with a longer tail of words "
    assert len(tokenizer(text)["input_ids"]) > 6  # the stream's caches evicted
    fresh = StreamingEncoder(quantized, tokenizer, defer_words=defer_words)
    fresh.type(text)
    assert torch.allclose(encoder.embedding, fresh.embedding, atol=1e-6)  # the edits undone exactly
    # fp32 from scratch vs the int8 stream: 0.9994 here, where upper layers run causally would give 0.992
    scratch = student_encoder(model, tokenizer)([text])[0]
    assert torch.dot(encoder.embedding, scratch) >= 0.998


def _on_int4_grid(model: TF2RNNModel, readout: bool = True, group: Optional[int] = None,
                  layers: Optional[List[int]] = None) -> TF2RNNModel:
    """Every linear weight of the layers (those in `layers`, default all; and of the readout, if `readout`) rounded to
    4 bits per row (per `group` columns); --weight_bits 4 saves a student so with its readout fp32 (since session 55),
    session 54's rounded it too."""
    with torch.no_grad():
        parts = [model.cell.layers[k] for k in layers] if layers is not None else [model.cell]
        for m in [m for part in parts for m in part.modules()] + ([model.readout] if readout else []):
            if isinstance(m, torch.nn.Linear):
                m.weight.copy_(round_weight(m.weight, 4, group))
    return model


# 128 wide: every product's columns pack in blocks of 128; 44 readout rows end in scalar rows after the eight-row
# blocks. Open tokens run the products over several tokens at once. 256 wide with a scale per 128 columns: two blocks
# a row (four in down), and with the first layer on one scale a row, that layer's products read as blocks too. The
# last two have one layer of two on the grid (--weight_keep cell.layers.N kept the other off it): that layer reads
# int4 and the other int8, in the same products.
@pytest.mark.parametrize("hidden,open_tokens,readout,group,rows_first,grid_layers", [
    (128, 1, True, None, False, None), (128, 3, True, None, False, None), (128, 1, False, None, False, None),
    (256, 1, True, 128, False, None), (256, 3, False, 128, False, None), (256, 1, True, 128, True, None),
    (128, 1, True, None, False, [1]), (256, 3, False, 128, False, [0])])
@torch.no_grad()
def test_int4_weights_take_the_int4_products_and_keep_the_arithmetic(hidden, open_tokens, readout, group, rows_first,
                                                                      grid_layers):
    """A student trained through int4 weights: where the CPU has AVX512-VNNI or AVX2 the kernel reads the products on
    the grid as int4 (half the bytes), the readout too where it is, with one scale a row or one per 128 columns, and
    still computes naive.py's arithmetic (which reads the same codes), near the fp32 model; elsewhere it reads them as
    int8. Weights off the grid (any trained in fp32, or a layer kept off it) stay int8."""
    model = _tova(hidden, False, pooling_position_exponent=1.0, open_tokens=open_tokens, output_size=44)
    model = _on_int4_grid(model, False, group, layers=grid_layers)
    if readout:
        model = _on_int4_grid(model, True, group, layers=[])
    if rows_first:
        model = _on_int4_grid(model, False, None, layers=[0])
    step = Int8TOVAStep(model)
    products = ("qkv", "out", "up", "down") + (("o",) if readout else ())
    int4 = step.lib.tf2rnn_int4_products()
    assert step.int4 == (products if int4 else ())
    assert step.int4_groups == (products if int4 and group else ())
    on_grid = tuple(grid_layers if grid_layers is not None else range(2)) if int4 else ()
    assert step.int4_layers == {name: on_grid for name in ("qkv", "out", "up", "down")}
    for name in ("qkv", "out", "up", "down"):  # each layer's weights held once, in the form it reads
        held = [len(step._keep[f"{form}_{name}"]) if f"{form}_{name}" in step._keep else 0 for form in ("w", "w4")]
        assert held == [2 - len(on_grid), len(on_grid)]
    assert Int8TOVAStep(_tova(128, False)).int4 == ()
    _follows_the_int8_arithmetic_and_the_fp32_model(model, step, open_tokens)


def test_int4_codes_are_the_grid_and_pack_as_the_kernel_reads_them():
    torch.manual_seed(0)
    weight = round_weight(torch.randn(6, 256), 4)
    codes, scale, rowsum = quantize_rows4(weight)
    assert torch.allclose(codes.float() * scale[:, None], weight, rtol=1e-6, atol=0)
    assert codes.abs().max() == 7 and torch.equal(rowsum, codes.sum(1, dtype=torch.int32))
    packed = pack_int4(codes)
    assert packed.shape == (6, 128) and packed.dtype == torch.uint8
    # byte b of a row's k-th 64: column 128k + b in the low nibble, 128k + 64 + b in the high one, each plus 8
    assert int(packed[2, 64 + 5]) == (int(codes[2, 128 + 5]) + 8) | (int(codes[2, 128 + 64 + 5]) + 8) << 4
    assert quantize_rows4(torch.randn(6, 256)) is None  # off the grid
    assert quantize_rows4(round_weight(torch.randn(6, 96), 4)) is None  # columns that do not pack by 128
    # A scale per 128 columns (--weight_group 128): one scale per block, [rows, blocks]; smaller groups stay off it.
    weight = round_weight(torch.randn(6, 384), 4, 128)
    codes, scale, rowsum = quantize_rows4(weight)
    assert scale.shape == (6, 3) and codes.abs().amax(1).eq(7).all()
    assert torch.allclose(codes.float() * scale.repeat_interleave(128, 1), weight, rtol=1e-6, atol=0)
    assert torch.equal(rowsum, codes.sum(1, dtype=torch.int32))
    assert quantize_rows4(round_weight(torch.randn(6, 384), 4, 64)) is None


@torch.no_grad()
@pytest.mark.parametrize("open_tokens", [1, 3])
def test_tova_step_live_is_the_whole_step_and_restore_undoes_it(open_tokens):
    # step_live writes into a cache the caller owns and one record: the cache after it, and the record's views,
    # are the state __call__ writes whole, bit for bit, through evictions (40 tokens, 6 slots); `restore` puts
    # the replaced rows back, so the cache is the parent's again.
    model = _tova(128, False, pooling_position_exponent=1.0, open_tokens=open_tokens)
    step = Int8TOVAStep(model)
    layers, slots = step.layers, model.config.num_slots
    state, count, held = model.init_state(1), 0, 0
    kv = torch.zeros(layers, 2, 1, slots, 128)
    pointers = step.cache_pointers(kv)
    for n, token in enumerate(torch.randint(0, 300, (40,)).tolist(), 1):
        emb, whole = step(token, state)
        small = [state.cell_state[i].contiguous() for i in step.small]
        width = step.rows_written(held)
        overwrites = count + width > slots
        before = kv.clone()
        record = step.step_live(token, pointers, [t.data_ptr() for t in small], state.token_sum.data_ptr(),
                                int(state.seen_tokens), width, overwrites)
        views, emb_live, token_sum, rows, written, replaced = step.record_views(record, width, overwrites)
        assert torch.equal(emb, emb_live) and token_sum is None  # this student has no residual token mean
        assert all(torch.equal(a, whole.cell_state[i]) for a, i in zip(views, step.small))
        for layer in range(layers):
            for kind in (0, 1):
                assert torch.equal(kv[layer, kind], whole.cell_state[3 * layer + kind])
        assert len(written) == layers and (replaced is not None) == (overwrites and width > 0)
        if replaced is not None:
            step.restore(kv, record, width)
            assert torch.equal(kv, before)
            step.step_live(token, pointers, [t.data_ptr() for t in small], state.token_sum.data_ptr(),
                           int(state.seen_tokens), width, overwrites)
        state, count, held = whole, count + width, (held + 1) % open_tokens
    assert n == 40 and int(state.cell_state[-2]) == count == 40 // open_tokens * open_tokens


# Single-stream keystrokes write rows into a live cache (`step_live`): one a layer, or a block of open tokens.
@pytest.mark.parametrize("open_tokens", [1, 3])
def test_inherited_streams_take_the_fused_step_and_stay_close_under_edits(teacher, monkeypatch, open_tokens):
    model, tokenizer = build_student(teacher, cell_type="tova_attention", num_hidden_layers=2, num_slots=8,
                                     open_tokens=open_tokens)
    quantized = quantize_int8(model)
    assert isinstance(quantized.step_kernel, Int8TOVAStep)
    calls = []
    real = Int8TOVAStep.step_live
    monkeypatch.setattr(Int8TOVAStep, "step_live", lambda self, *a, **k: calls.append(1) or real(self, *a, **k))
    prewakes = []
    wake = Int8TOVAStep.prewake
    monkeypatch.setattr(Int8TOVAStep, "prewake", lambda self: prewakes.append(1) or wake(self))
    encoder = StreamingEncoder(quantized, tokenizer)
    encoder.type("search as you tyep with a cache")
    encoder.delete(2)
    emb = encoder.type("pe now, past eight slots")
    assert calls  # single-stream keystrokes ran in the kernel
    assert len(prewakes) == 3  # each edit woke the kernel's helper as it started
    scratch = student_encoder(model, tokenizer)(["search as you tyep with a cacpe now, past eight slots"])[0]
    assert torch.dot(emb, scratch) >= 0.99  # fp32 from scratch vs the int8 stream after edits and evictions


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="tova_attention students"):
        Int8TOVAStep(_student(32, True))
    with pytest.raises(IndexError, match="outside the vocabulary"):
        Int8TOVAStep(_tova(32, False))(300, _tova(32, False).init_state(1))
    with pytest.raises(ValueError, match="one-layer GRU"):
        Int8GRUStep(_student(32, True, layers=2))
    with pytest.raises(ValueError, match="one-layer GRU"):
        Int8GRUStep(_student(32, True, cell="lstm"))
    model = _student(32, True)
    with pytest.raises(IndexError, match="outside the vocabulary"):
        Int8GRUStep(model)(300, model.init_state(1))
    assert quantize_int8(_student(32, True, cell="lstm")).step_kernel is None  # no kernel: PyTorch's int8 path
    deep = _tova(16, False, num_hidden_layers=33)  # the int4 masks hold one bit a layer in 32
    with pytest.raises(ValueError, match="up to 32 layers"):
        Int8TOVAStep(deep)
    assert quantize_int8(deep).step_kernel is None


def test_without_a_compiler_int8_falls_back_to_pytorch(tmp_path, monkeypatch):
    monkeypatch.setenv("TF2RNN_CACHE", str(tmp_path))
    monkeypatch.setenv("CC", "/bin/false")
    load_library.cache_clear()
    try:
        assert kernels.load_library() is None
        quantized = quantize_int8(_student(32, True))
        assert quantized.step_kernel is None
        state = quantized.init_state(1)
        emb, _ = quantized.step(torch.tensor([5]), state)  # the PyTorch int8 path still runs
        assert emb.shape == (1, 48)
    finally:
        load_library.cache_clear()


@torch.no_grad()
def test_bidirectional_pooling_is_not_silently_dropped_by_the_fused_step():
    """The fused TOVA step has no bidirectional pooling term: such a student keeps PyTorch's int8 step."""
    model = _tova(32, False, bidirectional_pooling=True)
    assert len(model.init_state(1).cell_state) == len(_tova(32, False).init_state(1).cell_state) + 3
    with pytest.raises(ValueError, match="no bidirectional pooling"):
        Int8TOVAStep(model)
    quantized = quantize_int8(model)
    assert quantized.step_kernel is None
    emb, _ = quantized.step(torch.tensor([5]), quantized.init_state(1))
    reference, _ = model.step(torch.tensor([5]), model.init_state(1))
    assert torch.nn.functional.cosine_similarity(emb, reference).item() >= 0.99


def _fused_from_scratch(quantized: TF2RNNModel, tokenizer, text: str) -> torch.Tensor:
    """The embedding of `text` typed token by token through the fused step alone, from an empty state."""
    state, emb = quantized.init_state(1), torch.zeros(1, quantized.config.output_size)
    for token in tokenizer(text, add_special_tokens=False)["input_ids"]:
        emb, state = quantized.step_kernel(token, state)
    return emb[0]


@pytest.mark.parametrize("open_tokens", [1, 3])  # 3: blocks of three rows enter (and leave) a cache of four slots
def test_live_cache_keystrokes_equal_the_int8_step_from_scratch(teacher, monkeypatch, open_tokens):
    """A single stream types on one cache of its own (`_LiveCache`): every keystroke writes its rows in place and
    deletes undo them, through evictions and pops across words, with and without max_checkpoints. After each edit
    the embedding is bit for bit the fused step run over the text from scratch, and no keystroke or pop built a
    whole state from rows."""
    from tf2rnn_hf.inference.streaming import _SlotCheckpoint

    model, tokenizer = build_student(teacher, cell_type="tova_attention", num_hidden_layers=2, num_slots=4,
                                     open_tokens=open_tokens)
    quantized = quantize_int8(model)
    built = []
    materialize = _SlotCheckpoint.materialize
    monkeypatch.setattr(_SlotCheckpoint, "materialize", lambda self: built.append(1) or materialize(self))

    script = [("type", "search as you tyep"), ("delete", 2), ("type", "pe with a cache"), ("delete", 9),
              ("type", " cache past four slots and"), ("delete", 1), ("delete", 12), ("type", "x"), ("delete", 3),
              ("type", "ots, then more words"), ("delete", 40), ("type", "again")]
    for max_checkpoints in (None, 2):
        apply_edits(StreamingEncoder(quantized, tokenizer, max_checkpoints=max_checkpoints), script,
                      lambda text: _fused_from_scratch(quantized, tokenizer, text))
        if max_checkpoints is None:
            assert not built  # every move of the live cache was in place


# 3: the upper layers keep three tokens open (`tail_open_tokens`): a word's end commits blocks of three rows into
# four slots, and a pop undoes each
@pytest.mark.parametrize("upper_open", [1, 3])
def test_deferring_live_keystrokes_equal_the_whole_state_steps_from_scratch(teacher, monkeypatch, upper_open):
    """A deferring stream types on its live cache: each keystroke writes the lower layers' rows in place, each finished
    word the upper layers', deletes undo both, through evictions and pops across words, with and without
    max_checkpoints. After each edit the embedding is bit for bit the fused whole-state steps run over the text from
    scratch (the second embedding inside a word, the full one after whitespace), and no keystroke or pop built a whole
    state from rows."""
    from tf2rnn_hf.inference.streaming import _SlotCheckpoint
    from tf2rnn_hf.utils import continuation_table

    model, tokenizer = build_student(teacher, cell_type="tova_attention", num_hidden_layers=3, num_slots=4,
                                     tail_layers=1, tail_open_tokens=upper_open)
    quantized = quantize_int8(model)
    step, continues = quantized.step_kernel, continuation_table(tokenizer)

    def from_scratch(text):
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        state = model.init_state(1)
        for token in ids:
            state = step.step_deferred(token, state, not continues[token])[1]
        tail = text[max((i for i, c in enumerate(text) if c.isspace()), default=-1) + 1:]
        if not tokenizer(tail, add_special_tokens=False)["input_ids"]:
            state = step.commit_word(state)[1]
        return state.last_embedding[0]

    built = []
    materialize = _SlotCheckpoint.materialize
    monkeypatch.setattr(_SlotCheckpoint, "materialize", lambda self: built.append(1) or materialize(self))
    script = [("type", "search as you tyep"), ("delete", 2), ("type", "pe with a cache"), ("delete", 9),
              ("type", " cache past four slots, and"), ("delete", 1), ("delete", 12), ("type", "x"), ("delete", 3),
              ("type", "ots, then more words "), ("delete", 40), ("type", "again unbelievably")]
    for max_checkpoints in (None, 2):
        encoder = apply_edits(StreamingEncoder(quantized, tokenizer, max_checkpoints=max_checkpoints), script,
                                from_scratch)
        text = encoder.text
        if max_checkpoints is None:
            assert not built  # every move of the live cache was in place
        assert encoder._batch.nbytes(encoder._id) > 0
        # A pause's full embedding rebuilds the state from rows once and leaves the stream as it was.
        full = encoder.full_embedding
        assert torch.dot(full, student_encoder(model, tokenizer)([text])[0]) >= 0.995
        assert torch.equal(encoder.embedding, from_scratch(text))


# 3: the upper layers keep three tokens open (`tail_open_tokens`): a word's end commits blocks of three rows into
# four slots, and a pop undoes each
@pytest.mark.parametrize("upper_open", [1, 3])
def test_idle_commits_on_the_live_cache_equal_the_whole_state_steps(teacher, monkeypatch, upper_open):
    """`idle_commits` on the live cache: a space writes nothing, idle() commits the held word in place, and a word
    typed before idle() commits it first; after every edit the embedding is bit for bit the fused whole-state steps
    from scratch (the word held where it waits), through evictions, pops across words and max_checkpoints, and no
    keystroke, idle() or pop built a whole state from rows."""
    from tf2rnn_hf.inference.streaming import _SlotCheckpoint
    from tf2rnn_hf.utils import continuation_table

    model, tokenizer = build_student(teacher, cell_type="tova_attention", num_hidden_layers=3, num_slots=4,
                                     tail_layers=1, tail_open_tokens=upper_open)
    quantized = quantize_int8(model)
    step, continues = quantized.step_kernel, continuation_table(tokenizer)

    def from_scratch(text, waiting):
        state = model.init_state(1)
        for token in tokenizer(text, add_special_tokens=False)["input_ids"]:
            state = step.step_deferred(token, state, not continues[token])[1]
        tail = text[max((i for i, c in enumerate(text) if c.isspace()), default=-1) + 1:]
        if not waiting and not tokenizer(tail, add_special_tokens=False)["input_ids"]:
            state = step.commit_word(state)[1]
        return state.last_embedding[0]

    built, commits = [], []
    materialize, commit_live = _SlotCheckpoint.materialize, Int8TOVAStep.commit_live
    monkeypatch.setattr(_SlotCheckpoint, "materialize", lambda self: built.append(1) or materialize(self))
    monkeypatch.setattr(Int8TOVAStep, "commit_live", lambda self, *a: commits.append(1) or commit_live(self, *a))
    # (edit, whether the last word then waits for idle()): a space ending a call leaves its word waiting
    script = [("type", "search as you "), True, ("idle",), False, ("type", "tyep"), False, ("delete", 2), False,
              ("type", "pe with a "), True, ("type", "cache past four "), True, ("delete", 1), False,
              ("type", " "), True, ("delete", 8), False, ("type", "slots "), True, ("idle",), False,
              ("delete", 3), False, ("type", "ts then more words "), True, ("delete", 40), False,
              ("type", "again unbelievably "), True, ("idle",), False]
    for max_checkpoints in (None, 2):
        encoder, text = StreamingEncoder(quantized, tokenizer, max_checkpoints=max_checkpoints, idle_commits=True), ""
        waited = False
        for edit, waiting in zip(script[::2], script[1::2]):
            commits.clear()
            if edit[0] == "idle":
                encoder.idle()
                assert len(commits) == 1  # the waiting word, in place
            elif edit[0] == "type":
                encoder.type(edit[1])
                text += edit[1]
                # the words its inner spaces end, at once, and the word that waited, before the first token
                assert len(commits) == edit[1].strip().count(" ") + (waited and bool(edit[1].strip()))
            else:
                encoder.delete(edit[1])
                text = text[:len(text) - edit[1]]
            assert encoder.text == text
            assert torch.equal(encoder.embedding, from_scratch(text, waiting)), repr(text)
            waited = waiting
        # A pause's full embedding with a word waiting: idle()'s commit in place, then the stream shows it too.
        encoder.type("more ")
        text += "more "
        commits.clear()
        assert torch.equal(encoder.full_embedding, from_scratch(text, False)) and len(commits) == 1
        assert torch.equal(encoder.embedding, from_scratch(text, False))
        if max_checkpoints is None:
            assert not built  # every move of the live cache was in place


def _keystrokes(step, model: TF2RNNModel, tokens, threads: int):
    """The embeddings [len(tokens), O] and the last state of typing `tokens` through `step` on `threads`."""
    torch.set_num_threads(threads)
    state, embeddings = model.init_state(1), []
    for token in tokens:
        emb, state = step(token, state)
        embeddings.append(emb)
    return torch.cat(embeddings), state


def _helped_keystrokes(step, model: TF2RNNModel, tokens):
    """`_keystrokes` on two threads, again until the helper thread has run some of the parts: while it sleeps the
    keystroke runs them itself, and a woken helper can take milliseconds to be scheduled (up to 10 s here)."""
    before, deadline = step.lib.tf2rnn_helper_tasks(), time.monotonic() + 10
    typed = _keystrokes(step, model, tokens, 2)
    while step.lib.tf2rnn_helper_tasks() == before and time.monotonic() < deadline:
        typed = _keystrokes(step, model, tokens, 2)
    assert step.lib.tf2rnn_helper_tasks() > before  # the helper ran part of the products
    return typed


# 100 and 128 wide: gemv_rows' scalar and vectorised rows; 44 readout rows split at 20, so that each thread's part
# ends in a four-row block after its eight-row ones (or in scalar rows); 40 tokens through 6 slots: evictions, and
# with open tokens blocks committing.
@torch.no_grad()
@pytest.mark.parametrize("hidden,open_tokens,int4", [(128, 1, False), (100, 1, False), (128, 3, False),
                                                     (100, 3, False), (128, 1, True), (128, 3, True), (256, 1, 128)])
def test_two_threads_give_the_one_thread_keystroke_bit_for_bit(hidden, open_tokens, int4):
    model = _tova(hidden, False, pooling_position_exponent=1.0, open_tokens=open_tokens, output_size=44)
    model = _on_int4_grid(model, group=int4 if int4 is not True else None) if int4 else model
    step, tokens, threads = Int8TOVAStep(model), torch.randint(0, 300, (40,)).tolist(), torch.get_num_threads()
    try:
        before = step.lib.tf2rnn_helper_tasks()
        one = _keystrokes(step, model, tokens, 1)
        assert step.lib.tf2rnn_helper_tasks() == before  # one thread: the helper is not asked
        two = _helped_keystrokes(step, model, tokens)
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(one[0], two[0])
    assert all(torch.equal(a, b) for a, b in zip(one[1]._tensors(), two[1]._tensors()))


# A sleeping helper can take milliseconds to be scheduled (~11 ms on a 2-core VM after a typist's idle gap), so a
# keystroke runs the helper's part itself while the helper sleeps. Held, the helper takes no task at all, as one never
# scheduled: the two-thread keystrokes still finish, bit for bit the one-thread ones, all run by the calling thread.
@torch.no_grad()
def test_keystrokes_do_not_wait_for_a_helper_that_is_not_running():
    model = _tova(128, False, pooling_position_exponent=1.0, output_size=44)
    step, tokens, threads = Int8TOVAStep(model), torch.randint(0, 300, (40,)).tolist(), torch.get_num_threads()
    try:
        one = _keystrokes(step, model, tokens, 1)
        step.lib.tf2rnn_pool_hold(1)
        before = step.lib.tf2rnn_helper_tasks()
        two = _keystrokes(step, model, tokens, 2)
        assert step.lib.tf2rnn_helper_tasks() == before  # the helper ran none of them
    finally:
        step.lib.tf2rnn_pool_hold(0)
        torch.set_num_threads(threads)
    assert torch.equal(one[0], two[0])
    assert all(torch.equal(a, b) for a, b in zip(one[1]._tensors(), two[1]._tensors()))


# The GRU's products split by rows too: 384 rows split at 192 (the 128-wide recurrent product vectorised, the 48-wide
# input product scalar), 300 at 148 (all scalar).
@torch.no_grad()
@pytest.mark.parametrize("hidden", [128, 100])
def test_gru_keystrokes_on_two_threads_are_the_one_thread_keystrokes(hidden):
    model = _student(hidden, True)
    step, tokens, threads = Int8GRUStep(model), torch.randint(0, 300, (40,)).tolist(), torch.get_num_threads()
    try:
        before = step.lib.tf2rnn_helper_tasks()
        one = _keystrokes(step, model, tokens, 1)
        assert step.lib.tf2rnn_helper_tasks() == before
        two = _helped_keystrokes(step, model, tokens)
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(one[0], two[0]) and torch.equal(one[1].cell_state[0], two[1].cell_state[0])


@torch.no_grad()
def test_prewoken_keystrokes_are_the_one_thread_keystrokes():
    # The streaming encoder wakes the helper as a keystroke's Python part starts (tf2rnn_pool_prewake): claimed at
    # once, claimed after the prewake's 1 ms spin ran out (the helper asleep again), or never claimed, every
    # keystroke still runs on two threads and gives the one-thread bits; on one thread a prewake does nothing.
    model = _tova(128, False, pooling_position_exponent=1.0)
    step, tokens, threads = Int8TOVAStep(model), torch.randint(0, 300, (30,)).tolist(), torch.get_num_threads()
    try:
        one = _keystrokes(step, model, tokens, 1)
        step.prewake()  # one thread: nothing to wake
        torch.set_num_threads(2)
        state, embeddings, tasks, waited = model.init_state(1), [], step.lib.tf2rnn_helper_tasks(), \
            step.lib.tf2rnn_helper_waited_ns()
        for k, token in enumerate(tokens):
            step.prewake()
            if k % 3 == 1:
                time.sleep(0.003)  # past the prewake's spin
            elif k % 3 == 2:
                step.prewake()  # a second prewake before the claim
            emb, state = step(token, state)
            embeddings.append(emb)
        step.prewake()  # unclaimed: the helper sleeps again after its spin
        time.sleep(0.003)
        assert step.lib.tf2rnn_helper_tasks() > tasks and step.lib.tf2rnn_helper_waited_ns() >= waited
        two = _keystrokes(step, model, tokens, 2)  # and later keystrokes still find it
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(one[0], torch.cat(embeddings)) and torch.equal(one[0], two[0])
    assert all(torch.equal(a, b) for a, b in zip(one[1]._tensors(), state._tensors()))


@torch.no_grad()
def test_a_forked_process_types_on_two_threads():
    # A process forked after the helper thread started has no helper: it must start its own, not wait forever on
    # the parent's (a server that loads the model, then forks its workers).
    model = _tova(128, False, open_tokens=3)
    step, tokens, threads = Int8TOVAStep(model), torch.randint(0, 300, (12,)).tolist(), torch.get_num_threads()
    try:
        expected = _keystrokes(step, model, tokens, 2)[0]
        context = multiprocessing.get_context("fork")
        results = context.Queue()
        child = context.Process(target=lambda: results.put(_keystrokes(step, model, tokens, 2)[0].tolist()))
        child.start()
        child.join(120)
        hung = child.is_alive()
        if hung:
            child.kill()
    finally:
        torch.set_num_threads(threads)
    assert not hung, "the forked child's keystroke never returned (waiting on the parent's helper thread)"
    assert child.exitcode == 0
    assert torch.equal(torch.tensor(results.get(timeout=10)), expected)


@torch.no_grad()
@pytest.mark.parametrize("threads", [1, 2])
def test_tova_step_live_many_is_each_stream_stepped_alone(threads):
    # Eleven causal streams (two chunks: 8 + 3) of different lengths, each on its own cache, stepped together in one
    # native call, 14 rounds through 6 slots (each stream evicts from its own round on): every record and cache is
    # what step_live gives that stream alone, bit for bit, and restore undoes each stream's step.
    model = _tova(128, True, pooling_position_exponent=1.0)
    step, layers, slots, n = Int8TOVAStep(model), 2, model.config.num_slots, 11
    caches = [[torch.zeros(layers, 2, 1, slots, 128) for _ in range(n)] for _ in range(2)]  # together, alone
    pointers = [[step.cache_pointers(kv) for kv in side] for side in caches]
    states = [model.init_state(1) for _ in range(n)]
    lead = torch.randint(0, 300, (n, 3)).tolist()
    threads_before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for j in range(n):  # stream j starts j % 4 tokens in, so the streams fill and evict at different rounds
            for token in lead[j][:j % 4]:
                small = [states[j].cell_state[i].contiguous() for i in step.small]
                for side in (0, 1):
                    step.step_live(token, pointers[side][j], [t.data_ptr() for t in small],
                                   states[j].token_sum.data_ptr(), int(states[j].seen_tokens), 1, False)
                states[j] = step(token, states[j])[1]
        evicting = set()
        for _ in range(14):
            tokens = torch.randint(0, 300, (n,)).tolist()
            smalls = [[states[j].cell_state[i].contiguous() for i in step.small] for j in range(n)]
            over = [int(states[j].cell_state[-2]) + 1 > slots for j in range(n)]
            evicting.add(tuple(over))
            before = [kv.clone() for kv in caches[0]]
            together = step.step_live_many(tokens, pointers[0], [[t.data_ptr() for t in sm] for sm in smalls],
                                           [states[j].token_sum.data_ptr() for j in range(n)],
                                           [int(states[j].seen_tokens) for j in range(n)], over)
            for j in range(n):
                alone = step.step_live(tokens[j], pointers[1][j], [t.data_ptr() for t in smalls[j]],
                                       states[j].token_sum.data_ptr(), int(states[j].seen_tokens), 1, over[j])
                assert bytes(together[j]) == bytes(alone) and torch.equal(caches[0][j], caches[1][j])
                emb, states[j] = step(tokens[j], states[j])
                assert torch.equal(step.record_views(together[j], 1, over[j])[1], emb)
                if over[j]:
                    step.restore(caches[0][j], together[j], 1)
                    assert torch.equal(caches[0][j], before[j])
                    caches[0][j].copy_(caches[1][j])
    finally:
        torch.set_num_threads(threads_before)
    assert any(any(o) and not all(o) for o in evicting)  # a round where some streams evicted and others did not
    with pytest.raises(ValueError, match="one entry per stream"):  # a short list would be a NULL cache in C
        step.step_live_many(tokens, pointers[0][:-1], smalls, [0] * n, [0] * n, over)
    with pytest.raises(ValueError, match="causal"):
        Int8TOVAStep(_tova(128, False, open_tokens=3)).step_live_many([1], [None], [[]], [0], [0], [False])


# A server's sessions typing together: an inherited student's caches are 0.4 MB each, so each stream steps its own
# live cache in the kernel rather than being gathered into one batched call.
@pytest.mark.parametrize("open_tokens", [1, 3])
def test_inherited_batched_streams_step_their_live_caches_in_the_kernel(teacher, monkeypatch, open_tokens):
    from tf2rnn_hf.inference.streaming import BatchStreamingEncoder

    model, tokenizer = build_student(teacher, cell_type="tova_attention", num_hidden_layers=2, num_slots=4,
                                     open_tokens=open_tokens)
    quantized = quantize_int8(model)
    monkeypatch.setattr(quantized, "step", lambda *a, **k: pytest.fail("a batched model call"))
    many, calls = quantized.step_kernel.step_live_many, []
    # a causal student's round of streams is one native call
    monkeypatch.setattr(quantized.step_kernel, "step_live_many", lambda *a: calls.append(len(a[0])) or many(*a))

    batch = BatchStreamingEncoder(quantized, tokenizer)
    ids = batch.open(3)
    texts = dict(zip(ids, ["search as you tyep", "a second stream of words past four slots", "x"]))
    batch.type(texts)
    deletes = dict(zip(ids, [2, 12, 1]))  # pops across words; the next round types on from them
    batch.delete(deletes)
    more = dict(zip(ids, ["pe together", " slots again", "third"]))
    batch.type(more)
    for i in ids:
        text = texts[i][:-deletes[i]] + more[i]
        assert batch.text(i) == text
        assert torch.equal(batch.embedding(i), _fused_from_scratch(quantized, tokenizer, text)), text
    assert (max(calls, default=0) == 3) == (open_tokens == 1)


def test_bulk_encoding_takes_the_fused_step_past_the_cache_and_int8_keeps_the_fp32_embedding(teacher, monkeypatch):
    """`encode_texts` of an int8 tova_attention student: the one text of a call past `num_slots` tokens runs through
    the fused step (bit for bit the stream of the same text), shorter ones, and several past the cache, through the
    batched int8 forward; all stay within 0.01 cosine of the fp32 model, where one weight scale per matrix
    (quantize_dynamic's default) lost ~0.04."""
    from tf2rnn_hf.inference.encode import encode_texts

    model, tokenizer = build_student(teacher, cell_type="tova_attention", num_hidden_layers=2, num_slots=8)
    quantized = quantize_int8(model)
    short = "search as you type"  # 4 tokens: the batched parallel form
    long = "a recurrent encoder updates per keystroke and reads every text whole, past its cache"  # 17 tokens
    ids = tokenizer(long, add_special_tokens=False)["input_ids"]
    calls, real = [], Int8TOVAStep.__call__
    monkeypatch.setattr(Int8TOVAStep, "__call__", lambda self, *a: calls.append(1) or real(self, *a))
    bulk = encode_texts(quantized, tokenizer, [long, short, ""])
    assert len(calls) == len(ids) > 8  # the long text alone, one call a token
    assert torch.equal(bulk[0], StreamingEncoder(quantized, tokenizer).type(long))
    assert torch.equal(bulk[2], torch.zeros(model.config.output_size))  # no token: the zero embedding
    fp32 = encode_texts(model, tokenizer, [long, short])
    assert (bulk[:2] * fp32).sum(-1).min() >= 0.99
    calls.clear()
    longer = long + ", and a second text as long"
    batched = encode_texts(quantized, tokenizer, [long, longer, short])
    assert not calls  # two past the cache: batched
    assert (batched * encode_texts(model, tokenizer, [long, longer, short])).sum(-1).min() >= 0.99
    assert (batched[0] * bulk[0]).sum() >= 0.99
    from transformers import AutoTokenizer

    from tf2rnn_hf.data.teacher import resolve_teacher_path

    padded = AutoTokenizer.from_pretrained(resolve_teacher_path())  # its backend pads every encoding to 128
    assert torch.equal(encode_texts(quantized, padded, [long])[0], bulk[0])
    assert padded.backend_tokenizer.padding is not None  # the caller's tokenizer is left as it was
    # max_length counts the special tokens, as the batched path's: 14 leaves 12 steps, still past the cache.
    state = quantized.init_state(1)
    for token in ids[:12]:
        emb, state = real(quantized.step_kernel, token, state)
    assert torch.equal(encode_texts(quantized, tokenizer, long, max_length=14), emb[0])
