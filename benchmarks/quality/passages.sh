#!/usr/bin/env bash
# Drift past sentence length (issue 10): fine-tune a trained student for TRAIN_MINUTES of one core on
# passages (consecutive training sentences joined to 100+ tokens, a target every 4th prefix), against a
# control fine-tuned as long on the same sentences unjoined; then held-out sentence fidelity and the
# `long` suite (100-128-token passages) for the base and both fine-tunes. Rollout loss, same rate.
# A third fine-tune (mixed) joins half the sentences and keeps the rest; two more (mix-random, mix-grouped)
# compare batching for the release recipe's mix.
#   BASE (default outputs/tf2rnn-minilm-gru: the GRU-768 release these rows fine-tuned)
#   TRAIN_TEXTS (sentences, default 20000)  TRAIN_MINUTES (default 10)
set -euo pipefail
cd "$(dirname "$0")/../.."
BASE=${BASE:-outputs/tf2rnn-minilm-gru}
source benchmarks/quality/common.sh
finetune_common
# The two fine-tunes run side by side, one core each.
run_one passages control &
run_one passages joined --passage_tokens 100 --max_tokens 128 --stride 4 &
wait
# Half the sentences joined, half as they are: passages without giving up sentence fidelity?
run_one passages mixed --passage_tokens 100 --passage_fraction 0.5 --max_tokens 128 --stride 4
# The release recipe's mix (sentences keep every prefix, passages every 4th), side by side without and with
# length-grouped batches: mixed at random, every batch that draws a passage pads its sentences to its length.
mix=(--passage_tokens 100 --passage_fraction 0.5 --passage_stride 4 --max_tokens 128)
run_one passages mix-random "${mix[@]}" &
run_one passages mix-grouped "${mix[@]}" --train_sampling_strategy group_by_length &
wait
for name in base control joined mixed mix-random mix-grouped; do
  [ -f "$OUT/passages-eval-$name.json" ] && continue
  model=$BASE; [ "$name" = base ] || model=outputs/passages-$name
  OMP_NUM_THREADS=1 $PY -m tf2rnn_hf.cli evaluate "$model" --suites fidelity,long --no-baselines \
    --output "outputs/passages-eval-$name" > "$OUT/passages-eval-$name.log" 2>&1 &
done
wait
for name in base control joined mixed mix-random mix-grouped; do cp "outputs/passages-eval-$name/results.json" "$OUT/passages-eval-$name.json"; done
$PY benchmarks/quality/report.py > docs/results.md && sed -n '/Drift past sentence length/,/^### Quality/p' docs/results.md
