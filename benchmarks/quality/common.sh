# Shared by the quality scripts: run one distillation on one core (NAME PREFIX -- distill args),
# skipping runs whose results already exist; results go to benchmarks/quality/results/PREFIX-NAME.json.
PY=${PY:-.venv/bin/python}
OUT=benchmarks/quality/results
mkdir -p "$OUT"
run_one() {
  local prefix=$1 name=$2; shift 2
  [ -f "$OUT/$prefix-$name.json" ] && { echo "skip $prefix-$name (done)"; return; }
  OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $PY examples/distill.py "${common[@]}" --output_dir "outputs/$prefix-$name" \
    "$@" > "$OUT/$prefix-$name.log" 2>&1
  cp "outputs/$prefix-$name/results.json" "$OUT/$prefix-$name.json"
  echo "done $prefix-$name"
}
# The fine-tune of passages.sh and neighbour.sh: from BASE, TRAIN_MINUTES of one core on TRAIN_TEXTS sentences.
finetune_common() {
  common=(--init_from "$BASE" --max_train_texts "${TRAIN_TEXTS:-20000}" --max_eval_texts 1000
          --per_device_train_batch_size 32 --learning_rate 5e-4 --warmup_steps 0.05
          --train_minutes "${TRAIN_MINUTES:-10}" --report_to none --logging_steps 50 --save_strategy no
          --disable_tqdm true --dataloader_num_workers 0)
}
