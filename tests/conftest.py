"""Shared fixtures: tiny configs for every cell, the real built-in teacher (loaded once), the command line."""

import io
import os
import sys

# Nothing in the suite may reach a hub; set before transformers/huggingface_hub are imported.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Nothing in the suite downloads: the data it reads was fetched once by scripts/setup.sh into tests/.data.
os.environ["TF2RNN_OFFLINE"] = "1"
os.environ["PIP_NO_INDEX"] = "1"
# Derived artefacts (token vectors, corpora) go to one folder per test session, shared with subprocesses.
if "TF2RNN_CACHE" not in os.environ:
    import tempfile
    from pathlib import Path

    os.environ["TF2RNN_CACHE"] = tempfile.mkdtemp(prefix="tf2rnn-test-cache-")
    for name in ("debian", "gensim_test_data", "sts_b"):  # the fetched data, read in place
        fetched = Path(__file__).parent / ".data" / name
        if fetched.is_dir():
            (Path(os.environ["TF2RNN_CACHE"]) / name).symlink_to(fetched.resolve(), target_is_directory=True)

import pytest  # noqa: E402
import torch  # noqa: E402

from tf2rnn_hf import CELL_TYPES, TF2RNNConfig, TF2RNNModel  # noqa: E402

# Variants the model's contract tests run beside every cell type: the residual GRU stack with an MLP readout.
VARIANTS = {"gru-residual-mlp": dict(cell_type="gru", num_hidden_layers=3, residual_layers=True,
                                     readout_hidden_size=20),
            "tova-bidirectional": dict(cell_type="tova_attention", bidirectional_pooling=True),
            "tova-position-weighted": dict(cell_type="tova_attention", pooling_position_exponent=1.0),
            "tova-open": dict(cell_type="tova_attention", open_tokens=3, pooling_position_exponent=1.0),
            "tova-tail": dict(cell_type="tova_attention", tail_layers=1, pooling_position_exponent=1.0)}


def tiny_config(cell_type: str = "gru", **overrides) -> TF2RNNConfig:
    """A small config of `cell_type` (or a name in VARIANTS) with two layers, so layer stacking is exercised too."""
    kwargs = dict(vocab_size=50, hidden_size=24, num_hidden_layers=2, cell_type=cell_type, output_size=16,
                  num_attention_heads=4, rem_real_heads=1, rem_cyclic_heads=1, num_slots=5, skip_token_ids=[0, 1])
    kwargs.update(VARIANTS.get(cell_type, {}))
    if kwargs["cell_type"] == "tova_attention":  # it reads the token table directly, at the cell's width
        kwargs.update(embedding_size=kwargs["hidden_size"], residual_token_mean=False)
    kwargs.update(overrides)
    return TF2RNNConfig(**kwargs)


def tiny_model(cell_type: str, seed: int = 0, **overrides) -> TF2RNNModel:
    torch.manual_seed(seed)
    model = TF2RNNModel(tiny_config(cell_type, **overrides)).eval()
    if model.config.bidirectional_pooling:  # its output map starts at zero; make the term count in every test
        with torch.no_grad():
            model.cell.pooling.out_weight.normal_(0, 0.3)
    return model


@pytest.fixture(params=[*CELL_TYPES, *VARIANTS])
def cell_type(request):
    return request.param


@pytest.fixture(scope="session")
def teacher():
    from tf2rnn_hf.data.teacher import Teacher

    return Teacher("built-in")


@pytest.fixture
def tf2rnn(capsys, monkeypatch):
    """Run the `tf2rnn` command in this process, as its console script does: (exit code, stdout, stderr).

    What a process adds (`sys.exit` of main's code) is tested once by a subprocess; in-process calls spare the
    ~5 s import of torch and transformers that every `python -m tf2rnn_hf.cli` pays."""
    from tf2rnn_hf.cli import main

    def run(*args, stdin: bytes = b""):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
        capsys.readouterr()
        try:
            code = main([str(arg) for arg in args])
        except SystemExit as exit:  # what the interpreter does with it: a message goes to stderr, exit code 1
            if isinstance(exit.code, str):
                print(exit.code, file=sys.stderr)
            code = 1 if isinstance(exit.code, str) else exit.code or 0
        out, err = capsys.readouterr()
        return code, out, err

    return run


# Debian's Chromium for the browser tests (Playwright's own browser download cannot work offline).
from tf2rnn_hf.demo.browser import chromium_path  # noqa: E402

needs_chromium = pytest.mark.skipif(chromium_path() is None, reason="Debian's chromium is not installed "
                                    "(scripts/setup.sh installs it where it runs as root with apt)")


def lively_gru_student(teacher):
    """A small GRU student of the real teacher whose cell weights have trained-looking scales (the default
    init leaves the cell nearly idle), so that a wrong state in an exported graph would show."""
    from tf2rnn_hf.distill import build_student

    torch.manual_seed(0)
    model, tokenizer = build_student(teacher, hidden_size=64, token_init="input_embeddings")
    with torch.no_grad():
        for p in model.cell.parameters():
            p.normal_(0, 0.2)
    return model.eval(), tokenizer


def apply_edits(encoder, script, expected, atol: float = 0.0):
    """Apply `script` ((type, text) and (delete, n) edits; a delete past the start takes what there is) to a streaming
    `encoder`, its text and embedding checked after each edit: within `atol` of `expected(text)` (0: bit for bit)."""
    text = ""
    for op, arg in script:
        if op == "type":
            encoder.type(arg)
            text += arg
        else:
            n = min(arg, len(text))
            encoder.delete(n)
            text = text[:len(text) - n]
        assert encoder.text == text
        gap = (encoder.embedding - expected(text)).abs().max()
        assert gap <= atol if atol else torch.equal(encoder.embedding, expected(text)), repr(text)
    return encoder
