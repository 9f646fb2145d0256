#!/usr/bin/env bash
# What a lent GPU machine needs from here, since it reaches no network: writes .carry/ (git-ignored), to name
# in the device run's `carry` (its limit is 64 MiB with the working tree; this is ~50 MB):
#   teacher/          the built-in teacher with its weights stored fp16 (the teacher loads them back to fp32)
#   train.jsonl.gz, heldout.jsonl.gz   the offline corpus's splits (text, source), as built here from Debian
#   wheels/           what the package needs that the device image lacks (for its Python 3.12)
# Then, on the device: `CELL=inherited TEXTS=... MINUTES=... PACK=$OUT/student bash benchmarks/quality/gpu.sh`.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
# What the image lacks (device KINDS.md), at the versions installed here.
WHEELS=$($PY -c "import importlib.metadata as m
print(*(f'{n}=={m.version(n)}' for n in ('datasets', 'evaluate', 'dill', 'multiprocess')))")
rm -rf .carry && mkdir -p .carry/wheels
$PY - <<'PY'
import gzip, json, shutil
from pathlib import Path
import torch
from safetensors.torch import load_file, save_file
from tf2rnn_hf.data.corpus import load_texts
from tf2rnn_hf.data.teacher import resolve_teacher_path

source, carry = Path(resolve_teacher_path()), Path(".carry")
shutil.copytree(source, carry / "teacher", ignore=shutil.ignore_patterns("model.safetensors", "*.bin", "onnx",
                                                                           "openvino", "*.h5", "*.ot", ".git*"))
weights = load_file(source / "model.safetensors")
save_file({k: v.half() if v.is_floating_point() else v for k, v in weights.items()},
          carry / "teacher" / "model.safetensors", metadata={"format": "pt"})
for split in ("train", "heldout"):
    rows = load_texts("offline", split)
    with gzip.open(carry / f"{split}.jsonl.gz", "wt") as f:
        f.writelines(json.dumps({"text": t, "source": s}) + "\n" for t, s in zip(rows["text"], rows["source"]))
PY
$PY -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d .carry/wheels $WHEELS
du -sh .carry
