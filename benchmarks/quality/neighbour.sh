#!/usr/bin/env bash
# Neighbour structure (issue 10): neighbour agreement@10 is where the student is furthest from the teacher.
# Fine-tune the release student for TRAIN_MINUTES of one core with the rollout loss plus the neighbour loss
# (its similarities to a bank of 8,192 teacher embeddings of training sentences, softmax-KL at temperature
# 0.05) at two weights, side by side; the control is passages.sh's (the same fine-tune, rollout alone, also
# run two side by side). Then held-out fidelity and the retrieval/STS suites for base, control and both.
#   BASE (default outputs/tf2rnn-minilm-gru: the GRU-768 release these rows fine-tuned)
#   TRAIN_TEXTS (default 20000)  TRAIN_MINUTES (default 10)
set -euo pipefail
cd "$(dirname "$0")/../.."
BASE=${BASE:-outputs/tf2rnn-minilm-gru}
source benchmarks/quality/common.sh
finetune_common
run_one neighbour w0.2 --neighbour_weight 0.2 &
run_one neighbour w1 --neighbour_weight 1.0 &
wait
evaluate() {  # name model
  [ -f "$OUT/neighbour-eval-$1.json" ] && return
  OMP_NUM_THREADS=1 $PY -m tf2rnn_hf.cli evaluate "$2" --suites fidelity,bible,wordnet,lee --no-baselines \
    --output "outputs/neighbour-eval-$1" > "$OUT/neighbour-eval-$1.log" 2>&1
  cp "outputs/neighbour-eval-$1/results.json" "$OUT/neighbour-eval-$1.json"
}
evaluate base "$BASE" & evaluate control outputs/passages-control & wait
evaluate w0.2 outputs/neighbour-w0.2 & evaluate w1 outputs/neighbour-w1 & wait
$PY benchmarks/quality/report.py > docs/results.md && sed -n '/Neighbour structure/,/^### Quality/p' docs/results.md
