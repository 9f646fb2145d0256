#!/usr/bin/env bash
# What a lent GPU machine needs from here, since it reaches no network: writes .carry/ (git-ignored), to name
# in the device run's `carry` (its limit is 64 MiB with the working tree; this is ~50 MB):
#   teacher/          the built-in teacher with its weights stored fp16 (the teacher loads them back to fp32)
#   train.jsonl.xz, heldout.jsonl.gz   the offline corpus's splits (text, source), as built here from Debian
#   wheels/           what the package needs that the device image lacks (for its Python 3.12)
# Then, on the device: `CELL=inherited TEXTS=... MINUTES=... PACK=$OUT/student bash benchmarks/quality/gpu.sh`.
# CORPUS=offline-xl (1.1M sentences) does not fit beside the teacher in one carry (45 MB + 22 MB + the tree): its
# train split goes to .carry-text/train.jsonl.xz instead (~22 MB), for a second call on the warm machine, which
# keeps the first call's .carry (a carry replaces only the paths it names); gpu.sh reads it from there:
#   call 1, carry [".carry"]: `nvidia-smi` (starts the machine: the teacher and wheels arrive)
#   call 2, carry [".carry-text"], within the machine's idle release (30 s): gpu.sh with TEXTS=1100000
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
export CORPUS=${CORPUS:-offline}
# What the image lacks (device KINDS.md), at the versions installed here.
WHEELS=$($PY -c "import importlib.metadata as m
print(*(f'{n}=={m.version(n)}' for n in ('datasets', 'evaluate', 'dill', 'multiprocess')))")
rm -rf .carry .carry-text && mkdir -p .carry/wheels
$PY - <<'PY'
import gzip, json, lzma, os, shutil
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
corpus = os.environ["CORPUS"]
for split in ("train", "heldout"):
    rows = load_texts(corpus, split)
    if split == "heldout":
        path, opener = carry / f"{split}.jsonl.gz", gzip.open
    else:  # xz: a third smaller than gzip here, which 64 MiB a call needs (the tree and .carry came within 0.5 MB)
        path, opener = (carry if corpus == "offline" else Path(".carry-text")) / f"{split}.jsonl.xz", lzma.open
        path.parent.mkdir(exist_ok=True)
    with opener(path, "wt") as f:
        f.writelines(json.dumps({"text": t, "source": s}) + "\n" for t, s in zip(rows["text"], rows["source"]))
PY
$PY -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d .carry/wheels $WHEELS
du -sh .carry; [ ! -d .carry-text ] || du -sh .carry-text
