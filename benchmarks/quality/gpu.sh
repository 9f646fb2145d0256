#!/usr/bin/env bash
# The scale point on one GPU (results/gpu-*.json): the trajectories of TEXTS sentences on the GPU teacher, then
# MINUTES of training with loader workers (the collator, not the GPU, bounds a small student's step).
#   CELL=gru (default): GRU-$HIDDEN at batch 256, lr 3e-3 (the kept runs: gpu-h100-gru768, gpu-h100-gru1024).
#   CELL=inherited: the teacher's own layers over a bounded cache, as the CPU card student (--preset
#     inherited-long: six tova_attention layers, eight open tokens, a target at every third prefix).
#   CELL=inherited-fast: the released fast tier (--preset inherited-fast: one layer).
#   The inherited cells keep their preset's recipe (length-grouped batches of 64, lr 3e-4, the last step weighted
#   4, position-weighted pooling) unless BATCH or LRS say otherwise.
#   HIDDEN (768)  TEXTS (300000)  MINUTES (5)  OUT (outputs/gpu-$CELL)  NAME (results file name)  BATCH
#   LRS: learning rates trained side by side on the one GPU after one shared trajectory pass, each its own
#     process with its share of the loader workers; run i writes $OUT-lr$LR and results/$NAME-lr$LR.json
#   DEADLINE: seconds from this script's start by which every run has packed; the training minutes shrink to fit
#     once the trajectories are done (a lent machine stops a command at 10 minutes, and their time varies)
#   EXTRA: more distill options (later options win)  PACK: a folder to put each student in for the trip back
# A lent machine reaches no network: build `.carry` here first (`bash benchmarks/quality/gpu_carry.sh`), name
# it in the device run's carry, and this script takes the teacher, corpus and wheels from it. The trip back
# holds at most 8 files of 16 MiB: PACK gets each student as gpu_pack.py packs it (fp16, in 15 MiB parts), and
# here `python benchmarks/quality/gpu_pack.py unpack PACKED DIR` makes it a whole folder for `tf2rnn evaluate`.
# One device call (carry: .carry) within a 15-minute device budget, e.g.
#   PYTHONUNBUFFERED=1 CELL=inherited-fast TEXTS=470000 BATCH=256 LRS="3e-4 6e-4" DEADLINE=540 PACK=$OUT \
#     bash benchmarks/quality/gpu.sh 2>&1 | tee $OUT/gpu.log
# (The offline corpus holds 472,249 training sentences; `--max_train_texts` beyond that takes them all. The
# offline-xl corpus, 1,095,879, travels in two calls: see gpu_carry.sh.)
set -euo pipefail
cd "$(dirname "$0")/../.."
START=$(date +%s)
PY=${PY:-python3}
CELL=${CELL:-gru}
HIDDEN=${HIDDEN:-768}
if [ -d .carry ]; then
  if ! $PY -c "import datasets, evaluate" 2>/dev/null; then  # the device image lacks them
    $PY -m pip install -q --no-index --no-deps --no-compile --target /tmp/tf2rnn-site .carry/wheels/*.whl
    export PYTHONPATH="/tmp/tf2rnn-site${PYTHONPATH:+:$PYTHONPATH}"
  fi
  $PY -c "import tf2rnn_hf" 2>/dev/null || export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
  TRAIN=.carry/train.jsonl.gz
  [ ! -f .carry-text/train.jsonl.xz ] || TRAIN=.carry-text/train.jsonl.xz  # CORPUS=offline-xl's second call
  DATA=(--teacher .carry/teacher --corpus "$TRAIN" --eval_corpus .carry/heldout.jsonl.gz)
else
  DATA=()
fi
case "$CELL" in
  gru) OUT=${OUT:-outputs/gpu-gru$HIDDEN}; NAME=${NAME:-gpu-gru$HIDDEN}
       MODEL=(--hidden_size "$HIDDEN" --per_device_train_batch_size 256 --learning_rate 3e-3 --transition_until 0.3
              --anneal 0.2) ;;
  inherited) MODEL=(--preset inherited-long) ;;
  inherited-fast) MODEL=(--preset inherited-fast) ;;
  *) echo "CELL must be gru, inherited or inherited-fast, not $CELL" >&2; exit 2 ;;
esac
OUT=${OUT:-outputs/gpu-$CELL}; NAME=${NAME:-gpu-$CELL}
[ -z "${BATCH:-}" ] || MODEL+=(--per_device_train_batch_size "$BATCH")
LRS=${LRS:-}
RUNS=(${LRS:-""})
WORKERS=$(( 14 / ${#RUNS[@]} < 8 ? 14 / ${#RUNS[@]} : 8 ))
COMMON=("${DATA[@]}" "${MODEL[@]}" --max_train_texts "${TEXTS:-300000}" --max_eval_texts 1000 --token_budget 65536
        --warmup_steps 0.03 --dataloader_num_workers "$WORKERS" --report_to none --logging_steps 200
        --save_strategy no --disable_tqdm true)

MINUTES=${MINUTES:-5}
if [ -n "${DEADLINE:-}" ] || [ ${#RUNS[@]} -gt 1 ]; then
  # The trajectories first, once for every run (runs started together would each compute them), then with a
  # DEADLINE training sized to what is left, less a reserve for loading, the held-out fidelity and packing.
  $PY examples/distill.py "${COMMON[@]}" --output_dir "$OUT-trajectories" --trajectories_only true ${EXTRA:-}
  if [ -n "${DEADLINE:-}" ]; then
    LEFT=$(( DEADLINE - ($(date +%s) - START) - ${RESERVE:-75} ))
    MINUTES=$($PY -c "print(round(max(0.5, min($MINUTES, $LEFT / 60)), 2))")
  fi
  echo "gpu.sh: trajectories took $(( $(date +%s) - START )) s; training $MINUTES minutes per run"
fi
mkdir -p benchmarks/quality/results
run() {  # $1: a learning rate, or empty for the cell's own
  local out=$OUT name=$NAME lr=()
  if [ -n "$1" ]; then out=$OUT-lr$1; name=$NAME-lr$1; lr=(--learning_rate "$1"); fi
  $PY examples/distill.py "${COMMON[@]}" "${lr[@]}" --train_minutes "$MINUTES" --output_dir "$out" ${EXTRA:-}
  cp "$out/results.json" "benchmarks/quality/results/$name.json"
  [ -z "${PACK:-}" ] || $PY benchmarks/quality/gpu_pack.py pack "$out" "$PACK/$name"
}
PIDS=()
for lr in "${RUNS[@]}"; do run "$lr" > "$OUT-run${lr:+-lr$lr}.log" 2>&1 & PIDS+=($!); done
FAILED=0
for i in "${!PIDS[@]}"; do
  lr=${RUNS[$i]}
  wait "${PIDS[$i]}" || { FAILED=1; echo "gpu.sh: the run${lr:+ at lr $lr} failed" >&2; }
  tail -n 25 "$OUT-run${lr:+-lr$lr}.log"
  [ -z "${PACK:-}" ] || cp "$OUT-run${lr:+-lr$lr}.log" "$PACK/" 2>/dev/null || true
done
echo "gpu.sh: done in $(( $(date +%s) - START )) s"
exit $FAILED
