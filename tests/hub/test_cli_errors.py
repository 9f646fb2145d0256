"""The command line and loading: every failure a new user meets is one line naming the problem, with a
non-zero exit and no traceback."""

import os
import subprocess
import sys

import pytest
import torch

from tf2rnn_hf.distill import build_student
from tf2rnn_hf.hub import save_student


@pytest.fixture(scope="module")
def saved(teacher, tmp_path_factory):
    torch.manual_seed(0)
    model, tok = build_student(teacher, hidden_size=16, token_init="input_embeddings")
    path = tmp_path_factory.mktemp("cli") / "student"
    save_student(model, tok, path)
    return path


def _cli(*args, env=None):
    """A process of its own, for what the process environment decides (the Hub's address)."""
    run = subprocess.run([sys.executable, "-m", "tf2rnn_hf.cli", *map(str, args)], capture_output=True, text=True,
                         input="", timeout=300, env=env)
    return run.returncode, run.stderr.strip()


def _one_line_error(code, err, *words):
    assert code != 0, err
    assert "Traceback" not in err, err
    last = err.splitlines()[-1]
    assert last.startswith("error:"), err
    for word in words:
        assert word in last, (word, last)


def _errors(tf2rnn, *args):
    """(exit code, stderr) of `tf2rnn *args` run in this process; an uncaught exception fails the test itself."""
    code, _, err = tf2rnn(*args)
    return code, err.strip()


def test_encode_errors(saved, tmp_path, tf2rnn):
    _one_line_error(*_errors(tf2rnn, "encode", saved, "--input", tmp_path / "missing.txt", "--output",
                             tmp_path / "x.npy"), "missing.txt")
    _one_line_error(*_errors(tf2rnn, "encode", saved, "--input", tmp_path, "--output", tmp_path / "x.npy"),
                    "directory")
    texts = tmp_path / "in.txt"
    texts.write_text("hello\n")
    _one_line_error(*_errors(tf2rnn, "encode", saved, "--input", texts, "--output",
                             tmp_path / "no" / "such" / "x.npy"), "no/such")


def test_a_missing_model_folder_is_named(tmp_path, tf2rnn):
    _one_line_error(*_errors(tf2rnn, "encode", tmp_path / "nothing", "--input", "-", "--output", tmp_path / "x.npy"),
                    "nothing")
    _one_line_error(*_errors(tf2rnn, "evaluate", "./not-a-model"), "not-a-model")


def test_unknown_suites_list_every_suite(saved, tf2rnn):
    code, err = _errors(tf2rnn, "evaluate", saved, "--suites", "x")
    _one_line_error(code, err, "'x'")
    from tf2rnn_hf.evaluation import ALL_SUITES

    assert all(suite in err.splitlines()[-1] for suite in ALL_SUITES)


def test_hub_commands_offline(saved):
    env = dict(os.environ, HF_ENDPOINT="http://127.0.0.1:9", HF_HUB_OFFLINE="0", HF_HUB_DISABLE_XET="1")
    _one_line_error(*_cli("pull", "org/model", env=env), "org/model")
    _one_line_error(*_cli("push", saved, "org/model", env=env), "org/model")


def test_loading_a_missing_folder_says_so(teacher, tmp_path):
    from tf2rnn_hf import TF2RNNModel

    with pytest.raises(OSError, match="missing"):
        TF2RNNModel.from_pretrained(str(tmp_path / "missing"))
    with pytest.raises(OSError, match="missing"):
        build_student(str(tmp_path / "missing"))


def test_saved_the_ordinary_way_sentence_transformers_reads_the_same_embedding(teacher, tmp_path):
    """save_pretrained + the tokenizer's save_pretrained (what push_to_hub runs too) gives a folder that
    SentenceTransformer reads exactly as the model embeds."""
    from sentence_transformers import SentenceTransformer

    torch.manual_seed(1)
    model, tok = build_student(teacher, hidden_size=16, token_init="input_embeddings")
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    texts = ["hello world", "a recurrent student " * 100]  # the long one is past 256 tokens
    ours = model(**tok(texts, padding=True, return_tensors="pt")).pooler_output
    theirs = SentenceTransformer(str(tmp_path), device="cpu").encode(texts, convert_to_tensor=True)
    assert (ours - theirs).abs().max() <= 1e-5
