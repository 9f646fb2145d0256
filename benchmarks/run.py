#!/usr/bin/env python
"""Speed, memory and scale of a student against its teacher, measured side by side in one run.

    python benchmarks/run.py [--model DIR] [--quick]
    python benchmarks/run.py --compare DIR [DIR ...] [--onnx] [--output FILE.json]

Writes benchmarks/results/benchmarks.json and benchmarks/results/benchmarks.md. With --compare, only the
per-keystroke sections (a keystroke inside a word, sentences typed key by key, idle keystrokes) for several saved
students (fp32 and int8 each; with --onnx also each student's exported step graph and the teacher in onnxruntime, fp32
and int8) against the teacher in one run. Every comparison is a ratio taken in the same process, interleaving the two
sides, because these machines are noisy.
Without --model it times a fresh student of the default configuration (speed does not depend on the
weights' values).
"""

import argparse
import gc
import itertools
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

from tf2rnn_hf import TF2RNNConfig, TF2RNNModel
from tf2rnn_hf.data.teacher import Teacher
from tf2rnn_hf.inference.quantization import quantize_int8
from tf2rnn_hf.inference.streaming import BatchStreamingEncoder, StreamingEncoder
from tf2rnn_hf.utils import cpu_model

OUT = Path(__file__).parent / "results"
WORDS = ("the quick brown fox jumps over a lazy dog while streams of text arrive one keystroke at a time "
         "and the encoder keeps its state between words so that nothing is read twice").split()


def timed(fn, repeat: int, warmup: bool = True):
    """Per-call times in seconds (after one untimed warm-up call unless warmup=False)."""
    if warmup:
        fn()
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def summary(times):
    times = sorted(times)
    return {"median_ms": 1e3 * statistics.median(times), "p95_ms": 1e3 * times[int(0.95 * (len(times) - 1))]}


def text_of_tokens(tokenizer, n_tokens: int) -> str:
    words, text = [], ""
    while len(tokenizer(text, add_special_tokens=False)["input_ids"]) < n_tokens:
        words.append(WORDS[len(words) % len(WORDS)])
        text = " ".join(words)
    ids = tokenizer(text, add_special_tokens=False)["input_ids"][:n_tokens]
    return tokenizer.decode(ids)


STUDENT_BLOCK = 25  # keystrokes per block between teacher calls
IDLE_GAP_S = 0.1  # a typist's keystrokes: ~100 ms apart at 10 characters a second
# Idle sleep on each side of the teacher's call in the keystroke and typing blocks. After a parallel region torch's
# OpenMP workers spin for milliseconds, and a student block timed in that shadow shares a core with them: on 2 cores
# its keystrokes that use the helper thread stalled 1-6 ms now and then, and the mean keystroke of six layers with
# K = 2 ran 2x its median (experiments.md, session 68). Likewise the helper spins 1 ms after a keystroke.
SETTLE_S = 0.05


def aligned_keystroker(model, tokenizer, n_tokens: int):
    """`keystroker` at an n-token prefix, for a student with W open tokens taking turns over the W streams of n ..
    n + W - 1 tokens: a keystroke's cost depends on how many open tokens precede the typed word (at one prefix
    length a six-token student always held four and an eight-token one none), so each alignment counts alike."""
    width = getattr(getattr(model, "config", None), "open_tokens", 1)
    turns = itertools.cycle([keystroker(model, tokenizer, text_of_tokens(tokenizer, n_tokens + k))
                             for k in range(width)])
    return lambda: next(turns)()


def keystroker(model, tokenizer, prefix: str):
    """A function that types one character into a stream holding `prefix` (a word kept short by deletes)."""
    enc = StreamingEncoder(model, tokenizer)
    enc.type(prefix + " ")
    letters = iter("abcdefghij" * 100_000)

    def key():
        enc.type(next(letters))
        if len(enc.text) - len(prefix) > 8:  # keep the word short: delete it back (pops)
            enc.delete(len(enc.text) - len(prefix) - 1)
    return key


def teacher_pass(teacher, ids, bf16: bool):
    """A call of the teacher re-encoding a prefix (`ids`), in fp32 or under bf16 autocast."""
    def call():
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            teacher.model(**ids)
    return call


def time_teacher(samples: dict, teacher, ids, threads: int) -> None:
    """One call of the teacher re-encoding `ids` at each precision, added to `samples` (teacher_fp32_Nt, _bf16_Nt),
    with `SETTLE_S` of idle before and after, so that neither side is timed while the other's threads still spin."""
    time.sleep(SETTLE_S)
    for bf16 in (False, True):
        samples.setdefault(f"teacher_{'bf16' if bf16 else 'fp32'}_{threads}t", []).extend(
            timed(teacher_pass(teacher, ids, bf16), 1))
    time.sleep(SETTLE_S)


def best_ratio(row: dict, student: str) -> float:
    """The fastest teacher setting in a timing row over the student's faster thread setting (medians)."""
    teacher = min(v["median_ms"] for k, v in row.items() if k.startswith("teacher_"))
    return teacher / min(row[f"student_{student}_{t}t"]["median_ms"] for t in (1, 2))


def bench_keystrokes(models, tokenizer, teacher, lengths, repeat, onnx_teachers=None):
    """Per keystroke at batch 1: each student's streaming update vs the teacher re-encoding the prefix.

    The sides alternate in blocks (one call of each teacher precision, then STUDENT_BLOCK keystrokes of
    each student), so both see the same machine noise while a student runs warm, as in a process serving
    keystrokes. `cold` is the keystroke right after a teacher call, whose ~90 MB of weights have flushed
    the caches: the worst case, reported beside the steady state. `onnx_teachers` (name -> threads ->
    onnxruntime session) are timed beside the PyTorch teacher and count as teacher settings."""
    rows = []
    for n in lengths:
        prefix = text_of_tokens(tokenizer, n)
        ids = teacher.tokenizer([prefix], return_tensors="pt")
        row = {"prefix_tokens": n}
        for threads in (1, 2):
            torch.set_num_threads(threads)
            keys = {name: aligned_keystroker(model, tokenizer, n) for name, model in models.items()}
            samples = {}
            for _ in range(repeat):
                time_teacher(samples, teacher, ids, threads)
                for name, sessions in (onnx_teachers or {}).items():
                    feeds = {k: v.numpy() for k, v in ids.items()}
                    samples.setdefault(f"teacher_{name}_{threads}t", []).extend(
                        timed(lambda: sessions[threads].run(None, feeds), 1))
                for name, key in keys.items():
                    times = timed(key, STUDENT_BLOCK, warmup=False)
                    samples.setdefault(f"student_{name}_cold_{threads}t", []).append(times[0])
                    samples.setdefault(f"student_{name}_{threads}t", []).extend(times[1:])
            row.update({k: summary(v) for k, v in samples.items()})
        torch.set_num_threads(2)
        for name in models:
            row[f"speedup_{name}"] = best_ratio(row, name)
            row[f"speedup_{name}_cold"] = best_ratio(row, f"{name}_cold")
        rows.append(row)
    return rows


def typist(model, tokenizer, prefix: str, defer_words=None, idle_commits: bool = False):
    """A function that types the next character of WORDS' sentence into a stream holding `prefix` and returns its time,
    whether it ended a word (whitespace) and, with `idle_commits`, the time of the `idle()` call that follows a space
    (the typist's gap; else None); every ~40 characters the stream deletes back to the prefix (pops, untimed)."""
    enc = StreamingEncoder(model, tokenizer, defer_words=defer_words, idle_commits=idle_commits)
    enc.type(prefix + " ")
    enc.idle()
    base = len(enc.text)
    chars = itertools.cycle(" ".join(WORDS) + " ")

    def key():
        if len(enc.text) - base > 40 and enc.text[-1] == " ":
            enc.delete(len(enc.text) - base)
        char = next(chars)
        start = time.perf_counter()
        enc.type(char)
        took, idle = time.perf_counter() - start, None
        if idle_commits and char == " ":
            start = time.perf_counter()
            enc.idle()
            idle = time.perf_counter() - start
        return took, char == " ", idle
    return key


def bench_typing(models, tokenizer, teacher, lengths, repeat):
    """Typing sentences at batch 1, every keystroke timed: the mean (what a typist's text costs per key), keystrokes
    inside a word and those that end one (a space), each student against the teacher re-encoding the prefix, in
    blocks as `bench_keystrokes` (each student warmed by typing up to a word's end first). A student trained with
    tail_layers runs its upper layers at word ends only (`defer_words`); `NAME_every_layer` is the same student running
    every layer at every keystroke, and `NAME_idle_commits` the same with `idle_commits`: a word's upper layers run in
    an `idle()` call after its space, timed apart (`idle_ms`; `mean_with_idle_ms` counts both, the work a
    keystroke costs the CPU)."""
    streams = {}
    for name, model in models.items():
        streams[name] = (model, None, False)
        if getattr(model.config, "tail_layers", None) is not None:
            streams[f"{name}_every_layer"] = (model, False, False)
            streams[f"{name}_idle_commits"] = (model, None, True)
    rows = []
    for n in lengths:
        prefix = text_of_tokens(tokenizer, n)
        ids, row = teacher.tokenizer([prefix], return_tensors="pt"), {"prefix_tokens": n}
        for threads in (1, 2):
            torch.set_num_threads(threads)
            keys = {name: typist(model, tokenizer, prefix, defer, idle) for name, (model, defer, idle) in streams.items()}
            teacher_times, times = {}, {}
            for _ in range(repeat):
                time_teacher(teacher_times, teacher, ids, threads)
                for name, key in keys.items():
                    # Untimed up to a word's end, as bench_keystrokes drops a block's first keystroke: the teacher's
                    # call evicts the student, and only a word's end reads a deferring student's upper layers (timed
                    # from a block's start, its first word end cost 2x a warm one: experiments.md, session 67).
                    while not key()[1]:
                        pass
                    times.setdefault(name, []).extend(key() for _ in range(STUDENT_BLOCK))
            row.update({k: summary(v) for k, v in teacher_times.items()})
            for name, samples in times.items():
                ends = [t for t, end, _ in samples if end]
                inside = [t for t, end, _ in samples if not end]
                idles = [i for _, _, i in samples if i is not None]
                row[f"student_{name}_{threads}t"] = {
                    "mean_ms": 1e3 * statistics.fmean(t for t, _, _ in samples), "word_end": summary(ends),
                    "word_end_mean_ms": 1e3 * statistics.fmean(ends), "in_word": summary(inside),
                    "keystrokes": len(samples), "word_ends": len(ends)}
                if idles:
                    row[f"student_{name}_{threads}t"].update(
                        idle=summary(idles), idle_mean_ms=1e3 * statistics.fmean(idles),
                        mean_with_idle_ms=1e3 * (sum(t for t, _, _ in samples) + sum(idles)) / len(samples))
        torch.set_num_threads(2)
        teacher_ms = min(v["median_ms"] for k, v in row.items() if k.startswith("teacher_"))
        for name in streams:
            best = {key: min(row[f"student_{name}_{t}t"][key] if key == "mean_ms" else
                             row[f"student_{name}_{t}t"][key]["median_ms"] for t in (1, 2))
                    for key in ("mean_ms", "word_end", "in_word")}
            row[f"speedup_{name}"] = {"mean": teacher_ms / best["mean_ms"], "word_end": teacher_ms / best["word_end"],
                                      "in_word": teacher_ms / best["in_word"]}
            if streams[name][2]:  # the keystrokes and the idle() calls together
                row[f"speedup_{name}"]["mean_with_idle"] = teacher_ms / min(
                    row[f"student_{name}_{t}t"]["mean_with_idle_ms"] for t in (1, 2))
        rows.append(row)
    return rows


def bench_idle_keystrokes(models, tokenizer, teacher, lengths, repeat, gap_s: float = IDLE_GAP_S):
    """Per keystroke as a typist makes them: each call (the teacher's re-encoding, or one student keystroke) after
    `gap_s` of idle sleep, in which the process's caches and predictors go cold. The warm blocks of
    `bench_keystrokes` are a busy server's keystrokes; this is one user's, on the same machine."""
    rows = []
    for n in lengths:
        prefix = text_of_tokens(tokenizer, n)
        ids = teacher.tokenizer([prefix], return_tensors="pt")
        row = {"prefix_tokens": n, "gap_ms": 1e3 * gap_s}
        for threads in (1, 2):
            torch.set_num_threads(threads)
            keys = {name: aligned_keystroker(model, tokenizer, n) for name, model in models.items()}
            for key in keys.values():
                timed(key, 20, warmup=False)  # the stream typed in, as a typist's would be
            samples = {}
            for _ in range(repeat):
                for bf16 in (False, True):
                    time.sleep(gap_s)
                    samples.setdefault(f"teacher_{'bf16' if bf16 else 'fp32'}_{threads}t", []).extend(
                        timed(teacher_pass(teacher, ids, bf16), 1, warmup=False))
                for name, key in keys.items():
                    time.sleep(gap_s)
                    samples.setdefault(f"student_{name}_{threads}t", []).extend(timed(key, 1, warmup=False))
            row.update({k: summary(v) for k, v in samples.items()})
        torch.set_num_threads(2)
        for name in models:
            row[f"speedup_{name}"] = best_ratio(row, name)
        rows.append(row)
    return rows


def bench_streams(models, tokenizer, teacher, counts, prefix_tokens=64):
    """N concurrent streams each typing one character: updates per second, each student vs the teacher
    restarting every stream."""
    rows = []
    prefix = text_of_tokens(tokenizer, prefix_tokens)
    for n in counts:
        reps = max(3, min(20, 2000 // n))
        texts = [prefix + " word"] * n

        def restart():
            teacher.embed_batched([teacher.wrap(x) for x in teacher.tokenizer(texts, add_special_tokens=False)
                                   ["input_ids"]], token_budget=8192)

        row = {"streams": n, "teacher_updates_per_s": n / statistics.median(timed(restart, max(2, reps // 4)))}
        for name, model in models.items():
            batch = BatchStreamingEncoder(model, tokenizer)
            ids = batch.open(n)
            batch.type({i: prefix + " w" for i in ids})
            letters = iter("abcdefgh" * 1000)

            def student():
                c = next(letters)
                batch.type({i: c for i in ids})

            row[f"student_{name}_updates_per_s"] = n / statistics.median(timed(student, reps))
            row[f"ratio_{name}"] = row[f"student_{name}_updates_per_s"] / row["teacher_updates_per_s"]
        rows.append(row)
    return rows


def bench_bulk(models, tokenizer, teacher, texts):
    """Finished sentences, final embeddings only, batch 64: sentences/s, and each student's mean cosine
    to the teacher on these (held-out) texts, which prices int8 in fidelity."""
    from tf2rnn_hf.evaluation.baselines import StaticEmbedding
    from tf2rnn_hf.evaluation.suites import student_encoder, teacher_encoder

    static = StaticEmbedding(teacher.token_vectors(progress=False))  # the one static baseline, as everywhere
    systems = {f"student ({name})": student_encoder(model, tokenizer, batch_size=64) for name, model in models.items()}
    systems.update({"teacher (bf16)": None, "teacher (fp32)": teacher_encoder(teacher),
                    "static mean": static.encoder(teacher.tokenizer, teacher.max_length)})
    speed, vectors_out = {}, {}
    for name, encode in systems.items():
        if encode is None:
            teacher.bf16 = True
            encode = teacher_encoder(teacher)
        start = time.perf_counter()
        vectors_out[name] = encode(texts)
        speed[name] = len(texts) / (time.perf_counter() - start)
        teacher.bf16 = False
    reference = vectors_out["teacher (fp32)"]
    cosine = {name: torch.nn.functional.cosine_similarity(v, reference).mean().item()
              for name, v in vectors_out.items() if name != "teacher (fp32)"}
    return {"sentences_per_s": speed, "cosine_to_teacher_fp32": cosine, "texts": len(texts)}


CELL_CONFIGS = {  # the cell comparison's sizes (~2.9M recurrent parameters each), benchmarks/quality/cells.sh
    "gru": dict(cell_type="gru", hidden_size=768),
    "lstm": dict(cell_type="lstm", hidden_size=640),
    "linear_attention": dict(cell_type="linear_attention", hidden_size=400, num_hidden_layers=2),
    "rem": dict(cell_type="rem", hidden_size=400, num_hidden_layers=2),
    "multistate-k8": dict(cell_type="multistate", hidden_size=864, num_slots=8),
    "multistate-k32": dict(cell_type="multistate", hidden_size=864, num_slots=32),
}


def bench_cells(tokenizer, repeat: int = 200):
    """Bytes of state per stream and the time of one step at batch 1, for each cell of the comparison."""
    out = {}
    ids = torch.tensor([1000])
    for name, kwargs in CELL_CONFIGS.items():
        torch.manual_seed(0)
        model = TF2RNNModel(TF2RNNConfig(vocab_size=len(tokenizer), **kwargs)).eval()
        with torch.no_grad():  # fill the multi-state slots first, so the step is at its bounded size
            state = model(torch.randint(1000, 2000, (1, 64)), use_cache=True).past_state
        holder = {"s": state}

        def one():
            _, holder["s"] = model.step(ids, holder["s"])
        out[name] = {"state_bytes": state.nbytes(), "step_ms": summary(timed(one, repeat))["median_ms"],
                     "recurrent_params": sum(p.numel() for n, p in model.named_parameters()
                                             if not n.startswith("embeddings"))}
    return out


def rss_mb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2 ** 20


CAPPED_CHECKPOINTS = 4  # the bounded-memory setting reported beside the default


def held_bytes(model, tokenizer, text: str, max_checkpoints=None) -> int:
    """State bytes one stream holds once `text` is typed: its current state plus the checkpoints that make
    deletes pops (one per token typed, unless `max_checkpoints` lets the older words' go)."""
    batch = BatchStreamingEncoder(model, tokenizer, max_checkpoints=max_checkpoints)
    (one,) = batch.open(1)
    batch.type({one: text})
    return batch.nbytes(one)


def bench_rss(model, tokenizer, n=1000):
    """Memory of n live streams: the state bytes each holds (counted: current state plus the checkpoints
    that make deletes pops), and the process's RSS growth (allocator reuse makes RSS a lower bound)."""
    gc.collect()
    before = rss_mb()
    batch = BatchStreamingEncoder(model, tokenizer)
    ids = batch.open(n)
    text = "a few words typed so far in this session and a partial wo"
    batch.type({i: text for i in ids})
    after = rss_mb()
    return {"streams": n, "rss_growth_mb": after - before, "per_stream_kb": 1024 * (after - before) / n,
            "held_bytes_per_stream": batch.nbytes(ids[0]), "words_typed": len(text.split()),
            "held_bytes_per_stream_capped": held_bytes(model, tokenizer, text, CAPPED_CHECKPOINTS),
            "capped_checkpoints": CAPPED_CHECKPOINTS,
            "current_state_bytes_per_stream": model.init_state(1).nbytes(),
            "teacher_keeps_text_bytes_per_stream": len(text)}


def bench_scale(model, tokenizer, teacher, steps_list=(10, 1000, 100_000)):
    """Student step time and state size after 10, 1,000 and 100,000 steps; the teacher's cost by length."""
    rows = []
    ids = torch.tensor([tokenizer.convert_tokens_to_ids("word")])
    for steps in steps_list:
        state = model.init_state(1)
        with torch.no_grad():
            out = model(ids.repeat(1, min(steps, 1000)).view(1, -1), use_cache=True)
            state = out.past_state
            for _ in range(steps // 1000 - 1 if steps >= 2000 else 0):
                state = model(ids.repeat(1, 1000).view(1, -1), past_state=state, use_cache=True).past_state
        holder = {"s": state}

        def one():
            _, holder["s"] = model.step(ids, holder["s"])
        t = summary(timed(one, 200))
        rows.append({"steps_seen": int(state.seen_tokens), "step_ms": t["median_ms"], "state_bytes": state.nbytes()})
    curve = []
    for n in (16, 32, 64, 128, 256):
        batch = teacher.tokenizer([text_of_tokens(tokenizer, n - 2)], return_tensors="pt")
        with torch.inference_mode():
            t = summary(timed(lambda: teacher.model(**batch), 20))
        curve.append({"tokens": n, "teacher_ms": t["median_ms"]})
    return {"student": rows, "teacher_curve": curve}


def bench_distill(model, teacher, texts, steps: int = 8):
    """Distillation throughput: teacher trajectory prefixes/s (bf16, batched, deduplicated) and training
    tokens/s (free-running rollout, batch 64, fp32, AdamW) on the same texts; the share of each stage in
    a recipe follows from these two rates (tokens per text and epochs set the rest)."""
    import copy

    from tf2rnn_hf.data import trajectories
    from tf2rnn_hf.distill import TrajectoryCollator
    from tf2rnn_hf.distill.losses import RolloutLoss

    settings = trajectories.TrajectorySettings(bf16=True)
    start = time.perf_counter()
    ds, stats = trajectories.compute_shard(texts, teacher, settings)
    traj_s = time.perf_counter() - start
    student = copy.deepcopy(model).train()
    optimizer = torch.optim.AdamW(student.parameters(), lr=1e-4)
    collate, loss_fn = TrajectoryCollator(), RolloutLoss()
    batches = [collate([ds[i] for i in range(b * 64, b * 64 + 64)]) for b in range(min(steps, len(ds) // 64))]
    tokens, start = 0, time.perf_counter()
    for batch in batches:
        loss, _ = loss_fn(student, batch)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        tokens += int(batch["attention_mask"].sum())
    train_s = time.perf_counter() - start
    per_text = stats["prefixes"] / stats["texts"]
    return {"texts": stats["texts"], "teacher_calls": stats["teacher_calls"], "prefixes": stats["prefixes"],
            "trajectory_prefixes_per_s": stats["prefixes"] / traj_s, "teacher_calls_per_s": stats["teacher_calls"] / traj_s,
            "training_tokens_per_s": tokens / train_s, "tokens_per_text": per_text,
            # Seconds per text for one trajectory pass vs one training epoch: the stage shares of a recipe.
            "trajectory_s_per_text": traj_s / stats["texts"], "training_s_per_text_epoch": per_text / (tokens / train_s)}


def markdown(results) -> str:
    names = [k[len("speedup_"):] for k in results["keystroke"][0] if k.startswith("speedup_") and not k.endswith("_cold")]
    lines = ["| prefix tokens | teacher fp32 / bf16 ms (1t) | teacher fp32 / bf16 ms (2t) | "
             + " | ".join(f"student {n} ms (1t / 2t; cold 1t) | speed-up {n} (cold)" for n in names) + " |",
             "|---|---|---|" + "---|---|" * len(names)]
    for r in results["keystroke"]:
        cells = [f"{r['teacher_fp32_1t']['median_ms']:.2f} / {r['teacher_bf16_1t']['median_ms']:.2f}",
                 f"{r['teacher_fp32_2t']['median_ms']:.2f} / {r['teacher_bf16_2t']['median_ms']:.2f}"]
        for n in names:
            cells.append(f"{r[f'student_{n}_1t']['median_ms']:.3f} (p95 {r[f'student_{n}_1t']['p95_ms']:.3f}) / "
                         f"{r[f'student_{n}_2t']['median_ms']:.3f}; {r[f'student_{n}_cold_1t']['median_ms']:.3f}")
            cells.append(f"{r[f'speedup_{n}']:.0f}x ({r[f'speedup_{n}_cold']:.0f}x)")
        lines.append(f"| {r['prefix_tokens']} | " + " | ".join(cells) + " |")
    lines += ["", "Speed-up: the faster teacher setting (fp32 or bf16, 1 or 2 threads) over the student's faster "
              f"thread setting, warm (blocks of {STUDENT_BLOCK} keystrokes between teacher calls); in brackets, "
              "cold: the keystroke right after a teacher call."]
    if results.get("idle_keystroke"):
        idle = results["idle_keystroke"]
        lines += ["", f"| prefix tokens | teacher fp32 / bf16 ms, 1t; 2t (each after {idle[0]['gap_ms']:.0f} ms idle) | "
                  + " | ".join(f"student {n} ms (1t / 2t) | speed-up {n}" for n in names) + " |",
                  "|---|---|" + "---|---|" * len(names)]
        for r in idle:
            cells = ["; ".join(" / ".join(f"{r[f'teacher_{p}_{t}t']['median_ms']:.2f}" for p in ("fp32", "bf16"))
                               for t in (1, 2))]
            for n in names:
                cells.append(f"{r[f'student_{n}_1t']['median_ms']:.3f} / {r[f'student_{n}_2t']['median_ms']:.3f}")
                cells.append(f"{r[f'speedup_{n}']:.0f}x")
            lines.append(f"| {r['prefix_tokens']} | " + " | ".join(cells) + " |")
        lines += ["", f"A typist's keystrokes: each call (teacher or student) after {idle[0]['gap_ms']:.0f} ms of idle "
                  "sleep, as keystrokes come ~100 ms apart; the warm table above is a busy process's. Medians; the "
                  "speed-up is the faster teacher setting over the student's faster thread setting."]
    lines += ["", "| concurrent streams | teacher-restart updates/s | "
              + " | ".join(f"student {n} updates/s | ratio {n}" for n in names) + " |",
              "|---|---|" + "---|---|" * len(names)]
    for r in results["streams"]:
        lines.append(f"| {r['streams']} | {r['teacher_updates_per_s']:.0f} | " + " | ".join(
            f"{r[f'student_{n}_updates_per_s']:.0f} | {r[f'ratio_{n}']:.1f}x" for n in names) + " |")
    b = results["bulk"]
    lines += ["", f"| bulk encoding (batch 64, {b['texts']} held-out sentences) | sentences/s | "
              "mean cosine to teacher fp32 |", "|---|---|---|"]
    lines += [f"| {k} | {v:.0f} | {b['cosine_to_teacher_fp32'].get(k, 1.0):.4f} |"
              for k, v in b["sentences_per_s"].items()]
    lines += ["", "| cell (comparison size) | recurrent params | state bytes per stream | step ms (batch 1) |",
              "|---|---|---|---|"]
    lines += [f"| {k} | {v['recurrent_params']:,} | {v['state_bytes']:,} | {v['step_ms']:.3f} |"
              for k, v in results["cells"].items()]
    r = results["rss"]
    lines += ["", f"{r['streams']} live streams, {r['words_typed']} words typed each: each holds "
              f"{r['held_bytes_per_stream']:,} bytes of state (the current state, {r['current_state_bytes_per_stream']:,} "
              f"bytes, plus the checkpoints that make deletes pops); RSS grew {r['rss_growth_mb']:.1f} MB "
              f"(measured first, before other sections free memory for reuse). With `max_checkpoints="
              f"{r['capped_checkpoints']}` it holds {r['held_bytes_per_stream_capped']:,} bytes here, and no more than "
              f"about the current state, two whole states and the kept words' rows whatever its length (a delete past "
              f"those words re-encodes the text once). The teacher instead keeps each "
              f"stream's text ({r['teacher_keeps_text_bytes_per_stream']} bytes here) and re-reads it at every keystroke."]
    d = results["distill"]
    lines += ["", f"Distillation throughput ({d['texts']} held-out texts, {d['tokens_per_text']:.1f} tokens each): "
              f"teacher trajectories {d['trajectory_prefixes_per_s']:.0f} prefixes/s ({d['teacher_calls_per_s']:.0f} "
              f"teacher calls/s after deduplication); training {d['training_tokens_per_s']:.0f} tokens/s. Per text: "
              f"{1e3 * d['trajectory_s_per_text']:.1f} ms of trajectories once, {1e3 * d['training_s_per_text_epoch']:.1f} "
              f"ms of training per epoch."]
    s = results["scale"]["student"]
    lines += ["", "| steps seen | student step ms | state bytes |", "|---|---|---|"]
    lines += [f"| {r['steps_seen']} | {r['step_ms']:.3f} | {r['state_bytes']} |" for r in s]
    return "\n".join(lines)


@torch.no_grad()
def streamed_fidelity(models, tokenizer, teacher, texts):
    """Each student's embedding of whole held-out texts typed one token at a time at batch 1 (the path the
    fused int8 kernels take), as mean cosine to the teacher fp32 and to the same student's fp32 whole-text
    forward: what the keystroke path costs in fidelity."""
    from tf2rnn_hf.evaluation.suites import student_encoder, teacher_encoder

    reference = teacher_encoder(teacher)(texts)
    ids = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    out, whole = {}, {}
    for name, model in models.items():
        rows = []
        for row in ids:
            state = model.init_state(1)
            for token in row:
                emb, state = model.step(torch.tensor([token]), state)
            rows.append(emb[0])
        streamed = torch.stack(rows)
        fp32 = next(name[:-len(k)] for k in ("_onnx_fp32", "_onnx_int8", "_fp32", "_int8") if name.endswith(k))
        if fp32 not in whole:
            whole[fp32] = student_encoder(models[f"{fp32}_fp32"], tokenizer)(texts)
        cos = torch.nn.functional.cosine_similarity
        out[name] = {"cosine_to_teacher": cos(streamed, reference).mean().item(),
                     "cosine_to_fp32_forward": cos(streamed, whole[fp32]).mean().item(),
                     "min_cosine_to_fp32_forward": cos(streamed, whole[fp32]).min().item()}
    return {"texts": len(texts), "tokens": sum(map(len, ids)), "students": out}


def onnx_teacher(teacher, folder: Path):
    """The teacher's transformer in onnxruntime, fp32 and int8 (dynamic quantization), 1 and 2 threads, as
    search-as-you-type demos run it (Qdrant's re-encodes the query with MiniLM in ONNX at every keystroke).
    Timed like the PyTorch teacher: the transformer's forward, pooling left out."""
    import warnings

    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic

    class Transformer(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.model(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).last_hidden_state

    names = ["input_ids", "attention_mask", "token_type_ids"]
    example = teacher.tokenizer(["a short example of a prefix"], return_tensors="pt")
    rows, steps = torch.export.Dim("batch", min=1, max=1024), torch.export.Dim("steps", min=2, max=512)
    folder.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(Transformer(teacher.model), tuple(example[n] for n in names), dynamo=True,
                          dynamic_shapes=({0: rows, 1: steps},) * 3, input_names=names,
                          output_names=["last_hidden_state"], external_data=False).save(str(folder / "teacher.onnx"))
    quantize_dynamic(folder / "teacher.onnx", folder / "teacher.int8.onnx", weight_type=QuantType.QInt8)
    sessions = {}
    for precision, file in (("onnx_fp32", "teacher.onnx"), ("onnx_int8", "teacher.int8.onnx")):
        for threads in (1, 2):
            options = ort.SessionOptions()
            options.intra_op_num_threads = threads
            sessions.setdefault(precision, {})[threads] = ort.InferenceSession(
                str(folder / file), options, providers=["CPUExecutionProvider"])
    return sessions


def compare(paths, output: Path, quick: bool, onnx: bool = False, idle_gap_s: float = IDLE_GAP_S) -> None:
    """Per keystroke at batch 1 for several saved students (fp32 and int8 each; with `onnx`, their exported
    step graphs in onnxruntime too), the teacher timed in the same blocks (in onnxruntime too): the cost
    side of a quality comparison (benchmarks/quality/student.sh)."""
    import tempfile

    from transformers import AutoTokenizer

    teacher = Teacher("built-in")
    models, info, tokenizer, onnx_teachers = {}, {}, None, None
    scratch = Path(tempfile.mkdtemp(prefix="tf2rnn-onnx-"))
    if onnx:
        onnx_teachers = onnx_teacher(teacher, scratch / "teacher")
    for path in paths:
        name = Path(path).name
        model = TF2RNNModel.from_pretrained(path).eval()
        tokenizer = tokenizer or AutoTokenizer.from_pretrained(path)
        models[f"{name}_fp32"], models[f"{name}_int8"] = model, quantize_int8(model)
        if onnx:  # the step graph, one thread (a batch-1 step has little to split)
            from tf2rnn_hf.inference.onnx import ONNXStudent, export_onnx

            export_onnx(model, tokenizer, scratch / name, int8=True, sequence=False)
            models[f"{name}_onnx_fp32"] = ONNXStudent(scratch / name, threads=1)
            models[f"{name}_onnx_int8"] = ONNXStudent(scratch / name, int8=True, threads=1)
        info[name] = {"cell": model.config.cell_type, "layers": model.config.num_hidden_layers,
                      "hidden_size": model.config.hidden_size, "state_bytes": model.init_state(1).nbytes(),
                      "parameters_without_token_table": sum(p.numel() for n, p in model.named_parameters()
                                                            if not n.startswith("embeddings.")),
                      # what a stream holds grows with the tokens typed (one checkpoint per token)
                      "held_bytes_per_stream": {n: held_bytes(model, tokenizer, text_of_tokens(tokenizer, n))
                                                for n in (16, 64)},
                      # int8 streams of a tova student type on a live cache and keep rows only
                      "held_bytes_per_stream_int8": {n: held_bytes(models[f"{name}_int8"], tokenizer,
                                                                   text_of_tokens(tokenizer, n)) for n in (16, 64)},
                      f"held_bytes_per_stream_64_tokens_max_checkpoints_{CAPPED_CHECKPOINTS}": held_bytes(
                          model, tokenizer, text_of_tokens(tokenizer, 64), CAPPED_CHECKPOINTS)}
    t0 = time.perf_counter()
    rows = bench_keystrokes(models, tokenizer, teacher, (16, 64, 256), 10 if quick else 30, onnx_teachers)
    typing = bench_typing({k: m for k, m in models.items() if k.endswith("_int8")}, tokenizer, teacher, (64, 256),
                          10 if quick else 30)
    idle = bench_idle_keystrokes({k: m for k, m in models.items() if k.endswith("_int8")}, tokenizer, teacher,
                                 (64, 256), 10 if quick else 20, idle_gap_s) if idle_gap_s else []
    from tf2rnn_hf.data.corpus import load_texts

    texts = load_texts("offline", "heldout", limit=100 if quick else 300, shuffle_seed=0)["text"]
    results = {"students": info, "keystroke": rows, "typing": typing, "idle_keystroke": idle,
               "streamed_fidelity": streamed_fidelity(models, tokenizer, teacher, texts),
               "seconds": time.perf_counter() - t0, "settle_ms": 1e3 * SETTLE_S,
               "machine": {"torch": torch.__version__, "cpus": os.cpu_count(), "platform": platform.platform(),
                           "cpu": cpu_model(),  # timings from different hosts do not compare
                           "fused_step": {name: type(k).__name__ if (k := getattr(m, "step_kernel", None)) else None
                                          for name, m in models.items()},
                           # the products the fused step reads as int4 (a student trained with --weight_bits 4)
                           "int4_products": {name: list(getattr(getattr(m, "step_kernel", None), "int4", ()))
                                             for name, m in models.items()},
                           # those of them with a scale per 128 columns (--weight_group 128)
                           "int4_groups": {name: list(getattr(getattr(m, "step_kernel", None), "int4_groups", ()))
                                           for name, m in models.items()},
                           # the layers that read each product as int4 (all but those --weight_keep kept off the grid)
                           "int4_layers": {name: getattr(getattr(m, "step_kernel", None), "int4_layers", {})
                                           for name, m in models.items()}}}
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(results, indent=1))
    for row in rows:
        print(row["prefix_tokens"], {k[len("speedup_"):]: round(v, 1) for k, v in row.items()
                                     if k.startswith("speedup_") and not k.endswith("_cold")})
    for row in typing:
        print(row["prefix_tokens"], "typing sentences (mean / word end / in a word[; with idle() calls]):",
              {k[len("speedup_"):]: "{mean:.1f} / {word_end:.1f} / {in_word:.1f}".format(**v)
               + ("; {mean_with_idle:.1f}".format(**v) if "mean_with_idle" in v else "")
               for k, v in row.items() if k.startswith("speedup_")})
    for row in idle:
        print(row["prefix_tokens"], f"after {row['gap_ms']:.0f} ms idle:",
              {k[len("speedup_"):]: round(v, 1) for k, v in row.items() if k.startswith("speedup_")})
    for name, r in results["streamed_fidelity"]["students"].items():
        print(name, {k: round(v, 4) for k, v in r.items()})
    print(f"wrote {output}")


def main():
    global SETTLE_S
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="A saved student (default: a fresh default-config student).")
    parser.add_argument("--compare", nargs="+", default=None, metavar="DIR",
                        help="Only per-keystroke timings, for these saved students against the teacher.")
    parser.add_argument("--quick", action="store_true", help="Fewer repeats and sizes (a smoke run).")
    parser.add_argument("--onnx", action="store_true", help="With --compare: also each student's ONNX step graph "
                        "and the teacher in onnxruntime (fp32 and int8).")
    parser.add_argument("--output", default=str(OUT))
    parser.add_argument("--idle_gap_ms", type=float, default=1e3 * IDLE_GAP_S,
                        help="Also time keystrokes each after this much idle sleep, as a typist's come (0: skip).")
    parser.add_argument("--settle_ms", type=float, default=1e3 * SETTLE_S,
                        help="Idle sleep on each side of the teacher's call in timed blocks (0: none, as before v68).")
    parser.add_argument("--keep-denormals", action="store_true",
                        help="Leave denormal floats on (a profile showed them making the GRU step 1.5x slower).")
    args = parser.parse_args()
    SETTLE_S = args.settle_ms / 1e3
    torch.set_num_threads(2)
    torch.set_flush_denormal(not args.keep_denormals)
    if args.compare:
        output = Path(args.output)
        return compare(args.compare, output if output.suffix == ".json" else output / "compare.json", args.quick,
                       args.onnx, args.idle_gap_ms / 1e3)
    teacher = Teacher("built-in")
    if args.model:
        from transformers import AutoTokenizer

        model, tokenizer = TF2RNNModel.from_pretrained(args.model).eval(), AutoTokenizer.from_pretrained(args.model)
    else:
        from tf2rnn_hf.distill import build_student

        model, tokenizer = build_student(teacher, token_init="random")
        model.eval()
    repeat = 10 if args.quick else 60
    results = {"settle_ms": 1e3 * SETTLE_S,
               "machine": {"python": sys.version.split()[0], "torch": torch.__version__, "cpus": os.cpu_count(),
                           "platform": platform.platform(), "flush_denormal": not args.keep_denormals},
               "student": {"cell": model.config.cell_type, "hidden_size": model.config.hidden_size,
                           "layers": model.config.num_hidden_layers, "source": args.model or "fresh default config"}}
    t0 = time.perf_counter()
    results["rss"] = bench_rss(model, tokenizer, 100 if args.quick else 1000)
    # int8: what `quantize_int8` gives (single-stream keystrokes in the fused native step where it builds);
    # int8_modules: PyTorch's int8 modules alone, the path before the fused step and its fallback.
    models = {"fp32": model, "int8": quantize_int8(model), "int8_modules": quantize_int8(model, fused=False)}
    results["machine"]["fused_step"] = models["int8"].step_kernel is not None
    results["keystroke"] = bench_keystrokes(models, tokenizer, teacher, (16, 64, 128, 256), repeat)
    if args.idle_gap_ms:
        results["idle_keystroke"] = bench_idle_keystrokes(models, tokenizer, teacher, (16, 64, 256),
                                                          10 if args.quick else 30, args.idle_gap_ms / 1e3)
    results["streams"] = bench_streams(models, tokenizer, teacher, (1, 64) if args.quick else (1, 64, 1024))
    from tf2rnn_hf.data.corpus import load_texts

    try:
        texts = load_texts("offline", "heldout", limit=256 if args.quick else 2048)["text"]
    except Exception:  # no Debian access: the bulk figure uses generated sentences instead
        texts = [" ".join(WORDS[i % 7:i % 7 + 12]) for i in range(512)]
    results["bulk"] = bench_bulk({k: models[k] for k in ("fp32", "int8")}, tokenizer, teacher, texts)  # same modules
    results["cells"] = bench_cells(tokenizer, 50 if args.quick else 200)
    results["scale"] = bench_scale(model, tokenizer, teacher, (10, 1000) if args.quick else (10, 1000, 100_000))
    results["distill"] = bench_distill(model, teacher, texts[:256 if args.quick else 1024])
    results["seconds"] = time.perf_counter() - t0
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    (out / "benchmarks.json").write_text(json.dumps(results, indent=1))
    (out / "benchmarks.md").write_text(markdown(results) + "\n")
    print(markdown(results))
    print(f"\n{results['seconds']:.0f} s; wrote {out / 'benchmarks.json'}")


if __name__ == "__main__":
    main()
