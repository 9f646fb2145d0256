#!/usr/bin/env bash
# The cell comparison (issue 10): every cell at about 2.9M recurrent parameters, the same data (the
# ablation's trajectory cache), the same loss (rollout, the one every cell supports) and the same CPU
# time (TRAIN_MINUTES of one core each). Results: benchmarks/quality/results/cells-*.json.
set -euo pipefail
cd "$(dirname "$0")/../.."
MIN=${TRAIN_MINUTES:-5}
common=(--max_train_texts "${TRAIN_TEXTS:-60000}" --max_eval_texts 1000 --per_device_train_batch_size 64
        --learning_rate 2e-3 --warmup_steps 0.03 --train_minutes "$MIN" --report_to none --logging_steps 50
        --save_strategy no --disable_tqdm true)
source benchmarks/quality/common.sh
run() { run_one cells "$@"; }
run gru --cell_type gru --hidden_size 768
run lstm --cell_type lstm --hidden_size 640
run linear_attention --cell_type linear_attention --hidden_size 400 --num_hidden_layers 2 --learning_rate 1e-3
run rem --cell_type rem --hidden_size 400 --num_hidden_layers 2 --learning_rate 1e-3
run multistate-k8 --cell_type multistate --hidden_size 864 --num_slots 8
run multistate-k32 --cell_type multistate --hidden_size 864 --num_slots 32
