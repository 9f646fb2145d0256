#!/usr/bin/env bash
# Loss ablation at equal CPU time (issue 4): rollout only, transition only, a transition->rollout mix,
# and rollout plus the in-batch similarity loss. Same data (TRAIN_TEXTS offline-corpus sentences, full
# token trajectories), same student (GRU-768, teacher-output token init). Runs go two at a time with one
# thread each, so each run gets TRAIN_MINUTES of one core; progress, the loss schedule and the
# learning-rate decay follow the clock. Results: benchmarks/quality/results/ablation-*.json.
set -euo pipefail
cd "$(dirname "$0")/../.."
MIN=${TRAIN_MINUTES:-10}
TEXTS=${TRAIN_TEXTS:-60000}
common=(--max_train_texts "$TEXTS" --max_eval_texts 1000 --hidden_size 768 --per_device_train_batch_size 64
        --learning_rate 2e-3 --warmup_steps 0.03 --train_minutes "$MIN" --report_to none --logging_steps 50
        --save_strategy no --disable_tqdm true --dataloader_num_workers 0)
source benchmarks/quality/common.sh
run() { run_one ablation "$@"; }
# Build the shared trajectory cache once, then train in pairs.
OMP_NUM_THREADS=2 $PY examples/distill.py "${common[@]}" --train_minutes 0.01 --output_dir outputs/ablation-cache \
  > "$OUT/ablation-cache.log" 2>&1
run rollout & run mix --transition_until 0.3 --anneal 0.2 & wait
run rollout-similarity --similarity_weight 1.0 & run transition --transition_until 1.0 & wait
