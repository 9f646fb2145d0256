"""Int8 weights: the fidelity cost is small, the streaming path still follows the model, the fp32 model
is left untouched."""

import pytest
import torch
from torch import nn

from tf2rnn_hf.distill import build_student
from tf2rnn_hf.evaluation.suites import student_encoder
from tf2rnn_hf.inference.quantization import is_quantized, quantize_int8
from tf2rnn_hf.inference.streaming import keystroke_embeddings

TEXTS = ["search as you type", "a recurrent encoder follows the teacher's prefix trajectory",
         "the quick brown fox jumps over the lazy dog", "int8 weights are four times smaller"]


@pytest.fixture(scope="module")
def pair(teacher):
    torch.manual_seed(0)
    model, tokenizer = build_student(teacher, cell_type="gru", hidden_size=128,
                                                token_init="input_embeddings")
    return model.eval(), quantize_int8(model), tokenizer


def test_weights_are_int8_and_the_original_is_kept(pair):
    model, quantized, _ = pair
    assert is_quantized(quantized) and not is_quantized(model)
    assert isinstance(model.cell.layers[0], nn.GRU) and not isinstance(quantized.cell.layers[0], nn.GRU)
    assert isinstance(model.readout, nn.Linear) and type(quantized.readout) is not nn.Linear
    assert quantized.embeddings.weight.dtype == torch.float32  # a lookup, not a matmul: left in fp32


def test_int8_embeddings_stay_close_to_fp32(pair):
    model, quantized, tokenizer = pair
    a, b = student_encoder(model, tokenizer)(TEXTS), student_encoder(quantized, tokenizer)(TEXTS)
    assert torch.nn.functional.cosine_similarity(a, b).min() >= 0.99


def test_int8_stream_follows_the_int8_model(pair):
    _, quantized, tokenizer = pair
    for text in TEXTS:
        streamed = keystroke_embeddings(quantized, tokenizer, text)[-1]
        scratch = student_encoder(quantized, tokenizer)([text])[0]
        # Activations are quantized per call, so a stream and a whole-text run differ by quantization noise.
        assert torch.dot(streamed, scratch) >= 0.995
