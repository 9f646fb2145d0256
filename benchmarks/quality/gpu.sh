#!/usr/bin/env bash
# The scale point on one GPU (results/gpu-h100-*.json): 300k sentences' trajectories on the GPU teacher,
# then 5 minutes of training at batch 256 with 8 loader workers (the collator, not the GPU, bounds a step).
#   HIDDEN (default 768)  TEXTS (300000)  MINUTES (5)  OUT (outputs/gpu-gru$HIDDEN)  NAME (results file name,
#   default gpu-gru$HIDDEN; the kept runs are gpu-h100-gru768 and gpu-h100-gru1024)  EXTRA: more distill options
# On the lent H100 the teacher and text travelled as files (--teacher FOLDER --corpus FILE.jsonl
# --eval_corpus FILE.jsonl: the same model, fp16-stored, and the same offline corpus splits).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-python}
HIDDEN=${HIDDEN:-768}
OUT=${OUT:-outputs/gpu-gru$HIDDEN}
$PY examples/distill.py --max_train_texts "${TEXTS:-300000}" --max_eval_texts 1000 --token_budget 65536 \
  --hidden_size "$HIDDEN" --per_device_train_batch_size 256 --learning_rate 3e-3 --warmup_steps 0.03 \
  --transition_until 0.3 --anneal 0.2 --train_minutes "${MINUTES:-5}" --dataloader_num_workers 8 \
  --report_to none --logging_steps 200 --save_strategy no --disable_tqdm true --output_dir "$OUT" ${EXTRA:-}
mkdir -p benchmarks/quality/results
cp "$OUT/results.json" "benchmarks/quality/results/${NAME:-gpu-gru$HIDDEN}.json"
