"""Bad or unusual inputs to the inference path (encode, streams, int8): a finite correct answer or an error
of ours naming the argument; a failed call leaves a stream as it was."""

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from transformers import ByT5Tokenizer

from tf2rnn_hf.distill import build_student
from tf2rnn_hf.inference import BatchStreamingEncoder, StreamingEncoder, encode_texts, quantize_int8


@pytest.fixture(scope="module")
def student(teacher):
    torch.manual_seed(0)
    model, tokenizer = build_student(teacher, hidden_size=32, token_init="input_embeddings")
    return model.eval(), tokenizer


def test_long_text_streams_and_encodes_alike(student):
    """One policy everywhere: the student reads the whole text (no cut at 256 tokens)."""
    model, tok = student
    text = " ".join(["word"] * 200 + ["different ending entirely"] * 40)
    assert len(tok(text, add_special_tokens=False)["input_ids"]) > 300
    stream = StreamingEncoder(model, tok)
    stream.type(text)
    bulk = encode_texts(model, tok, [text])[0]
    whole = model(**tok([text], return_tensors="pt")).pooler_output[0]
    assert torch.allclose(stream.embedding, bulk, atol=1e-5) and torch.allclose(bulk, whole, atol=1e-5)


def test_a_bare_string_is_one_text(student):
    model, tok = student
    one = encode_texts(model, tok, "hello")
    assert one.shape == (model.config.output_size,)
    assert torch.allclose(one, encode_texts(model, tok, ["hello"])[0])
    with pytest.raises(TypeError, match="texts"):
        encode_texts(model, tok, ["hello", 3])


def test_a_tokenizer_of_another_vocabulary_is_refused(student):
    model, _ = student
    with pytest.raises(ValueError, match="tokenizer"):
        encode_texts(model, ByT5Tokenizer(), ["hello"])
    with pytest.raises(ValueError, match="tokenizer"):
        StreamingEncoder(model, ByT5Tokenizer())


@pytest.mark.parametrize("value", [0, 1.5, "4", -1, True])
def test_max_checkpoints_must_be_a_positive_int(student, value):
    model, tok = student
    with pytest.raises((ValueError, TypeError), match="max_checkpoints"):
        BatchStreamingEncoder(model, tok, max_checkpoints=value)


@pytest.mark.parametrize("n", [-2, 1.5, "3"])
def test_open_takes_a_positive_count(student, n):
    model, tok = student
    with pytest.raises((ValueError, TypeError), match="open"):
        BatchStreamingEncoder(model, tok).open(n)


def test_a_failed_type_leaves_the_stream_as_it_was(student):
    model, tok = student
    stream = StreamingEncoder(model, tok)
    stream.type("ab")
    before = stream.embedding
    with pytest.raises(ValueError, match="surrogate|UTF-8"):
        stream.type("c\ud800")
    assert stream.text == "ab" and torch.equal(stream.embedding, before)
    stream.type("c")  # the stream still works
    assert torch.allclose(stream.embedding, encode_texts(model, tok, ["abc"])[0], atol=1e-5)


class TestInt8:
    def test_save_is_refused_before_anything_is_written(self, student, tmp_path):
        model, _ = student
        quantized = quantize_int8(model)
        with pytest.raises(ValueError, match="int8"):
            quantized.save_pretrained(tmp_path / "q")
        assert not (tmp_path / "q").exists()

    def test_half_precision_is_refused_up_front(self, student):
        model, _ = student
        with pytest.raises(ValueError, match="float32"):
            quantize_int8(model.to(torch.bfloat16), inplace=False)
        model.float()

    def test_quantizing_twice_is_refused(self, student):
        model, _ = student
        with pytest.raises(ValueError, match="already"):
            quantize_int8(quantize_int8(model))

    def test_an_int8_model_cannot_be_trained(self, student):
        model, tok = student
        quantized = quantize_int8(model)
        out = quantized(**tok(["hello world"], return_tensors="pt")).pooler_output
        assert not out.requires_grad
        assert not any(p.requires_grad for p in quantized.parameters())
        assert any(p.requires_grad for p in model.parameters())  # the fp32 original is untouched


TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(st.one_of(TEXT, st.integers(-2, 6), st.just("\ud800"), st.just(None)), max_size=8))
def test_streams_stay_exact_or_refuse(student, edits):
    """Random edit scripts with bad edits mixed in: bad ones raise our errors and change nothing; the
    stream always equals the model run on its text from scratch, and is finite."""
    model, tok = student
    stream = StreamingEncoder(model, tok)
    for edit in edits:
        before = stream.text
        try:
            if isinstance(edit, int):
                stream.delete(edit)
            else:
                stream.type(edit)
        except (ValueError, TypeError) as err:
            assert stream.text == before
            assert any(w in str(err) for w in ("delete", "type", "UTF-8", "surrogate")), str(err)
    emb = stream.embedding
    assert torch.isfinite(emb).all()
    if stream.text.strip():
        scratch = encode_texts(model, tok, [stream.text])[0]
        assert torch.allclose(emb, scratch, atol=1e-5) or float(scratch.norm()) == 0


@pytest.mark.parametrize("max_checkpoints", [None, 2])
def test_a_call_that_fails_midway_is_undone(student, monkeypatch, max_checkpoints):
    """A failure after some words were stepped (here: the model raises on the 3rd step) leaves the stream
    as it was, and it goes on equal to the model run from scratch."""
    model, tok = student
    stream = StreamingEncoder(model, tok, max_checkpoints=max_checkpoints)
    stream.type("one two three ")
    before = stream.embedding
    calls, real = [], model.step

    def failing(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("simulated failure")
        return real(*args, **kwargs)

    monkeypatch.setattr(model, "step", failing)
    with pytest.raises(RuntimeError, match="simulated"):
        stream.type("four five six seven")
    monkeypatch.setattr(model, "step", real)
    assert stream.text == "one two three " and torch.equal(stream.embedding, before)
    stream.type("eight")
    stream.delete(len("three eight"))
    assert torch.allclose(stream.embedding, encode_texts(model, tok, ["one two "])[0], atol=1e-5)



def test_a_tokenizer_whose_backend_pads_streams_right(student):
    """The built-in teacher's tokenizer.json pads and truncates every encoding to 128 tokens at the backend;
    the stream, which reads words through the backend, must not step those pads."""
    from transformers import AutoTokenizer

    from tf2rnn_hf.data.teacher import resolve_teacher_path

    model, _ = student
    fresh = AutoTokenizer.from_pretrained(resolve_teacher_path())
    assert fresh.backend_tokenizer.padding is not None  # the case under test
    stream = StreamingEncoder(model, fresh)
    stream.type("search as you type")
    assert stream.state.seen_tokens.item() == len(fresh("search as you type", add_special_tokens=False)["input_ids"])
    assert torch.allclose(stream.embedding, encode_texts(model, fresh, ["search as you type"])[0], atol=1e-5)
    assert fresh.backend_tokenizer.padding is not None  # the caller's tokenizer is left as it was
