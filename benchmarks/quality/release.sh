#!/usr/bin/env bash
# The release recipe for tf2rnn-minilm, as one job on 2 CPU cores: corpus, teacher trajectories (split over two
# processes) and 45 minutes of DDP training (two processes, batch 32 each), then the full evaluation suite
# and the model card (with the cell comparison). Settings come from the ablation
# (benchmarks/quality/results/ablation-*.json). Pass a fresh --cache_dir in EXTRA to time it from nothing.
#   NAME (default tf2rnn-minilm)  TRAIN_TEXTS (default 200000)  TRAIN_MINUTES (default 45)
#   LAUNCH: how distill.py starts (default: accelerate, 2 CPU processes; LAUNCH=$PY for one process)
#   EXTRA: more distill options (later options win, e.g. EXTRA="--hidden_size 384")
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
NAME=${NAME:-tf2rnn-minilm}
OUT=${OUT:-outputs/$NAME}
RESULT=benchmarks/quality/results/release.json
[ "$NAME" = tf2rnn-minilm ] || RESULT=benchmarks/quality/results/release-$NAME.json
start=$(date +%s)
LAUNCH=${LAUNCH:-$PY -m accelerate.commands.launch --multi_gpu --num_processes 2 --num_machines 1 --mixed_precision no --dynamo_backend no}
[ "$LAUNCH" = "$PY" ] || export OMP_NUM_THREADS=1  # one core per process
# Batch 32 per process keeps the global batch at the 64 the one-process runs used.
BATCH=32; [ "$LAUNCH" = "$PY" ] && BATCH=64
$LAUNCH examples/distill.py --max_train_texts "${TRAIN_TEXTS:-200000}" --max_eval_texts 1000 --hidden_size 768 \
  --per_device_train_batch_size $BATCH --learning_rate 2e-3 --warmup_steps 0.03 --train_minutes "${TRAIN_MINUTES:-45}" \
  --transition_until 0.3 --anneal 0.2 \
  --report_to none --logging_steps 100 --save_strategy no --disable_tqdm true --output_dir "$OUT" ${EXTRA:-}
trained=$(date +%s)
$PY benchmarks/quality/report.py --cells > "$OUT/cells.md"
$PY -m tf2rnn_hf.cli evaluate "$OUT" --card "tf2rnn/$NAME" --card-extra "$OUT/cells.md" --output "$OUT/eval"
$PY -m tf2rnn_hf.cli plot "$OUT" --results "$OUT/eval/results.json" --output "$OUT/eval"
end=$(date +%s)
mkdir -p "model_cards/$NAME" benchmarks/quality/results
cp "$OUT/README.md" "model_cards/$NAME/README.md"
$PY - "$OUT" "$start" "$trained" "$end" "$RESULT" <<'PY'
import json, sys
out, start, trained, end, result = sys.argv[1], *map(int, sys.argv[2:5]), sys.argv[5]
r = json.load(open(f"{out}/eval/results.json"))
r["distill"] = json.load(open(f"{out}/results.json"))
r["recipe_seconds"] = {"trajectories_and_training": trained - start, "evaluation": end - trained}
json.dump(r, open(result, "w"), indent=1)
PY
echo "release $NAME done in $((end - start)) s"
