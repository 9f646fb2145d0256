#!/usr/bin/env python
"""A student's trip back from a lent GPU machine, which returns at most 8 files of 16 MiB each.

    python benchmarks/quality/gpu_pack.py pack STUDENT PACKED      # there (gpu.sh's PACK step)
    python benchmarks/quality/gpu_pack.py unpack PACKED STUDENT    # here: a whole folder for `tf2rnn evaluate`

PACKED holds config.json, the weights as one fp16 safetensors file cut into 15 MiB parts (an inherited
six-layer student is ~45 MB in fp16; its token table alone is 23 MB, so shards by tensor would not do) with
its sha256, and results.json. Unpacking rebuilds fp32 weights, the custom code, the sentence-transformers
files and the teacher's tokenizer; a student trained on gpu_carry.sh's copy of the built-in teacher names
the built-in teacher again.
"""

import argparse
import hashlib
import shutil
from pathlib import Path
from typing import List, Union

import torch
from safetensors.torch import load, save

from tf2rnn_hf import TF2RNNConfig, TF2RNNModel
from tf2rnn_hf.data.teacher import BUILT_IN_ID, Teacher, teacher_name_of
from tf2rnn_hf.hub import save_student

PART_BYTES = 15 << 20


def pack(student: Union[str, Path], packed: Union[str, Path], part_bytes: int = PART_BYTES) -> List[str]:
    """Write `student`'s config, fp16 weight parts, their sha256 and its results.json to `packed`; returns the files."""
    out = Path(packed)
    out.mkdir(parents=True, exist_ok=True)
    model = TF2RNNModel.from_pretrained(student, dtype=torch.float32)
    model.config.to_json_file(out / "config.json")
    blob = save({k: v.half().contiguous() for k, v in model.state_dict().items()})
    for i in range(0, len(blob), part_bytes):
        (out / f"model.safetensors.part{i // part_bytes}").write_bytes(blob[i:i + part_bytes])
    (out / "model.safetensors.sha256").write_text(hashlib.sha256(blob).hexdigest())
    if (Path(student) / "results.json").is_file():
        shutil.copy(Path(student) / "results.json", out / "results.json")
    return sorted(p.name for p in out.iterdir())


def unpack(packed: Union[str, Path], student: Union[str, Path]) -> TF2RNNModel:
    """Rebuild a whole student folder at `student` from what `pack` wrote; refuses missing or altered parts."""
    src = Path(packed)
    parts = sorted(src.glob("model.safetensors.part*"), key=lambda p: int(p.name.rsplit("part", 1)[1]))
    blob = b"".join(p.read_bytes() for p in parts)
    digest = src / "model.safetensors.sha256"
    if not parts or not digest.is_file() or hashlib.sha256(blob).hexdigest() != digest.read_text().strip():
        raise ValueError(f"{packed}: the weight parts are missing or do not match their sha256 (an incomplete "
                         f"trip back?); found {[p.name for p in parts]}.")
    model = TF2RNNModel(TF2RNNConfig.from_json_file(src / "config.json"))
    model.load_state_dict({k: v.float() for k, v in load(blob).items()})  # strict: every weight, nothing else
    if str(model.config.teacher_name_or_path).rstrip("/").endswith(".carry/teacher"):
        model.config.teacher_name_or_path = BUILT_IN_ID  # gpu_carry.sh's fp16-stored copy of the built-in teacher
    save_student(model, Teacher(teacher_name_of(model.config.teacher_name_or_path)).tokenizer, student)
    if (src / "results.json").is_file():
        shutil.copy(src / "results.json", Path(student) / "results.json")
    return model


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("pack", "unpack"))
    parser.add_argument("source")
    parser.add_argument("target")
    parser.add_argument("--part_bytes", type=int, default=PART_BYTES, help="pack: bytes per part (15 MiB)")
    args = parser.parse_args()
    if args.action == "pack":
        print(f"{args.target}: {', '.join(pack(args.source, args.target, args.part_bytes))}")
    else:
        model = unpack(args.source, args.target)
        print(f"{args.target}: {sum(p.numel() for p in model.parameters()):,} weights")


if __name__ == "__main__":
    main()
