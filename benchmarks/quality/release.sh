#!/usr/bin/env bash
# The release recipes, each as one job on 2 CPU cores: corpus and teacher trajectories split over two
# processes (one core each), TRAIN_MINUTES of training, then the full evaluation suite and the model card
# (with the cell comparison). Pass a fresh --cache_dir in EXTRA to time it from nothing. Then
# `bash benchmarks/quality/transfer.sh` scores the released student on each source's held-out sentences and adds
# that table to its card.
#   tf2rnn-minilm (the default NAME; since session 52): PRESET=inherited-fast with EXTRA="--num_hidden_layers 2" and
#     SLOTS=32: two whole layers inherited from the teacher, 300,000 sentences drawn across sources, a target at
#     every third prefix, trained in one process with both cores, bf16 products and the row-sparse token table at the
#     preset's lr 5e-4 with its 128-slot cache, then released with a 32-slot cache (the same weights; the slot count
#     is an inference budget: results/slots-*.json). It ran on a Zen 4 CPU (AVX512-BF16: bf16 by default there); on
#     an AVX2 CPU, TRAIN_TEXTS=150000 keeps it in 90 minutes.
#   tf2rnn-minilm-int4: the default's recipe and a 3,000-step int4 second stage (session 55, on a Zen 5 CPU, whose 45
#     minutes train 8.9 epochs where Zen 4's trained 5.0): NAME=tf2rnn-minilm-int4 PRESET=inherited-fast
#     EXTRA="--num_hidden_layers 2" SLOTS=32 INT4_STEPS=3000. It ran as `INT4_STEPS=3000 bash release.sh` (the default
#     NAME, the same options), its folders and release.json then renamed to these names.
#   tf2rnn-minilm-l1: the default from 2026-11-26 to session 51, one inherited layer by the same recipe and a
#     128-slot cache: NAME=tf2rnn-minilm-l1 PRESET=inherited-fast (results/release-tf2rnn-minilm-l1.json, written by
#     this script as its default NAME in session 49; its lr 3e-4 release, on an AVX512-VNNI + AMX CPU, is kept as
#     results/release-lr3e-4.json).
#   tf2rnn-minilm-l2: two whole inherited layers by the same recipe at lr 5e-4, the recipe's second seed (session 51):
#     NAME=tf2rnn-minilm-l2 PRESET=inherited-fast EXTRA="--num_hidden_layers 2 --learning_rate 5e-4 --seed 1". Its
#     first (seed 0) is student.sh's session-50 row.
#   tf2rnn-minilm-l3: the middle tier, three whole inherited layers by the same recipe at lr 5e-4 (session 47):
#     NAME=tf2rnn-minilm-l3 PRESET=inherited-fast EXTRA="--num_hidden_layers 3 --learning_rate 5e-4". Its lr 3e-4 run
#     (session 46, from an empty cache) is kept as results/release-tf2rnn-minilm-l3-lr3e-4.json.
#   tf2rnn-minilm-l3-int4 (session 63's candidate for the default, not yet run): the same three layers at the default's
#     32 slots with an int4 stage, at about two int8 layers' keystroke (docs/experiments.md, session 63):
#     NAME=tf2rnn-minilm-l3-int4 PRESET=inherited-fast EXTRA="--num_hidden_layers 3 --learning_rate 5e-4" SLOTS=32
#     INT4_STEPS=3000.
#   tf2rnn-minilm-l6-tail2-int4 (session 66's candidate): all six layers, the upper four waiting for each word's end
#     (--tail_layers 2: a keystroke inside a word runs two), at 32 slots with an int4 stage:
#     NAME=tf2rnn-minilm-l6-tail2-int4 PRESET=inherited-fast EXTRA="--num_hidden_layers 6 --learning_rate 3e-4
#     --tail_layers 2" SLOTS=32 INT4_STEPS=3000. With INT4_EXTRA="--weight_scale learned" (session 67, its stage run
#     from this fp32 stage by student.sh): 0.9619 / 0.741 / STS-B 81.23 where max-abs scales gave 0.9575 / 0.727.
#   tf2rnn-minilm-l6-tail2-open8-int4 (session 77's candidate, not yet run): session 66's with the newest 8 tokens open
#     in its four per-word layers (at 2,000 steps +0.069 NA@10 over causal ones for 2.86x a step; the fused step runs
#     it, a keystroke inside a word at the causal cost): NAME=tf2rnn-minilm-l6-tail2-open8-int4 PRESET=inherited-fast
#     EXTRA="--num_hidden_layers 6 --learning_rate 3e-4 --tail_layers 2 --tail_open_tokens 8" SLOTS=32 INT4_STEPS=3000.
#     It needs a CPU with native bf16 (AVX512-BF16 or AMX: the recipe's --bf16 default) or a GPU to fit 90 minutes.
#     Session 78 started it on a Zen 3 with neither (TRAIN_TEXTS=150000, fp32 products): the trajectories took 50
#     minutes and training ran 0.42 steps a second (45 minutes: ~1,100 steps; session 77's 2,000 steps of eight ran
#     in bf16 at ~1 a second), so it was stopped at step 250 (docs/experiments.md, session 78).
#   tf2rnn-minilm-l6: all six layers, causal, by the same recipe at lr 3e-4, the recipe's second seed (session 50):
#     NAME=tf2rnn-minilm-l6 PRESET=inherited-fast EXTRA="--num_hidden_layers 6 --learning_rate 3e-4 --seed 1". Its
#     first (seed 0) is student.sh's session-49 row.
#   tf2rnn-minilm-gru: the GRU-768 released before it, 200,000 sentences (the corpus's first rows), every prefix;
#     DDP training on two processes. Its results and card stay as release-tf2rnn-minilm-gru.json and model_cards/.
#   tf2rnn-minilm-long: the GRU with half the sentences joined into 100+-token passages (a target every 4th prefix),
#     so the state holds past sentence length (results/passages-*.json); training in ONE process with both
#     cores (on two cores it outran DDP: results/ddp.json).
#   PRESET=<name>: a shipped preset's recipe instead of the GRU's (its texts, stride and minutes; one training
#     process with both cores). The trajectories are still split over two processes.
# Variables (defaults follow NAME):
#   TRAIN_TEXTS (200000; a preset's own)  TRAIN_MINUTES (45; a preset's own)  PASSAGES (passage options; "" = sentences only)
#   DDP (1: two training processes, batch 32 each; 0: one process, batch 64, THREADS threads, default 2; 0 with PRESET)
#   EXTRA: more distill options for both steps (later options win, e.g. EXTRA="--hidden_size 384")
#   SLOTS: the cache slot count written into the released config after training (the weights train at the
#     preset's); "" keeps the trained one (32 for tf2rnn-minilm, "" otherwise)
#   INT4_STEPS: after training, a second stage of that many steps through int4 weights (--weight_bits 4, lr 1e-4)
#     from the trained student, which stays in $OUT-fp32; the released student is the int4 one (its fused step reads
#     int4 products on an AVX512-VNNI or AVX2 CPU). "" (the default): no second stage.
#   INT4_EXTRA: more options for that stage (--weight_scale learned: the int4 scales trained too, session 67;
#     --weight_keep down: that product left off the int4 grid, read as int8, session 71; --weight_group 128: a scale
#     per 128 columns of a row, read as int4, session 72; --weight_keep up down: the feed-forward at int8, 0.003 NA@10
#     under fp32 on a 2,000-step six-layer student for ~10% of the keystroke at 256 tokens, session 73; --weight_keep
#     cell.layers.2 cell.layers.3 cell.layers.4 cell.layers.5: a --tail_layers 2 student's per-word layers at int8 and
#     the keystroke's two at int4, 0.005 under fp32 with --weight_group 128 --weight_scale learned at int4's single
#     keystroke, session 74; not yet run at this budget)
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
NAME=${NAME:-tf2rnn-minilm}
OUT=${OUT:-outputs/$NAME}
RESULT=benchmarks/quality/results/release.json
[ "$NAME" = tf2rnn-minilm ] || RESULT=benchmarks/quality/results/release-$NAME.json
if [ "$NAME" = tf2rnn-minilm ]; then
  PRESET=${PRESET-inherited-fast}; EXTRA=${EXTRA---num_hidden_layers 2}; SLOTS=${SLOTS-32}
else PRESET=${PRESET:-}; fi
[ -z "$PRESET" ] || DDP=${DDP:-0}
case "$NAME" in
  *-long) PASSAGES=${PASSAGES---passage_tokens 100 --passage_fraction 0.5 --passage_stride 4 --max_tokens 128}
          DDP=${DDP:-0} ;;
  *) PASSAGES=${PASSAGES-}; DDP=${DDP:-1} ;;
esac
start=$(date +%s)
LAUNCH2="$PY -m accelerate.commands.launch --multi_gpu --num_processes 2 --num_machines 1 --mixed_precision no --dynamo_backend no"
# Data options: the same in both steps, so training finds every trajectory the first step cached.
if [ -n "$PRESET" ]; then
  data=(--preset "$PRESET" ${TRAIN_TEXTS:+--max_train_texts $TRAIN_TEXTS} --max_eval_texts 1000 $PASSAGES ${EXTRA:-})
else
  data=(--max_train_texts "${TRAIN_TEXTS:-200000}" --max_eval_texts 1000 $PASSAGES ${EXTRA:-})
fi
OMP_NUM_THREADS=1 $LAUNCH2 examples/distill.py "${data[@]}" --trajectories_only true --report_to none \
  --disable_tqdm true --output_dir "$OUT"
cached=$(date +%s)
if [ "$DDP" = 1 ]; then train=($LAUNCH2); threads=1; batch=32  # the global batch stays 64
else train=($PY); threads=${THREADS:-2}; batch=64; fi
FIRST=$OUT
[ -z "${INT4_STEPS:-}" ] || FIRST=$OUT-fp32
if [ -n "$PRESET" ]; then
  OMP_NUM_THREADS=$threads "${train[@]}" examples/distill.py "${data[@]}" ${TRAIN_MINUTES:+--train_minutes $TRAIN_MINUTES} \
    --per_device_train_batch_size $batch --report_to none --disable_tqdm true --output_dir "$FIRST"
else
  OMP_NUM_THREADS=$threads "${train[@]}" examples/distill.py --hidden_size 768 --per_device_train_batch_size $batch \
    --learning_rate 2e-3 --warmup_steps 0.03 --train_minutes "${TRAIN_MINUTES:-45}" --transition_until 0.3 \
    --anneal 0.2 --report_to none --logging_steps 100 --save_strategy no --disable_tqdm true --output_dir "$FIRST" \
    "${data[@]}"
fi
if [ -n "${INT4_STEPS:-}" ]; then  # the same data (cached), the trained weights, then steps through int4 weights
  OMP_NUM_THREADS=$threads "${train[@]}" examples/distill.py "${data[@]}" --init_from "$FIRST" --weight_bits 4 \
    --learning_rate 1e-4 --train_minutes 0 --max_steps "$INT4_STEPS" --per_device_train_batch_size $batch \
    ${INT4_EXTRA:-} --report_to none --disable_tqdm true --output_dir "$OUT"
fi
trained=$(date +%s)
[ -z "${SLOTS:-}" ] || $PY benchmarks/quality/set_slots.py "$OUT" "$SLOTS"
$PY benchmarks/quality/report.py --cells > "$OUT/cells.md"
$PY -m tf2rnn_hf.cli evaluate "$OUT" --card "tf2rnn/$NAME" --card-extra "$OUT/cells.md" --output "$OUT/eval"
$PY -m tf2rnn_hf.cli plot "$OUT" --results "$OUT/eval/results.json" --output "$OUT/eval"
end=$(date +%s)
mkdir -p "model_cards/$NAME" benchmarks/quality/results
cp "$OUT/README.md" "model_cards/$NAME/README.md"
$PY - "$OUT" "$start" "$cached" "$trained" "$end" "$RESULT" <<'PY'
import json, sys
out, start, cached, trained, end, result = sys.argv[1], *map(int, sys.argv[2:6]), sys.argv[6]
r = json.load(open(f"{out}/eval/results.json"))
r["distill"] = json.load(open(f"{out}/results.json"))
r["recipe_seconds"] = {"trajectories_and_training": trained - start, "trajectories": cached - start,
                       "evaluation": end - trained}
json.dump(r, open(result, "w"), indent=1)
PY
echo "release $NAME done in $((end - start)) s"
