#!/usr/bin/env bash
# A real Model2Vec peer, distilled from the same teacher by model2vec itself. Its `distill` extra pins
# transformers<5.4, so it runs in its own environment (benchmarks/peers/.venv-model2vec, built here:
# torch first, then model2vec[distill]). The peer is then scored in the project's environment, where
# model2vec's own StaticModel (the core package, no transformers pin) embeds the texts:
# benchmarks/quality/results/peer-model2vec.json, one row per suite, beside the teacher.
#   PCA_DIMS (256)  OUT (outputs/peers/model2vec-minilm)  PY (.venv/bin/python)
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
VENV=benchmarks/peers/.venv-model2vec
OUT=${OUT:-outputs/peers/model2vec-minilm}
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q "torch==2.13.0"
"$VENV/bin/python" -m pip install -q "model2vec[distill,quantization]==0.10.0"
TEACHER=$($PY -c "from tf2rnn_hf.data.teacher import resolve_teacher_path; print(resolve_teacher_path())")
start=$(date +%s)
"$VENV/bin/python" - "$TEACHER" "$OUT" "${PCA_DIMS:-256}" <<'PY'
import sys, time
from model2vec.distill import distill
teacher, out, dims = sys.argv[1], sys.argv[2], int(sys.argv[3])
t0 = time.perf_counter()
model = distill(model_name=teacher, pca_dims=dims)
model.save_pretrained(out)
print(f"distilled in {time.perf_counter() - t0:.1f} s -> {out}")
PY
distilled=$(($(date +%s) - start))
$PY -m pip install -q "model2vec==0.10.0"
$PY benchmarks/peers/evaluate_peer.py "$OUT" --name model2vec --distill-seconds "$distilled" \
  --output benchmarks/quality/results/peer-model2vec.json
