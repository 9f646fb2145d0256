#!/usr/bin/env python
"""Trajectory throughput: prefix embeddings per second for the naive loop, the batched path, and the
teacher's raw forward on the same padded batches (the ceiling), plus the share saved by deduplication.

    python benchmarks/trajectories.py [--texts 400]

Writes benchmarks/results/trajectories.json.
"""

import argparse
import json
import time
from pathlib import Path

import torch

from tf2rnn_hf.data import trajectories as T
from tf2rnn_hf.data.corpus import load_texts
from tf2rnn_hf.data.teacher import Teacher


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--texts", type=int, default=400)
    parser.add_argument("--naive-texts", type=int, default=60)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--output", default=str(Path(__file__).parent / "results" / "trajectories.json"))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    texts = load_texts("offline", "train", limit=args.texts)["text"]
    teacher = Teacher("built-in")
    results = {"texts": len(texts), "threads": args.threads}

    # Naive: one teacher call per prefix, fp32.
    sample = texts[: args.naive_texts]
    n_prefix, start = 0, time.perf_counter()
    for text in sample:
        ids = teacher.tokenizer(text, add_special_tokens=False)["input_ids"][:64]
        for t in range(1, len(ids) + 1):
            teacher.embed_ids([teacher.wrap(ids[:t])])
            n_prefix += 1
    results["naive_fp32_prefixes_per_s"] = n_prefix / (time.perf_counter() - start)

    computed = {}
    for bf16 in (False, True):
        settings = T.TrajectorySettings(bf16=bf16, token_budget=4096)
        teacher.bf16 = bf16
        start = time.perf_counter()
        computed[bf16], stats = T.compute_shard(texts, teacher, settings)
        elapsed = time.perf_counter() - start
        key = "bf16" if bf16 else "fp32"
        results[f"batched_{key}_prefixes_per_s"] = stats["prefixes"] / elapsed
        results[f"batched_{key}_teacher_calls_per_s"] = stats["teacher_calls"] / elapsed
        results["dedup_saved_share"] = 1 - stats["teacher_calls"] / stats["prefixes"]
        results["prefixes_per_text"] = stats["prefixes"] / stats["texts"]

        # Ceiling: the teacher's forward alone on the same unique prefixes, batched the same way.
        uniq, seqs = set(), []
        for text in texts:
            ids = teacher.tokenizer(text, add_special_tokens=False)["input_ids"][:64]
            for t in range(1, len(ids) + 1):
                if tuple(ids[:t]) not in uniq:
                    uniq.add(tuple(ids[:t]))
                    seqs.append(teacher.wrap(ids[:t]))
        start = time.perf_counter()
        teacher.embed_batched(seqs, token_budget=4096)
        results[f"ceiling_{key}_calls_per_s"] = len(seqs) / (time.perf_counter() - start)
        results[f"batched_{key}_share_of_ceiling"] = (results[f"batched_{key}_teacher_calls_per_s"]
                                                     / results[f"ceiling_{key}_calls_per_s"])
    # The fidelity cost of bf16: cosine between the bf16 and fp32 trajectories of the same prefixes.
    a = torch.cat([torch.as_tensor(t, dtype=torch.float32) for t in computed[True].with_format("numpy")["trajectory"]])
    b = torch.cat([torch.as_tensor(t, dtype=torch.float32) for t in computed[False].with_format("numpy")["trajectory"]])
    cos = torch.nn.functional.cosine_similarity(a, b)
    results["bf16_vs_fp32_cosine_mean"] = float(cos.mean())
    results["bf16_vs_fp32_cosine_min"] = float(cos.min())
    results["speedup_batched_bf16_vs_naive"] = results["batched_bf16_prefixes_per_s"] / results[
        "naive_fp32_prefixes_per_s"]
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(results, indent=1))
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
