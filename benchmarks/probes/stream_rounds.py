"""Probe: one round of N concurrent streams' keystrokes in the fused kernel, each stream's own call
(`Int8TOVAStep.step_live`) against one call for all (`step_live_many`), without the stream's Python around it.

Each of N streams holds a live cache of `--tokens` tokens (the fast tier's shape: the products, 1.9 MB of int8
weights, dominate a lone keystroke); a round steps every stream once from the same states, the two ways in turn,
`--rounds` times. Prints and writes the median microseconds per stream update of each way. A probe for the batched
server path (`benchmarks/probes/batched_streams.py` times it whole, Python included), not a benchmark figure.

    python benchmarks/probes/stream_rounds.py outputs/shape-l1 --output benchmarks/probes/results/stream-rounds.json
"""

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from tf2rnn_hf import TF2RNNModel
from tf2rnn_hf.inference.kernels import Int8TOVAStep


def streams_at(step: Int8TOVAStep, model: TF2RNNModel, n: int, tokens: int):
    """n streams' live caches after `tokens` random tokens each: (cache pointers, small pointers, token sum pointers,
    tokens seen, the tensors those point into)."""
    config, keep, out = model.config, [], ([], [], [], [])
    for j in range(n):
        torch.manual_seed(j)
        kv = torch.zeros(step.layers, 2, 1, config.num_slots, config.hidden_size)
        pointers, state = step.cache_pointers(kv), model.init_state(1)
        for token in torch.randint(1000, config.vocab_size, (tokens,)).tolist():
            small = [state.cell_state[i].contiguous() for i in step.small]
            step.step_live(token, pointers, [t.data_ptr() for t in small], state.token_sum.data_ptr(),
                           int(state.seen_tokens), 1, False)
            state = step(token, state)[1]
        small = [state.cell_state[i].contiguous() for i in step.small]
        keep += [kv, small, state]
        for part, value in zip(out, (pointers, [t.data_ptr() for t in small], state.token_sum.data_ptr(),
                                     int(state.seen_tokens))):
            part.append(value)
    return (*out, keep)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--counts", type=int, nargs="+", default=[8, 64, 1024])
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--output", default=None)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)
    model = TF2RNNModel.from_pretrained(args.model).eval()
    step = Int8TOVAStep(model)
    out = {"model": args.model, "tokens": args.tokens, "threads": args.threads, "rounds": args.rounds, "counts": {}}
    for n in args.counts:
        kvs, smalls, sums, seens, _keep = streams_at(step, model, n, args.tokens)
        ids = torch.randint(1000, model.config.vocab_size, (n,)).tolist()
        over = [False] * n

        def alone():
            for j in range(n):
                step.step_live(ids[j], kvs[j], smalls[j], sums[j], seens[j], 1, False)

        def together():
            step.step_live_many(ids, kvs, smalls, sums, seens, over)

        times = {"alone": [], "together": []}
        for _ in range(args.rounds):
            for name, fn in (("alone", alone), ("together", together)):
                start = time.perf_counter()
                fn()
                times[name].append((time.perf_counter() - start) / n * 1e6)
        row = {f"{name}_us_per_stream": statistics.median(t) for name, t in times.items()}
        row["speedup"] = row["alone_us_per_stream"] / row["together_us_per_stream"]
        out["counts"][str(n)] = row
        print(n, {k: round(v, 2) for k, v in row.items()})
    if args.output:
        Path(args.output).write_text(json.dumps(out, indent=1))
        print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
