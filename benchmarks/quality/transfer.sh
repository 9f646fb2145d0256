#!/usr/bin/env bash
# Does the student learn the teacher or the corpus? For each source of the offline corpus, the quick preset
# trained on all the OTHER sources, scored on held-out sentences of the left-out source
# (results/transfer-<source>.json), beside the quick preset trained on every source and scored on each
# source's held-out sentences (results/transfer-all.json, its fidelity-by-source rows). Table:
# `python benchmarks/quality/report.py` ("Transfer").  About 12 minutes a run on 2 CPU cores, 6 runs.
#   SOURCES (default: the five packages of the offline corpus)  PY (.venv/bin/python)
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
OUT=benchmarks/quality/results
mkdir -p "$OUT"
SOURCES=${SOURCES:-"wordnet-base fortunes dict-gcide dict-foldoc dict-jargon"}
if [ ! -f "$OUT/transfer-all.json" ]; then
  $PY examples/distill.py --preset quick --output_dir outputs/transfer-all --disable_tqdm true
  $PY -m tf2rnn_hf.cli evaluate outputs/transfer-all --suites fidelity,sts-b --output outputs/transfer-all/eval
  cp outputs/transfer-all/eval/results.json "$OUT/transfer-all.json"
fi
for source in $SOURCES; do
  [ -f "$OUT/transfer-$source.json" ] && { echo "skip $source (done)"; continue; }
  $PY examples/distill.py --preset quick --exclude_sources "$source" --eval_sources "$source" \
    --output_dir "outputs/transfer-without-$source" --disable_tqdm true
  cp "outputs/transfer-without-$source/results.json" "$OUT/transfer-$source.json"
  echo "done $source"
done
