"""ONNX export: `tf2rnn export --format onnx` writes graphs that onnxruntime runs to 1e-5 of PyTorch (the
step, the sequence with padding and a carried state, a typed-and-deleted stream), int8 graphs that stay
close, and a manifest a runtime can follow without reading our code."""

import json
import subprocess
import sys

import numpy as np
import pytest
import torch
from conftest import lively_gru_student

from tf2rnn_hf.distill import build_student
from tf2rnn_hf.hub import save_student
from tf2rnn_hf.inference.quantization import quantize_int8
from tf2rnn_hf.inference.streaming import StreamingEncoder

ort = pytest.importorskip("onnxruntime", reason="the onnx extra is not installed")
from tf2rnn_hf.inference.onnx import ONNXStudent, export_onnx  # noqa: E402

TYPED = [("type", "search as you tyep"), ("delete", 2), ("type", "pe now"), ("delete", 4), ("type", " fast")]


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "tf2rnn_hf.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=600)


@pytest.fixture(scope="module")
def exported(teacher, tmp_path_factory):
    model, tokenizer = lively_gru_student(teacher)
    source, folder = tmp_path_factory.mktemp("student"), tmp_path_factory.mktemp("onnx")
    save_student(model, tokenizer, source)
    run = _cli("export", source, folder, "--format", "onnx", "--int8")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "wrote step.onnx, step.int8.onnx, sequence.onnx, sequence.int8.onnx" in run.stderr
    return model.eval(), tokenizer, folder


def test_export_of_a_folder_without_a_student_is_one_error_line(tmp_path, tf2rnn):
    code, _, err = tf2rnn("export", tmp_path, tmp_path / "out")  # an uncaught exception would fail the test
    assert code == 2 and err.startswith("error:") and len(err.strip().splitlines()) == 1


def _session(folder, name):
    return ort.InferenceSession(str(folder / name), providers=["CPUExecutionProvider"])


def test_manifest_names_every_state_tensor_and_the_folder_is_self_contained(exported):
    model, tokenizer, folder = exported
    manifest = json.loads((folder / "tf2rnn_onnx.json").read_text())
    state = model.init_state(1)._tensors()
    assert [s["name"] for s in manifest["state"]] == ["cell_0", "token_sum", "seen_tokens", "last_embedding"]
    assert [tuple(s["shape"][1:]) for s in manifest["state"]] == [tuple(t.shape[1:]) for t in state]
    assert manifest["skip_token_ids"] == list(model.config.skip_token_ids)
    step = _session(folder, manifest["graphs"]["step"]["file"])
    assert [i.name for i in step.get_inputs()] == manifest["graphs"]["step"]["inputs"]
    assert [o.name for o in step.get_outputs()] == manifest["graphs"]["step"]["outputs"]
    seq = _session(folder, manifest["graphs"]["sequence"]["file"])
    assert [i.name for i in seq.get_inputs()] == manifest["graphs"]["sequence"]["inputs"]
    from transformers import AutoTokenizer

    assert AutoTokenizer.from_pretrained(folder)("search")["input_ids"] == tokenizer("search")["input_ids"]


@torch.no_grad()
def test_step_graph_equals_the_model_step(exported):
    model, _, folder = exported
    onnx = ONNXStudent(folder)
    ours, theirs = model.init_state(3), onnx.init_state(3)
    for _ in range(20):
        ids = torch.randint(1000, 20000, (3,))
        e1, ours = model.step(ids, ours)
        e2, theirs = onnx.step(ids, theirs)
        assert (e1 - e2).abs().max() <= 1e-5
    for a, b in zip(ours._tensors(), theirs._tensors()):
        assert a.dtype == b.dtype and (a.float() - b.float()).abs().max() <= 1e-5


@torch.no_grad()
def test_sequence_graph_equals_forward_with_padding_skips_and_a_carried_state(exported):
    model, tokenizer, folder = exported
    seq = _session(folder, "sequence.onnx")
    texts = ["search as you type", "a recurrent student follows its teacher, one token at a time", "hi"]
    batch = tokenizer(texts, padding=True, return_tensors="pt")  # [CLS]/[SEP] are skipped, padding masked
    batch["attention_mask"][0, 2] = 0  # a hole in the middle is a no-op too
    state = model.init_state(3)
    for chunk in (slice(0, 5), slice(5, None)):  # two chunks, the state carried between them
        ids, mask = batch["input_ids"][:, chunk], batch["attention_mask"][:, chunk]
        out = model(ids, attention_mask=mask, past_state=state, use_cache=True)
        feeds = {"input_ids": ids.numpy(), "attention_mask": mask.numpy()}
        feeds.update({f"state_in.{n}": t.numpy() for n, t in zip(("cell_0", "token_sum", "seen_tokens",
                                                                   "last_embedding"), state._tensors())})
        trajectory, *new = seq.run(None, feeds)
        assert np.abs(trajectory - out.last_hidden_state.numpy()).max() <= 1e-5
        for a, b in zip(out.past_state._tensors(), new):
            assert np.abs(a.numpy() - b).max() <= 1e-5
        state = out.past_state


@torch.no_grad()
def test_a_typed_and_deleted_stream_through_onnx_follows_the_python_stream(exported):
    model, tokenizer, folder = exported
    python, onnx = StreamingEncoder(model, tokenizer), StreamingEncoder(ONNXStudent(folder), tokenizer)
    for verb, arg in TYPED:
        for key in (arg if verb == "type" else range(arg)):
            a = python.type(key) if verb == "type" else python.delete(1)
            b = onnx.type(key) if verb == "type" else onnx.delete(1)
            assert (a - b).abs().max() <= 1e-5, (verb, python.text)
    assert onnx.text == python.text == "search as you type fast"


@torch.no_grad()
def test_int8_graphs_stay_close(exported):
    model, tokenizer, folder = exported
    fp32, int8 = StreamingEncoder(model, tokenizer), StreamingEncoder(ONNXStudent(folder, int8=True), tokenizer)
    fused = StreamingEncoder(quantize_int8(model), tokenizer)
    for verb, arg in TYPED:
        a, b, c = (e.type(arg) if verb == "type" else e.delete(arg) for e in (fp32, int8, fused))
        assert torch.dot(a, b) >= 0.99 and torch.dot(a, c) >= 0.99


@pytest.mark.parametrize("open_tokens", [1, 3])
def test_cells_without_a_sequence_graph_export_the_step(teacher, tmp_path, open_tokens):
    model, tokenizer = build_student(teacher, cell_type="tova_attention", num_hidden_layers=1, num_slots=4,
                                     open_tokens=open_tokens)
    with pytest.raises(ValueError, match="sequence graph covers gru"):
        export_onnx(model, tokenizer, tmp_path / "refused", sequence=True)
    manifest = export_onnx(model, tokenizer, tmp_path / "tova")
    assert list(manifest["graphs"]) == ["step"] and "step token by token" in manifest["sequence_graph"]
    onnx, ours = ONNXStudent(tmp_path / "tova"), model.eval()
    a, b = ours.init_state(1), onnx.init_state(1)
    with torch.no_grad():
        for token in tokenizer("past four slots the cache evicts, as the model does")["input_ids"][1:-1]:
            e1, a = ours.step(torch.tensor([token]), a)
            e2, b = onnx.step(torch.tensor([token]), b)
            assert (e1 - e2).abs().max() <= 1e-5
    with pytest.raises(ValueError, match="Export the fp32 model"):
        export_onnx(quantize_int8(model), tokenizer, tmp_path / "int8")
    with pytest.raises(FileNotFoundError, match="no tf2rnn_onnx.json"):
        ONNXStudent(tmp_path)


@torch.no_grad()
def test_int8_graphs_of_inherited_layers_keep_the_fp32_embedding(teacher, tmp_path):
    """Two of the teacher's layers in int8 graphs: one weight scale per channel keeps every step within 0.99
    cosine of fp32 (one per tensor, onnxruntime's default, fell to 0.97-0.98)."""
    model, tokenizer = build_student(teacher, cell_type="tova_attention", num_hidden_layers=2, num_slots=16)
    export_onnx(model, tokenizer, tmp_path, int8=True)
    int8 = ONNXStudent(tmp_path, int8=True)
    a, b = model.eval().init_state(1), int8.init_state(1)
    text = "the teacher's layers hold large features that one scale a tensor flattens"
    for token in tokenizer(text, add_special_tokens=False)["input_ids"]:
        e1, a = model.step(torch.tensor([token]), a)
        e2, b = int8.step(torch.tensor([token]), b)
        assert torch.dot(e1[0], e2[0]) >= 0.99


def test_a_graph_with_a_fixed_batch_or_length_is_refused(tmp_path):
    import onnx
    from onnx import TensorProto, helper

    from tf2rnn_hf.inference.onnx import _check_dynamic

    for shape in (["batch", 4], [2, "steps"]):  # what a silent specialisation leaves behind
        ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, shape)
        out = helper.make_tensor_value_info("out", TensorProto.INT64, shape)
        graph = helper.make_graph([helper.make_node("Identity", ["input_ids"], ["out"])], "g", [ids], [out])
        onnx.save(helper.make_model(graph), tmp_path / "g.onnx")
        with pytest.raises(RuntimeError, match="fixed axis"):
            _check_dynamic(tmp_path / "g.onnx")
