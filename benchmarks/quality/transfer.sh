#!/usr/bin/env bash
# Does the student learn the teacher or the corpus? The GRU-768's quick recipe (`--preset quick-gru`, what
# `make distill` trained until 2026-11-26; 7 minutes) on 12,000 texts drawn across every source
# (--train_sample_seed 0: the corpus's first rows are all WordNet glosses), and for each source the same draw less that source's texts (--exclude_sources). Both students are then scored by
# `tf2rnn evaluate --texts` on the same held-out sentences of the source (up to 1,000), so the two rows
# differ only by whether training saw the source:
#   results/transfer-all.json                 the all-sources student: fidelity (pooled, by source), STS-B
#   results/transfer-trained-on-<source>.json the all-sources student on <source>'s held-out sentences
#   results/transfer-left-out-<source>.json   the student that never saw <source>, on the same sentences
#   results/transfer-released-<source>.json   the released student (release.sh's outputs/tf2rnn-minilm, when it
#                                             is here), on the same sentences (it trained on 150,000 sentences
#                                             drawn across all five sources)
#   results/transfer-released-gru-<source>.json  the same for RELEASED=outputs/tf2rnn-minilm-gru, the GRU-768
#                                             released before it: it trained on the corpus's first 200,000 rows
#                                             (WordNet, GCIDE, fortunes), so FOLDOC and Jargon are sources it never saw
# Table: `python benchmarks/quality/report.py` ("Transfer"). About 10 minutes a source on 2 CPU cores once the
# draw's trajectories are cached (the inherited 30,000-text run of student.sh caches them).
#   SOURCES (default: the five packages of the offline corpus)  RELEASED (outputs/tf2rnn-minilm)  PY (.venv/bin/python)
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
OUT=benchmarks/quality/results
HELD=outputs/transfer-heldout
mkdir -p "$OUT" "$HELD"
SOURCES=${SOURCES:-"wordnet-base fortunes dict-gcide dict-foldoc dict-jargon"}
RELEASED=${RELEASED:-outputs/tf2rnn-minilm}
name=$(basename "$RELEASED")
TAG=transfer-released; [ "$name" = tf2rnn-minilm ] || TAG="transfer-released-${name#tf2rnn-minilm-}"
DRAW=(--preset quick-gru --max_train_texts 12000 --train_sample_seed 0 --disable_tqdm true)
with_distill() {  # EVAL DISTILL RESULT: an evaluation's results, with the training run's own under "distill"
  $PY - "$@" <<'PY'
import json, sys
evaluation, distill, result = sys.argv[1:]
r = json.load(open(evaluation))
r["distill"] = json.load(open(distill))
json.dump(r, open(result, "w"), indent=1)
PY
}
if [ ! -f "$OUT/transfer-all.json" ]; then
  $PY examples/distill.py "${DRAW[@]}" --output_dir outputs/transfer-all
  $PY -m tf2rnn_hf.cli evaluate outputs/transfer-all --suites fidelity,sts-b --output outputs/transfer-all/eval
  with_distill outputs/transfer-all/eval/results.json outputs/transfer-all/results.json "$OUT/transfer-all.json"
fi
for source in $SOURCES; do
  # The source's held-out sentences, as the offline corpus splits them (never trained on by any student here).
  [ -f "$HELD/$source.jsonl" ] || $PY benchmarks/quality/heldout_source.py "$source" "$HELD/$source.jsonl"
  if [ -f "$RELEASED/results.json" ] && [ ! "$OUT/$TAG-$source.json" -nt "$RELEASED/results.json" ]; then
    $PY -m tf2rnn_hf.cli evaluate "$RELEASED" --texts "$HELD/$source.jsonl" --output "$RELEASED/eval-$source"
    with_distill "$RELEASED/eval-$source/results.json" "$RELEASED/results.json" "$OUT/$TAG-$source.json"
  fi
  [ -f "$OUT/transfer-left-out-$source.json" ] && { echo "skip $source (done)"; continue; }
  $PY -m tf2rnn_hf.cli evaluate outputs/transfer-all --texts "$HELD/$source.jsonl" \
    --output "outputs/transfer-all/eval-$source"
  cp "outputs/transfer-all/eval-$source/results.json" "$OUT/transfer-trained-on-$source.json"
  $PY examples/distill.py "${DRAW[@]}" --exclude_sources "$source" --output_dir "outputs/transfer-without-$source"
  $PY -m tf2rnn_hf.cli evaluate "outputs/transfer-without-$source" --texts "$HELD/$source.jsonl" \
    --output "outputs/transfer-without-$source/eval-$source"
  with_distill "outputs/transfer-without-$source/eval-$source/results.json" \
    "outputs/transfer-without-$source/results.json" "$OUT/transfer-left-out-$source.json"
  echo "done $source"
done
# The released student's card gets the table, beside the teacher and Model2Vec (and the cell comparison
# release.sh gave it), after its hand-written recipe and cost (model_cards/<name>/extra.md) where there is one.
scored=0; for source in $SOURCES; do [ -f "$OUT/$TAG-$source.json" ] && scored=1; done
if [ "$scored" = 1 ] && [ -f "$RELEASED/eval/results.json" ]; then
  { if [ -f "model_cards/$name/extra.md" ]; then cat "model_cards/$name/extra.md"; echo; fi
    $PY benchmarks/quality/report.py --cells --peers --transfer; } > "$RELEASED/card-extra.md"
  $PY -m tf2rnn_hf.cli card "$RELEASED" "tf2rnn/$name" --extra "$RELEASED/card-extra.md"
  mkdir -p "model_cards/$name" && cp "$RELEASED/README.md" "model_cards/$name/README.md"
fi
