#!/usr/bin/env bash
# Loss ablation at equal CPU time (issue 4): transition only, rollout only, and mixes, same data, same
# student (GRU-768, teacher-output token init), each trained for TRAIN_MINUTES on this machine.
# Results: benchmarks/quality/results/ablation-*.json (each with the held-out fidelity table).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
MIN=${TRAIN_MINUTES:-10}
TEXTS=${TRAIN_TEXTS:-60000}
OUT=benchmarks/quality/results
common=(--max_train_texts "$TEXTS" --max_eval_texts 1000 --hidden_size 768 --per_device_train_batch_size 64
        --learning_rate 2e-3 --warmup_steps 0.03 --train_minutes "$MIN" --report_to none --logging_steps 50
        --save_strategy no --disable_tqdm true)
run() {
  name=$1; shift
  [ -f "$OUT/ablation-$name.json" ] && { echo "skip $name (done)"; return; }
  $PY examples/distill.py "${common[@]}" --output_dir "outputs/ablation-$name" "$@" > "$OUT/ablation-$name.log" 2>&1
  cp "outputs/ablation-$name/results.json" "$OUT/ablation-$name.json"
  echo "done $name"
}
run rollout
run transition --transition_until 1.0
run mix --transition_until 0.3 --anneal 0.2
run rollout-similarity --similarity_weight 1.0
