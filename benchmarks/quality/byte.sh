#!/usr/bin/env bash
# Byte-level vs token-level students (issue 6): the same GRU-768, the same TRAIN_TEXTS sentences and
# TRAIN_MINUTES of one core each, rollout loss. The byte student reads UTF-8 bytes and learns from the
# teacher's embedding at every keystroke (character trajectories); the token student reads WordPiece
# tokens (token trajectories). Both are then scored per keystroke, on final embeddings and on Bible
# retrieval. Results: benchmarks/quality/results/byte-*.json.
set -euo pipefail
cd "$(dirname "$0")/../.."
common=(--max_train_texts "${TRAIN_TEXTS:-20000}" --max_eval_texts 1000 --hidden_size 768
        --per_device_train_batch_size 64 --learning_rate 2e-3 --warmup_steps 0.03
        --train_minutes "${TRAIN_MINUTES:-10}" --report_to none --logging_steps 50 --save_strategy no
        --disable_tqdm true --dataloader_num_workers 0)
source benchmarks/quality/common.sh
run_one byte bytes --granularity byte
run_one byte tokens --granularity token
for name in bytes tokens; do
  [ -f "$OUT/byte-eval-$name.json" ] && continue
  OMP_NUM_THREADS=1 $PY -m tf2rnn_hf.cli evaluate "outputs/byte-$name" --suites fidelity,keystroke,bible \
    --no-baselines --output "outputs/byte-eval-$name" > "$OUT/byte-eval-$name.log" 2>&1
  cp "outputs/byte-eval-$name/results.json" "$OUT/byte-eval-$name.json"
done
$PY - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
print("| student | keystroke cosine | final cosine | Bible R@1 | epochs |\n|---|---|---|---|---|")
for name in ("bytes", "tokens"):
    r, d = json.load(open(f"{out}/byte-eval-{name}.json")), json.load(open(f"{out}/byte-{name}.json"))
    s = r["suites"]
    print(f"| {name} | {s['keystroke']['student']['keystroke_cosine']:.4f} | "
          f"{s['fidelity']['student']['final_cosine']:.4f} | {s['bible']['student']['recall@1']:.4f} | "
          f"{d['train']['epoch']:.2f} |")
PY
