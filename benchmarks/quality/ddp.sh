#!/usr/bin/env bash
# Two CPU cores, two ways to train: one process with 2 threads, or DDP over two 1-thread processes (batch 32
# each, the release recipe's, or 64 each). TRAIN_MINUTES (default 2) each on the same 20k cached sentences,
# run one after another on an otherwise idle machine; results/ddp.json.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
L2="$PY -m accelerate.commands.launch --multi_gpu --num_processes 2 --num_machines 1 --mixed_precision no --dynamo_backend no"
common=(--max_train_texts 20000 --max_eval_texts 200 --hidden_size 768 --learning_rate 2e-3 --warmup_steps 0.03
        --train_minutes "${TRAIN_MINUTES:-2}" --transition_until 0.3 --anneal 0.2 --report_to none --logging_steps 1000
        --save_strategy no --disable_tqdm true)
OMP_NUM_THREADS=2 $PY examples/distill.py "${common[@]}" --per_device_train_batch_size 64 --output_dir outputs/ddp-1p-b64
OMP_NUM_THREADS=1 $L2 examples/distill.py "${common[@]}" --per_device_train_batch_size 32 --output_dir outputs/ddp-2p-b32
OMP_NUM_THREADS=1 $L2 examples/distill.py "${common[@]}" --per_device_train_batch_size 64 --output_dir outputs/ddp-2p-b64
$PY - <<'PY'
import json
out = {}
for run in ("1p-b64", "2p-b32", "2p-b64"):
    r = json.load(open(f"outputs/ddp-{run}/results.json"))
    out[run] = {"train": r["train"], "world_size": r["world_size"], "fidelity_200_texts": r["fidelity"]["student"]}
json.dump(out, open("benchmarks/quality/results/ddp.json", "w"), indent=1)
for run, r in out.items():
    print(run, r["train"]["train_samples_per_second"], round(r["fidelity_200_texts"]["final_cosine"], 4))
PY
