#!/usr/bin/env bash
# The scale point on one GPU (results/gpu-*.json): the trajectories of TEXTS sentences on the GPU teacher, then
# MINUTES of training with loader workers (the collator, not the GPU, bounds a small student's step).
#   CELL=gru (default): GRU-$HIDDEN at batch 256, lr 3e-3 (the kept runs: gpu-h100-gru768, gpu-h100-gru1024).
#   CELL=inherited: the teacher's own layers over a bounded cache, as the CPU card student (--preset
#     inherited-long: six tova_attention layers, eight open tokens, a target at every third prefix).
#   CELL=inherited-fast: the released fast tier (--preset inherited-fast: one layer).
#   The inherited cells keep their preset's recipe (length-grouped batches of 64, lr 3e-4 for six layers and 5e-4 for
#   one since session 49, the last step weighted 4, position-weighted pooling) unless BATCH, LRS or SHAPES say
#   otherwise (every GPU run so far named its rate).
#   HIDDEN (768)  TEXTS (300000)  MINUTES (5)  OUT (outputs/gpu-$CELL)  NAME (results file name)  BATCH
#   LRS: learning rates trained side by side on the one GPU after one shared trajectory pass, each its own
#     process with its share of the loader workers; run i writes $OUT-lr$LR and results/$NAME-lr$LR.json
#   DEADLINE: seconds from this script's start by which every run has packed; the training minutes shrink to fit
#     once the trajectories are done (a lent machine stops a command at 10 minutes, and their time varies)
#   SHAPES: student shapes trained side by side the same way, `label=options` separated by `;`, e.g.
#     SHAPES="l2-512=--num_hidden_layers 2 --intermediate_size 512;l2=--num_hidden_layers 2": every shape at every
#     rate in LRS, each run writing $OUT-$label[-lr$LR] and results/$NAME-$label[-lr$LR].json
#   TRAJECTORY_WORKERS (8): processes that tokenise and write trajectory shards beside the teacher
#   EXTRA: more distill options for every run (later options win)  PACK: a folder to put each student in for the
#     trip back
#   PREFLIGHT=1: beside the trajectory pass, every shape trains a few seconds on 256 texts and is packed; if one
#     fails, the script stops there (a fault only the device shows, as session 36's student build on the GPU, then
#     costs a lease seconds, not the trajectories' minutes)
# A lent machine reaches no network: build `.carry` here first (`bash benchmarks/quality/gpu_carry.sh`), name
# it in the device run's carry, and this script takes the teacher, corpus and wheels from it. The trip back
# holds at most 8 files of 16 MiB: PACK gets each student as gpu_pack.py packs it (fp16, in 15 MiB parts), and
# here `python benchmarks/quality/gpu_pack.py unpack PACKED DIR` makes it a whole folder for `tf2rnn evaluate`.
# One device call (carry: .carry) within a 15-minute device budget, e.g. session 45's (the device's own $OUT is the
# folder that comes back, so this script's OUT is named; the trip back takes 8 files of 16 MiB, so the packs travel
# as one xz'd tar cut in parts: two inherited students are ~65 MB in fp16, 60 MB in xz; here
# `cat pack.txz.* | xz -d | tar xf -`)
#   R=$OUT; mkdir -p outputs; PYTHONUNBUFFERED=1 CELL=inherited-fast TEXTS=470000 BATCH=256 \
#     SHAPES="l3=--num_hidden_layers 3 --learning_rate 6e-4;l2-lr1e-3=--num_hidden_layers 2 --learning_rate 1e-3" \
#     PREFLIGHT=1 MINUTES=9 DEADLINE=560 RESERVE=110 OUT=outputs/gpu NAME=gpu-h200-inherited-fast PACK=/tmp/pack \
#     bash benchmarks/quality/gpu.sh 2>&1 | tee $R/gpu.log
#   (cd /tmp && tar cf - pack | xz -T0 -1 | split -b 15M - $R/pack.txz.)
# Four or more whole layers make a pair's packs larger than one trip (session 48: four and six layers, 74 MB of xz'd
# parts): the first call moves parts aa-ad to its $OUT and leaves the rest in /tmp, and a second call within the warm
# machine's 30-s idle release (`mv /tmp/parts.ae $OUT/`, 8 s of device time) brings them. Session 48 also ran a
# row-sparse check beside the trajectory pass (its script is in docs/experiments.md, session 48).
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
  TRAIN=.carry/train.jsonl.xz
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
  # The row-sparse table is a CPU lever: on one H200 (session 48, 150 steps each way) it ran, but at a higher loss
  # per step than the dense update (0.131 against 0.117), whose step a GPU makes cheap: the GPU keeps the dense one.
  inherited-fast) MODEL=(--preset inherited-fast --sparse_embeddings false) ;;
  *) echo "CELL must be gru, inherited or inherited-fast, not $CELL" >&2; exit 2 ;;
esac
OUT=${OUT:-outputs/gpu-$CELL}; NAME=${NAME:-gpu-$CELL}
mkdir -p "$(dirname "$OUT")"  # outputs/ is git-ignored: a bare device machine has none
[ -z "${BATCH:-}" ] || MODEL+=(--per_device_train_batch_size "$BATCH")
LRS=${LRS:-}
RATES=(${LRS:-""})
IFS=';' read -r -a SHAPE_LIST <<< "${SHAPES:-}"
[ ${#SHAPE_LIST[@]} -gt 0 ] || SHAPE_LIST=("")
RUNS=()  # each "label=options|rate"; label, options and rate may be empty
for shape in "${SHAPE_LIST[@]}"; do
  [ -z "$shape" ] || [[ "$shape" == *=* ]] || { echo "SHAPES: '$shape' is not label=options" >&2; exit 2; }
  for lr in "${RATES[@]}"; do RUNS+=("$shape|$lr"); done
done
WORKERS=$(( 14 / ${#RUNS[@]} < 8 ? 14 / ${#RUNS[@]} : 8 ))
COMMON=("${DATA[@]}" "${MODEL[@]}" --max_train_texts "${TEXTS:-300000}" --max_eval_texts 1000 --token_budget 65536
        --warmup_steps 0.03 --dataloader_num_workers "$WORKERS" --report_to none --logging_steps 200
        --save_strategy no --disable_tqdm true)

suffix() {  # $1: a RUNS entry -> its name's suffix, e.g. -l2-512-lr6e-4
  local shape=${1%|*} lr=${1##*|}
  echo "${shape:+-${shape%%=*}}${lr:+-lr$lr}"
}
MINUTES=${MINUTES:-5}
preflight() {  # every shape at the first rate: 256 texts (a copy, so that no corpus cache is built twice at once)
  local dir=$OUT-preflight data=(${DATA[@]+"${DATA[@]}"}) entry options
  mkdir -p "$dir"
  if [ -d .carry ]; then
    { case $TRAIN in *.xz) xzcat "$TRAIN" ;; *) zcat "$TRAIN" ;; esac } | head -n 256 > "$dir/train.jsonl" || true
    zcat .carry/heldout.jsonl.gz | head -n 64 > "$dir/heldout.jsonl" || true
    data=(--teacher .carry/teacher --corpus "$dir/train.jsonl" --eval_corpus "$dir/heldout.jsonl")
  fi
  for shape in "${SHAPE_LIST[@]}"; do
    entry="$shape|${RATES[0]}" options=()
    [ -z "$shape" ] || read -r -a options <<< "${shape#*=}"
    $PY examples/distill.py ${data[@]+"${data[@]}"} "${MODEL[@]}" --max_train_texts 256 --max_eval_texts 64 \
      --per_device_train_batch_size 16 --train_minutes 0.1 --report_to none --save_strategy no --disable_tqdm true \
      ${RATES[0]:+--learning_rate "${RATES[0]}"} ${options[@]+"${options[@]}"} \
      --output_dir "$dir/run$(suffix "$entry")" ${EXTRA:-} || return 1  # (set -e is off in a function under `if`)
    $PY benchmarks/quality/gpu_pack.py pack "$dir/run$(suffix "$entry")" "$dir/packed$(suffix "$entry")" || return 1
  done
}
if [ -n "${DEADLINE:-}${PREFLIGHT:-}" ] || [ ${#RUNS[@]} -gt 1 ]; then
  # The trajectories first, once for every run (runs started together would each compute them), then with a
  # DEADLINE training sized to what is left, less a reserve for loading, the held-out fidelity and packing.
  # Shard workers tokenise and write while the GPU teacher embeds (one core bound session 44's pass: 168 s).
  trajectory_pass() {  # exec: the pid that `kill` gets is python's own
    exec $PY examples/distill.py "${COMMON[@]}" --output_dir "$OUT-trajectories" --trajectories_only true \
      --trajectory_workers "$1" ${EXTRA:-}
  }
  trajectory_pass "${TRAJECTORY_WORKERS:-8}" &
  TRAJECTORIES=$!
  if [ -n "${PREFLIGHT:-}" ]; then
    if ! preflight > "$OUT-preflight.log" 2>&1; then
      tail -n 40 "$OUT-preflight.log" || true  # under set -e a failed tail would leave the pass running
      echo "gpu.sh: the preflight failed (log above: $OUT-preflight.log); stopping the trajectory pass" >&2
      kill "$TRAJECTORIES" 2>/dev/null || true
      exit 3
    fi
    echo "gpu.sh: preflight passed after $(( $(date +%s) - START )) s"
  fi
  if ! wait "$TRAJECTORIES"; then  # finished shards are kept: one process finishes the rest
    echo "gpu.sh: the trajectory pass with shard workers failed; finishing it in one process" >&2
    (trajectory_pass 0)
  fi
  if [ -n "${DEADLINE:-}" ]; then
    LEFT=$(( DEADLINE - ($(date +%s) - START) - ${RESERVE:-75} ))
    MINUTES=$($PY -c "print(round(max(0.5, min($MINUTES, $LEFT / 60)), 2))")
  fi
  echo "gpu.sh: trajectories took $(( $(date +%s) - START )) s; training $MINUTES minutes per run"
fi
mkdir -p benchmarks/quality/results
run() {  # $1: a RUNS entry
  local shape=${1%|*} lr=${1##*|} tail
  tail=$(suffix "$1")
  local out=$OUT$tail name=$NAME$tail rate=() options=()
  [ -z "$lr" ] || rate=(--learning_rate "$lr")
  [ -z "$shape" ] || read -r -a options <<< "${shape#*=}"
  $PY examples/distill.py "${COMMON[@]}" "${rate[@]}" "${options[@]}" --train_minutes "$MINUTES" \
    --output_dir "$out" ${EXTRA:-}
  cp "$out/results.json" "benchmarks/quality/results/$name.json"
  [ -z "${PACK:-}" ] || $PY benchmarks/quality/gpu_pack.py pack "$out" "$PACK/$name"
}
PIDS=()
for entry in "${RUNS[@]}"; do run "$entry" > "$OUT-run$(suffix "$entry").log" 2>&1 & PIDS+=($!); done
FAILED=0
for i in "${!PIDS[@]}"; do
  log=$OUT-run$(suffix "${RUNS[$i]}").log
  wait "${PIDS[$i]}" || { FAILED=1; echo "gpu.sh: the run $(suffix "${RUNS[$i]}") failed" >&2; }
  tail -n 25 "$log"
  [ -z "${PACK:-}" ] || cp "$log" "$PACK/" 2>/dev/null || true
done
echo "gpu.sh: done in $(( $(date +%s) - START )) s"
exit $FAILED
