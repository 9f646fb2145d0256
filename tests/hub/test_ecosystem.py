"""The student in the tools people already run: sentence-transformers, pipeline, the CLI, the model card."""

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import torch

from tf2rnn_hf.distill import build_student
from tf2rnn_hf.hub import save_student
from tf2rnn_hf.hub.modelcard import card_metadata
from tf2rnn_hf.inference.encode import encode_texts

TEXTS = ["search as you type", "a recurrent encoder updates per keystroke", "streams and devices"]


@pytest.fixture(scope="module")
def saved(teacher, tmp_path_factory):
    torch.manual_seed(0)
    model, tok = build_student(teacher, hidden_size=32, token_init="input_embeddings")
    path = tmp_path_factory.mktemp("student")
    save_student(model, tok, path, results={"suites": {"lee": {"student": {"pearson": 0.5, "spearman": 0.4}}}})
    return model.eval(), tok, path


def test_sentence_transformers_equality_and_search(saved):
    from sentence_transformers import SentenceTransformer, util

    model, tok, path = saved
    st = SentenceTransformer(str(path), device="cpu")
    ours = encode_texts(model, tok, TEXTS)
    theirs = st.encode(TEXTS, convert_to_tensor=True)
    assert (ours - theirs).abs().max() <= 1e-5
    sims = st.similarity(theirs, theirs)
    assert sims.shape == (3, 3) and torch.allclose(sims.diagonal(), torch.ones(3), atol=1e-5)
    hits = util.semantic_search(st.encode(["type as you search"], convert_to_tensor=True), theirs, top_k=2)
    assert len(hits[0]) == 2 and {"corpus_id", "score"} <= set(hits[0][0])


def test_feature_extraction_pipeline_shape(saved):
    from transformers import pipeline

    model, tok, path = saved
    out = np.asarray(pipeline("feature-extraction", model=str(path))("hello world"))
    n_tokens = len(tok("hello world")["input_ids"])  # with [CLS] and [SEP]
    assert out.shape == (1, n_tokens, 384)
    # The last row (at [SEP], a no-op) is the sentence embedding.
    assert np.abs(out[0, -1] - encode_texts(model, tok, ["hello world"])[0].numpy()).max() <= 1e-5


def test_model_card_validates(saved):
    from huggingface_hub import ModelCard

    _, _, path = saved
    meta = card_metadata(path / "README.md")
    assert meta["library_name"] == "transformers" and meta["pipeline_tag"] == "sentence-similarity"
    assert meta["base_model"] == "sentence-transformers/all-MiniLM-L6-v2" and meta["license"] == "apache-2.0"
    results = meta["model-index"][0]["results"]
    assert {m["type"] for r in results for m in r["metrics"]} == {"pearson", "spearman"}
    from huggingface_hub.repocard_data import model_index_to_eval_results

    name, evals = model_index_to_eval_results(ModelCard.load(path / "README.md").data.to_dict()["model-index"])
    assert name == path.name and {e.metric_value for e in evals} == {0.5, 0.4}
    text = (path / "README.md").read_text()
    assert "## Limitations" in text and "StreamingEncoder" in text and "| student |" in text


def test_the_card_names_the_cell_and_its_open_tokens():
    from conftest import tiny_config

    from tf2rnn_hf.hub.modelcard import render_model_card

    causal = str(render_model_card(tiny_config("tova_attention")))
    assert "- Cell: `tova_attention`, 2 layer(s), hidden size 24;" in causal
    opened = str(render_model_card(tiny_config("tova_attention", open_tokens=3)))
    assert "- Cell: `tova_attention`, 2 layer(s), the newest 3 tokens open, hidden size 24;" in opened
    assert "- Weights:" not in causal
    int4 = str(render_model_card(tiny_config("tova_attention"), weight_bits=4))
    assert "- Weights: the recurrent layers' on a symmetric int4 grid, one scale per row" in int4
    assert "- Tokeniser:" in int4.split("- Weights:")[1]  # the list goes on after it
    assert "except" not in int4.split("- Tokeniser:")[0]
    mixed = str(render_model_card(tiny_config("tova_attention"), weight_bits=4, weight_keep=["down"]))
    assert ("one scale per row (trained through the rounding), except each layer's down; the readout and those fp32. "
            "On a CPU with AVX512-VNNI or AVX2 the fused keystroke reads the rounded ones as int4 products and the "
            "rest as int8") in mixed
    layers = str(render_model_card(tiny_config("tova_attention"), weight_bits=4, weight_keep=["up", "cell.layers.1"]))
    assert "the rounding), except each layer's up; `cell.layers.1`; the readout and those fp32" in layers
    grouped = str(render_model_card(tiny_config("tova_attention"), weight_bits=4, weight_group=128))
    assert ("on a symmetric int4 grid, one scale per 128 columns of a row (trained through the rounding); the readout "
            "fp32. On a CPU with AVX512-VNNI or AVX2 the fused keystroke reads them as int4 products") in grouped
    small = str(render_model_card(tiny_config("tova_attention"), weight_bits=4, weight_group=64))
    assert "one scale per 64 columns of a row" in small and "int4 products" not in small  # the kernel reads it as int8


def test_the_card_names_the_text_the_student_trained_on(tmp_path):
    """A student distilled on the built-in corpus says so with its sources' licences; one distilled on the user's own
    file names that file (by name, not its local path) and the student it continued from, and claims none of the
    built-in corpus's sources or licences."""
    from conftest import tiny_config

    from tf2rnn_hf.hub.modelcard import render_model_card

    built_in = str(render_model_card(tiny_config("tova_attention")))
    assert "WordNet glosses" in built_in and "GCIDE (GPL-2+)" in built_in
    (tmp_path / "tickets").mkdir()
    own = str(render_model_card(tiny_config("tova_attention"), corpus=str(tmp_path / "tickets"),
                                init_from="org/tf2rnn-minilm", eval_corpus=str(tmp_path / "held.jsonl")))
    training = own.split("## Training data")[1].split("##")[0]
    assert "`tickets`, the distiller's own text (held-out figures from `held.jsonl`)" in training
    assert "Continued from `org/tf2rnn-minilm`" in training and str(tmp_path) not in own
    assert "WordNet" not in own and "GPL" not in own and "- Trained on `tickets`" in own
    offline_xl = str(render_model_card(tiny_config("tova_attention"), corpus="offline-xl"))
    assert "software documentation" in offline_xl.split("## Training data")[1]


def test_cli_card_from_saved_results(saved, tmp_path, tf2rnn):
    import shutil

    _, _, path = saved
    folder = tmp_path / "student"
    shutil.copytree(path, folder)
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"suites": {"lee": {"student": {"pearson": 0.61, "spearman": 0.52}}}}))
    extra = tmp_path / "cells.md"
    extra.write_text("### Cell comparison\n\n| cell | final cosine |\n|---|---|\n| gru | 0.88 |\n")
    code, _, err = tf2rnn("card", folder, "org/tf2rnn-test", "--results", results, "--extra", extra)
    assert code == 0, err[-2000:]
    text = (folder / "README.md").read_text()
    assert "| gru | 0.88 |" in text and 'AutoModel.from_pretrained("org/tf2rnn-test")' in text
    assert text.index("## Results") < text.index("### Cell comparison") < text.index("## Training data")
    metrics = card_metadata(folder / "README.md")["model-index"][0]["results"][0]["metrics"]
    assert {m["value"] for m in metrics} == {0.61, 0.52}
    assert "length (64 tokens)" in text  # no distill results: the default
    # The training length a card states is the one the student's distillation used (its results.json).
    (folder / "results.json").write_text(json.dumps({"args": {"data": {"max_tokens": 128}}}))
    assert tf2rnn("card", folder, "org/tf2rnn-test", "--results", results)[0] == 0
    assert "length (128 tokens)" in (folder / "README.md").read_text()
    code, _, err = tf2rnn("card", folder, "org/x", "--results", tmp_path / "missing.json")
    assert code != 0 and "no results at" in err


def _cli(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "tf2rnn_hf.cli", *args], input=stdin, capture_output=True,
                          timeout=300, env=dict(os.environ, OMP_NUM_THREADS="1"))


def test_cli_encode_round_trip(saved, tmp_path, tf2rnn):
    model, tok, path = saved
    code, _, err = tf2rnn("encode", path, "--output", tmp_path / "e.npy", stdin="\n".join(TEXTS).encode())
    assert code == 0, err[-2000:]
    assert np.abs(np.load(tmp_path / "e.npy") - encode_texts(model, tok, TEXTS).numpy()).max() <= 1e-5
    src = tmp_path / "in.txt"
    src.write_text("\n".join(TEXTS))
    assert tf2rnn("encode", path, "--input", src, "--output", tmp_path / "e.jsonl")[0] == 0
    rows = [json.loads(line) for line in (tmp_path / "e.jsonl").read_text().splitlines()]
    assert [r["text"] for r in rows] == TEXTS and len(rows[0]["embedding"]) == 384
    code, _, err = tf2rnn("encode", path, "--input", src, "--output", tmp_path / "q.npy", "--int8")
    assert code == 0, err[-2000:]
    assert (np.load(tmp_path / "q.npy") * np.load(tmp_path / "e.npy")).sum(-1).min() >= 0.99  # unit vectors


def test_cli_bad_input(saved, tmp_path, tf2rnn):
    _, _, path = saved
    # A real process: bytes on its standard input, the error on its stderr and the exit code through sys.exit.
    run = _cli("encode", str(path), "--output", str(tmp_path / "x.npy"), stdin=b"ok\n\xff\xfe broken\n")
    assert run.returncode != 0 and b"standard input is not valid UTF-8 (byte 3" in run.stderr
    big = ("word " * 40_000).encode()  # a 200 kB line: read whole, 40,000 steps (the student cuts no text)
    assert tf2rnn("encode", path, "--output", tmp_path / "big.npy", stdin=big)[0] == 0
    long = np.load(tmp_path / "big.npy")
    assert long.shape == (1, 384) and np.isfinite(long).all() and abs(np.linalg.norm(long) - 1) < 1e-4
    code, _, err = tf2rnn("encode", path, "--output", tmp_path / "x.csv", stdin=b"hi\n")
    assert code != 0 and "must end in .npy or .jsonl" in err


def test_cli_help_everywhere(tf2rnn):
    run = _cli("--help")  # the module's entry point, once in a process of its own
    assert run.returncode == 0 and b"usage" in run.stdout.lower()
    for command in ("evaluate", "card", "plot", "encode", "stream", "demo", "export", "push", "pull", "distill"):
        code, out, _ = tf2rnn(command, "--help")
        assert code == 0 and "usage" in out.lower(), command


def test_stream_demo_in_a_pseudo_terminal(saved):
    import pexpect

    _, _, path = saved
    child = pexpect.spawn(sys.executable, ["-m", "tf2rnn_hf.cli", "stream", str(path)], timeout=120,
                          env=dict(os.environ, OMP_NUM_THREADS="1"), encoding="utf-8")
    child.expect("query>")
    child.send("the train to edinburgh")
    child.expect("µs/update")
    child.expect(r"1\. \[[+-][0-9.]+\] ")
    child.send("\x7f")  # a backspace is a delete
    child.expect("query> the train to edinburg\r?\n")
    child.send("h")
    child.expect(r"1\. \[[+-][0-9.]+\] (.*)\r?\n")
    top = child.match.group(1)
    child.send("\x04")
    child.expect(pexpect.EOF)
    # What the demo shows first is the model's own first match for the typed query.
    from importlib.resources import files

    model, tok, _ = saved
    docs = [d for d in (files("tf2rnn_hf") / "data" / "demo_index.txt").read_text().splitlines() if d.strip()]
    scores = encode_texts(model, tok, docs) @ encode_texts(model, tok, "the train to edinburgh")
    assert re.split(r"[\r\n]", top)[0].strip() == docs[int(scores.argmax())]
