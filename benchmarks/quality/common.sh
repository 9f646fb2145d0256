# Shared by ablation.sh and cells.sh: run one distillation on one core (NAME PREFIX -- distill args),
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
