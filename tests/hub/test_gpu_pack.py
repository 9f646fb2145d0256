"""The trip back from a lent GPU machine (benchmarks/quality/gpu_pack.py): a student packed into parts small
enough to return comes back whole, and a missing part is refused rather than loaded short."""

import importlib.util
import json
from pathlib import Path

import pytest
import torch
from conftest import tiny_model

from tf2rnn_hf import TF2RNNModel
from tf2rnn_hf.hub import save_student

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "quality" / "gpu_pack.py"
spec = importlib.util.spec_from_file_location("gpu_pack", SCRIPT)
gpu_pack = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gpu_pack)


def test_pack_unpack_round_trip(tmp_path, teacher):
    model = tiny_model("tova_attention", teacher_name_or_path="/tmp/job/.carry/teacher")  # as trained on the device
    save_student(model, teacher.tokenizer, tmp_path / "trained")
    (tmp_path / "trained" / "results.json").write_text(json.dumps({"fidelity": "kept"}))
    files = gpu_pack.pack(tmp_path / "trained", tmp_path / "packed", part_bytes=4096)
    parts = [f for f in files if ".part" in f]
    assert len(parts) > 1 and all((tmp_path / "packed" / f).stat().st_size <= 4096 for f in parts)

    gpu_pack.unpack(tmp_path / "packed", tmp_path / "back")
    back = TF2RNNModel.from_pretrained(tmp_path / "back")
    assert back.config.teacher_name_or_path == "sentence-transformers/all-MiniLM-L6-v2"  # the built-in teacher again
    for name, weight in model.state_dict().items():  # fp16 on the trip: within its rounding
        torch.testing.assert_close(back.state_dict()[name], weight.half().float(), rtol=0, atol=0)
    assert json.loads((tmp_path / "back" / "results.json").read_text()) == {"fidelity": "kept"}
    assert (tmp_path / "back" / "tokenizer.json").is_file() and (tmp_path / "back" / "modules.json").is_file()

    (tmp_path / "packed" / parts[-1]).unlink()
    with pytest.raises(ValueError, match="do not match their sha256"):
        gpu_pack.unpack(tmp_path / "packed", tmp_path / "short")
