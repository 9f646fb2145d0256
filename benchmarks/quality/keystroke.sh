#!/usr/bin/env bash
# Training on the streaming path (issue 6): fine-tune a trained student on character-level trajectories
# for TRAIN_MINUTES of one core, with and without the keystroke loss (keystrokes that end inside a word,
# run as the streaming encoder runs them), then measure per-keystroke and token-prefix fidelity on
# held-out text for the base and both fine-tunes. Same texts, same time, same learning rate.
#   BASE (default outputs/tf2rnn-minilm-gru: the GRU-768 release these rows fine-tuned)
#   TRAIN_TEXTS (default 4000)  TRAIN_MINUTES (default 8)
set -euo pipefail
cd "$(dirname "$0")/../.."
BASE=${BASE:-outputs/tf2rnn-minilm-gru}
common=(--init_from "$BASE" --prefix_unit char --max_train_texts "${TRAIN_TEXTS:-4000}" --max_eval_texts 1000
        --per_device_train_batch_size 64 --learning_rate 3e-4 --warmup_steps 0.05
        --train_minutes "${TRAIN_MINUTES:-8}" --report_to none --logging_steps 50 --save_strategy no
        --disable_tqdm true --dataloader_num_workers 0)
source benchmarks/quality/common.sh
run_one keystroke control --keystroke_weight 0
run_one keystroke loss --keystroke_weight 1
for name in base control loss; do
  [ -f "$OUT/keystroke-eval-$name.json" ] && continue
  model=$BASE; [ "$name" = base ] || model=outputs/keystroke-$name
  OMP_NUM_THREADS=1 $PY -m tf2rnn_hf.cli evaluate "$model" --suites fidelity,keystroke --no-baselines \
    --output "outputs/keystroke-eval-$name" > "$OUT/keystroke-eval-$name.log" 2>&1
  cp "outputs/keystroke-eval-$name/results.json" "$OUT/keystroke-eval-$name.json"
done
$PY - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
print("| student | keystroke cosine | final cosine | all-prefix cosine | NA@10 |\n|---|---|---|---|---|")
for name in ("base", "control", "loss"):
    r = json.load(open(f"{out}/keystroke-eval-{name}.json"))["suites"]
    f = r["fidelity"]["student"]
    print(f"| {name} | {r['keystroke']['student']['keystroke_cosine']:.4f} | {f['final_cosine']:.4f} | "
          f"{f['prefix_cosine']:.4f} | {f['neighbour_agreement@10']:.4f} |")
PY
