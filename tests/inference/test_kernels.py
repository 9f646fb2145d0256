"""The fused int8 keystroke: it follows the fp32 model step by step, the streaming encoders use it for
single streams (edits included), and without a compiler everything falls back to PyTorch."""

import pytest
import torch

from tf2rnn_hf import TF2RNNConfig, TF2RNNModel
from tf2rnn_hf.distill import build_student
from tf2rnn_hf.evaluation.suites import student_encoder
from tf2rnn_hf.inference import kernels
from tf2rnn_hf.inference.kernels import Int8GRUStep, load_library
from tf2rnn_hf.inference.kernels.naive import int8_gru_step
from tf2rnn_hf.inference.quantization import quantize_int8
from tf2rnn_hf.inference.streaming import StreamingEncoder

pytestmark = pytest.mark.skipif(load_library() is None, reason="no C compiler to build the kernel")


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


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="one-layer GRU"):
        Int8GRUStep(_student(32, True, layers=2))
    with pytest.raises(ValueError, match="one-layer GRU"):
        Int8GRUStep(_student(32, True, cell="lstm"))
    model = _student(32, True)
    with pytest.raises(IndexError, match="outside the vocabulary"):
        Int8GRUStep(model)(300, model.init_state(1))
    assert quantize_int8(_student(32, True, cell="lstm")).step_kernel is None  # no kernel: PyTorch's int8 path


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
