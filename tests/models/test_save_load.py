"""Saving writes safetensors, auto_map, the custom code and the tokenizer; the Auto classes load it back,
with the package importable and, in a fresh process that cannot import it, through trust_remote_code."""

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from tf2rnn_hf import TF2RNNModel
from tf2rnn_hf.distill import build_student

TEXTS = ["Hello world", "A recurrent student follows its teacher.", "tokens"]


@pytest.fixture(scope="module")
def saved(tmp_path_factory, teacher):
    torch.manual_seed(0)
    model, tokenizer = build_student(teacher, cell_type="gru", hidden_size=32, num_hidden_layers=2,
                                                token_init="input_embeddings")
    path = tmp_path_factory.mktemp("student")
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    batch = tokenizer(TEXTS, padding=True, return_tensors="pt")
    with torch.no_grad():
        expected = model(**batch).pooler_output
    return path, expected


def _run_fresh(code: str, block_package: bool) -> dict:
    """Run `code` in a fresh interpreter (optionally unable to import tf2rnn_hf); it prints JSON."""
    guard = textwrap.dedent("""
        import importlib.abc, sys
        class _Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name == "tf2rnn_hf" or name.startswith("tf2rnn_hf."):
                    raise ModuleNotFoundError(f"blocked for this test: {name}")
        sys.meta_path.insert(0, _Block())
    """) if block_package else ""
    result = subprocess.run([sys.executable, "-c", guard + textwrap.dedent(code)], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    line = next(x for x in result.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


LOAD = """
    import json, torch, sys
    from transformers import AutoConfig, AutoModel, AutoTokenizer
    path, remote = {path!r}, {remote}
    if not remote:
        import tf2rnn_hf
    config = AutoConfig.from_pretrained(path, trust_remote_code=remote)
    model = AutoModel.from_pretrained(path, trust_remote_code=remote).eval()
    tok = AutoTokenizer.from_pretrained(path, trust_remote_code=remote)
    batch = tok({texts!r}, padding=True, return_tensors="pt")
    with torch.no_grad():
        out = model(**batch).pooler_output
    print("RESULT " + json.dumps({{"cls": type(model).__module__ + "." + type(model).__name__,
                                   "model_type": config.model_type, "tf2rnn_imported": "tf2rnn_hf" in sys.modules,
                                   "out": out.tolist()}}))
"""


def test_files_written(saved):
    path, _ = saved
    names = {p.name for p in path.iterdir()}
    assert {"model.safetensors", "config.json", "configuration_tf2rnn.py", "modeling_tf2rnn.py",
            "cells_tf2rnn.py", "tokenizer.json", "tokenizer_config.json"} <= names
    config = json.loads((path / "config.json").read_text())
    assert config["auto_map"] == {"AutoConfig": "configuration_tf2rnn.TF2RNNConfig",
                                  "AutoModel": "modeling_tf2rnn.TF2RNNModel"}


@pytest.mark.parametrize("remote", [False, True], ids=["package", "trust_remote_code"])
def test_auto_classes_load_identical_outputs(saved, remote):
    path, expected = saved
    result = _run_fresh(LOAD.format(path=str(path), remote=remote, texts=TEXTS), block_package=remote)
    assert result["model_type"] == "tf2rnn"
    assert result["tf2rnn_imported"] is (not remote)
    if remote:
        assert result["cls"].startswith("transformers_modules.")
    else:
        assert result["cls"] == "tf2rnn_hf.models.tf2rnn.modeling_tf2rnn.TF2RNNModel"
    assert torch.equal(torch.tensor(result["out"]), expected)


def test_truncated_checkpoint_gives_clear_error(saved, tmp_path):
    path, _ = saved
    shutil.copytree(path, tmp_path, dirs_exist_ok=True)
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    with pytest.raises(Exception, match="(?i)safetensors|header|incomplete|invalid|deserializ"):
        TF2RNNModel.from_pretrained(tmp_path)


@pytest.mark.parametrize("override, message", [(dict(num_slots=0), "num_slots must be a positive integer"),
                                               (dict(num_slots=2.5), "num_slots must be a positive integer"),
                                               (dict(open_tokens=0), "open_tokens must be a whole number")])
def test_overrides_at_load_are_checked(saved, override, message):
    # transformers sets from_pretrained's keyword overrides on the config after its __init__ has run.
    from transformers import AutoModel

    with pytest.raises(ValueError, match=message):
        AutoModel.from_pretrained(saved[0], **override)
    assert TF2RNNModel.from_pretrained(saved[0], num_slots=8).config.num_slots == 8


def test_the_slot_count_is_an_inference_budget(tmp_path, teacher):
    """An inherited student saved at 16 cache slots loads at 6 with the same weights: a text that fits 6 slots embeds
    as before, a longer one evicts down to 6 (and so differs), and its state continues like the whole text."""
    from transformers import AutoModel

    torch.manual_seed(0)
    model, tokenizer = build_student(teacher, cell_type="tova_attention", num_hidden_layers=1, num_slots=16)
    model.save_pretrained(tmp_path)
    small = AutoModel.from_pretrained(tmp_path, num_slots=6).eval()
    short = tokenizer(["search as you"], return_tensors="pt")  # [CLS] and three words: inside 6 slots
    long = tokenizer(["a recurrent student follows its teacher one keystroke at a time"], return_tensors="pt")
    assert short.input_ids.shape[1] <= 6 < long.input_ids.shape[1] <= 16
    more = tokenizer([" through the whole text"], add_special_tokens=False, return_tensors="pt")
    with torch.no_grad():
        torch.testing.assert_close(small(**short).pooler_output, model.eval()(**short).pooler_output)
        out = small(**long, use_cache=True)
        assert out.past_state.cell_state[0].shape[1] == 6
        assert (out.pooler_output - model(**long).pooler_output).abs().max() > 1e-3
        whole = small(torch.cat([long.input_ids, more.input_ids], 1)).pooler_output
        torch.testing.assert_close(small(**more, past_state=out.past_state).pooler_output, whole,
                                   rtol=1e-5, atol=1e-5)


FIXTURES = Path(__file__).parents[1] / "fixtures" / "student-0.1.0"


@pytest.mark.parametrize("cell", ["gru", "linear_attention"])
@pytest.mark.parametrize("remote", [False, True], ids=["package", "trust_remote_code"])
def test_students_saved_before_the_restructure_still_load(cell, remote):
    """Folders saved by 0.1.0 (flat package; the GRU one with a state lift) load by their auto_map, through
    the package's classes or their own copied code, and give the outputs they gave then."""
    path = FIXTURES / cell
    expected = json.loads((path / "expected.json").read_text())
    code = f"""
        import json, sys, torch
        from transformers import AutoModel
        if not {remote}:
            import tf2rnn_hf
        model = AutoModel.from_pretrained({str(path)!r}, trust_remote_code={remote}).eval()
        with torch.no_grad():
            out = model(torch.tensor({expected["input_ids"]}),
                        attention_mask=torch.tensor({expected["attention_mask"]}))
        print("RESULT " + json.dumps({{"cls": type(model).__module__ + "." + type(model).__name__,
                                       "out": out.pooler_output.tolist()}}))
    """
    result = _run_fresh(code, block_package=remote)
    assert result["cls"].endswith(".TF2RNNModel")
    assert result["cls"].startswith("transformers_modules." if remote else "tf2rnn_hf.models.")
    assert torch.allclose(torch.tensor(result["out"]), torch.tensor(expected["pooler_output"]), atol=1e-6)
