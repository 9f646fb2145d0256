"""Where a CPU training step of a student goes: the free-running loss, backward and AdamW on three length-grouped
batches of 64 from one cached trajectory shard (at its 30th, 60th and 90th length percentiles), timed, then once
under torch.profiler; `--bf16` runs the loss under bf16 autocast (the Trainer's `--bf16`), `--sparse_embeddings`
gives the token table a row-sparse gradient and update (the Trainer's `--sparse_embeddings`), `--weight_bits 4` runs
the linear weights rounded as the int4 stage does (`--weight_scale learned`: with its trained scales), and the fetch and
collation of the same batches is timed as Python rows and as numpy rows (what the DistillationTrainer reads). A probe
that prints; experiments.md quotes it.

    python benchmarks/probes/train_step.py outputs/STUDENT ~/.cache/tf2rnn_hf/trajectories/token-.../shards/SHARD
"""

import argparse
import time

import datasets
import torch

from tf2rnn_hf.distill import TrajectoryCollator
from tf2rnn_hf.distill.losses import RolloutLoss
from tf2rnn_hf.distill.quantization_aware import round_linear_weights
from tf2rnn_hf.distill.sparse_adamw import RowSparseAdamW
from tf2rnn_hf.models import TF2RNNModel


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("student", help="a saved student (its weights start the step)")
    parser.add_argument("shard", help="one shard folder of a trajectory cache (datasets.load_from_disk)")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds over the three batches")
    parser.add_argument("--open_middle_fraction", type=float, default=1.0,
                        help="share of the targets inside open-token blocks kept (RolloutLoss)")
    parser.add_argument("--bf16", action="store_true", help="the loss under bf16 autocast")
    parser.add_argument("--sparse_embeddings", action="store_true",
                        help="the token table's gradient and AdamW update row-sparse (RowSparseAdamW)")
    parser.add_argument("--weight_bits", type=int, default=None, help="the linear weights rounded (the int4 stage's)")
    parser.add_argument("--weight_scale", default="max", choices=["max", "learned"],
                        help="with --weight_bits: each row's largest value, or a scale trained with the weights")
    parser.add_argument("--profile", action="store_true", help="then one round under torch.profiler")
    args = parser.parse_args()
    torch.manual_seed(0)
    shard = datasets.load_from_disk(args.shard)
    lengths = [len(ids) for ids in shard["input_ids"]]
    order = sorted(range(len(shard)), key=lengths.__getitem__)
    collate = TrajectoryCollator()
    picks = [order[int(q * (len(order) - 64)):][:64] for q in (0.3, 0.6, 0.9)]
    batches = [collate(shard.__getitems__(pick)) for pick in picks]
    for name, rows in (("Python rows", shard), ("numpy rows", shard.with_format("numpy"))):
        start = time.perf_counter()
        for _ in range(args.rounds):
            for pick in picks:
                collate(rows.__getitems__(pick))  # what the DataLoader calls for a batch
        print(f"fetch and collate, {name}: {(time.perf_counter() - start) / args.rounds:.3f} s for the three")
    model = TF2RNNModel.from_pretrained(args.student).train()
    model.get_input_embeddings().sparse = args.sparse_embeddings
    if args.weight_bits:  # as DistillationTrainer rounds them: the readout stays fp32
        round_linear_weights(model, args.weight_bits, keep=("readout",), learned_scale=args.weight_scale == "learned")
    optimizer = RowSparseAdamW(model.parameters(), lr=1e-6)  # AdamW for dense gradients; a tiny lr keeps the weights
    loss_fn = RolloutLoss(final_weight=4.0, open_tokens=model.config.open_tokens,
                          open_middle_fraction=args.open_middle_fraction)

    def step(batch) -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
            loss, _ = loss_fn(model, batch)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()

    for batch in batches:  # warm-up
        step(batch)
    times = [[] for _ in batches]
    for _ in range(args.rounds):
        for i, batch in enumerate(batches):
            start = time.perf_counter()
            step(batch)
            times[i].append(time.perf_counter() - start)
    medians = [sorted(t)[len(t) // 2] for t in times]
    for batch, median in zip(batches, medians):
        print(f"batch {tuple(batch['input_ids'].shape)}: median {median:.3f} s")
    print(f"three batches: {sum(medians):.3f} s (bf16 {args.bf16}, sparse embeddings {args.sparse_embeddings}, "
          f"weight bits {args.weight_bits} ({args.weight_scale}), open_tokens {model.config.open_tokens}, middle targets kept "
          f"{args.open_middle_fraction}, {torch.get_num_threads()} threads)")
    if args.profile:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for batch in batches:
                step(batch)
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=20))


if __name__ == "__main__":
    main()
