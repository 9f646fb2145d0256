#!/usr/bin/env bash
# The scale point on one GPU (results/gpu-h100-*.json): the trajectories of TEXTS sentences on the GPU
# teacher, then MINUTES of training with 8 loader workers (the collator, not the GPU, bounds a GRU step).
#   CELL=gru (default): GRU-$HIDDEN at batch 256, lr 3e-3 (the kept runs: gpu-h100-gru768, gpu-h100-gru1024).
#   CELL=inherited: the teacher's own layers over a bounded cache (tova_attention, issue 19's student v2), texts
#     drawn across sources, batch 64 (length-grouped), lr 3e-4, the last step weighted 4, position-weighted pooling
#     and eight open tokens, 128 slots and a target at every third prefix, as the CPU card student (--preset
#     inherited-long): with eight open tokens a target in a block's middle makes training recompute the block's
#     earlier tokens (1.14 extra tokens per token at --stride 3, 3.17 at every prefix), so the cheap GPU teacher
#     buys more texts rather than more targets per text.
#   HIDDEN (768)  TEXTS (300000)  MINUTES (5)  OUT (outputs/gpu-$CELL...)  NAME (results file name)
#   EXTRA: more distill options (later options win)  PACK: a folder to put the student in for the trip back
# A lent machine reaches no network: build `.carry` here first (`bash benchmarks/quality/gpu_carry.sh`), name
# it in the device run's carry, and this script takes the teacher, corpus and wheels from it. The trip back
# holds at most 8 files of 16 MiB: PACK gets the student as gpu_pack.py packs it (fp16, in 15 MiB parts), and
# here `python benchmarks/quality/gpu_pack.py unpack PACKED DIR` makes it a whole folder for `tf2rnn evaluate`.
# A lent machine runs 10 minutes a command and 30 a session,
# and a process started with setsid outlives its command, so: one run starting it in the background
#   setsid nohup env CELL=inherited TEXTS=460000 MINUTES=15 PACK=/tmp/pack bash benchmarks/quality/gpu.sh \
#     > /tmp/gpu.log 2>&1 < /dev/null & sleep 570; tail -5 /tmp/gpu.log
# (carry: .carry), then `sleep 570; tail -5 /tmp/gpu.log` runs until it has packed, then `cp /tmp/pack/* $OUT/`.
# (The offline corpus holds ~462,000 training sentences; `--max_train_texts` beyond that takes them all.)
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-python3}
CELL=${CELL:-gru}
HIDDEN=${HIDDEN:-768}
if [ -d .carry ]; then
  if ! $PY -c "import datasets, evaluate" 2>/dev/null; then  # the device image lacks them
    $PY -m pip install -q --no-index --no-deps --no-compile --target /tmp/tf2rnn-site .carry/wheels/*.whl
    export PYTHONPATH="/tmp/tf2rnn-site${PYTHONPATH:+:$PYTHONPATH}"
  fi
  $PY -c "import tf2rnn_hf" 2>/dev/null || export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
  DATA=(--teacher .carry/teacher --corpus .carry/train.jsonl.gz --eval_corpus .carry/heldout.jsonl.gz)
else
  DATA=()
fi
case "$CELL" in
  gru) OUT=${OUT:-outputs/gpu-gru$HIDDEN}; NAME=${NAME:-gpu-gru$HIDDEN}
       MODEL=(--hidden_size "$HIDDEN" --per_device_train_batch_size 256 --learning_rate 3e-3 --transition_until 0.3
              --anneal 0.2) ;;
  # 3e-4: the rate that led at 7, 20 and 45 CPU-minutes (student.sh rows *-lr3e-4; 1e-3 fell back); length-grouped
  # batches: random ones pad these texts to 3.3x their tokens (padding.py), and the grouped rows led at 7 and 45.
  inherited) OUT=${OUT:-outputs/gpu-inherited}; NAME=${NAME:-gpu-inherited}
       MODEL=(--cell_type tova_attention --num_slots 128 --per_device_train_batch_size 64 --learning_rate 3e-4
              --transition_until 0 --anneal 0 --train_sample_seed 0 --train_sampling_strategy group_by_length
              --final_weight 4 --pooling_position_exponent 1 --open_tokens 8 --stride 3) ;;
  *) echo "CELL must be gru or inherited, not $CELL" >&2; exit 2 ;;
esac
$PY examples/distill.py "${DATA[@]}" --max_train_texts "${TEXTS:-300000}" --max_eval_texts 1000 --token_budget 65536 \
  "${MODEL[@]}" --warmup_steps 0.03 --train_minutes "${MINUTES:-5}" --dataloader_num_workers 8 \
  --report_to none --logging_steps 200 --save_strategy no --disable_tqdm true --output_dir "$OUT" ${EXTRA:-}
mkdir -p benchmarks/quality/results
cp "$OUT/results.json" "benchmarks/quality/results/$NAME.json"
[ -z "${PACK:-}" ] || $PY benchmarks/quality/gpu_pack.py pack "$OUT" "$PACK"
