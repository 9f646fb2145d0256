#!/usr/bin/env python
"""Speed, memory and scale of a student against its teacher, measured side by side in one run.

    python benchmarks/run.py [--model DIR] [--quick]

Writes benchmarks/results/benchmarks.json and benchmarks/results/benchmarks.md. Every comparison is a
ratio taken in the same process, interleaving the two sides, because these machines are noisy.
Without --model it times a fresh student of the default configuration (speed does not depend on the
weights' values).
"""

import argparse
import gc
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

from tf2rnn_hf import TF2RNNConfig, TF2RNNModel
from tf2rnn_hf.streaming import BatchStreamingEncoder, StreamingEncoder
from tf2rnn_hf.teacher import Teacher

OUT = Path(__file__).parent / "results"
WORDS = ("the quick brown fox jumps over a lazy dog while streams of text arrive one keystroke at a time "
         "and the encoder keeps its state between words so that nothing is read twice").split()


def timed(fn, repeat: int):
    """Per-call times in seconds (after one warm-up call)."""
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


def bench_keystrokes(model, tokenizer, teacher, lengths, repeat):
    """Per keystroke at batch 1: the student's streaming update vs the teacher re-encoding the prefix."""
    rows = []
    for n in lengths:
        prefix = text_of_tokens(tokenizer, n)
        enc = StreamingEncoder(model, tokenizer)
        enc.type(prefix + " ")
        letters = iter("abcdefghij" * 10_000)

        def student_key():  # type a character, as in a word being typed
            enc.type(next(letters))
            if len(enc.text) - len(prefix) > 8:  # keep the word short: delete it back (pops)
                enc.delete(len(enc.text) - len(prefix) - 1)

        ids = teacher.tokenizer([prefix], return_tensors="pt")
        row = {"prefix_tokens": n}
        student_times = []
        for threads in (1, 2):
            torch.set_num_threads(threads)
            for bf16 in (False, True):
                def teacher_call():
                    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                        teacher.model(**ids)
                t_times = []
                for _ in range(repeat):  # interleave the two sides
                    t_times += timed(teacher_call, 1)
                    student_times += timed(student_key, 1)
                row[f"teacher_{'bf16' if bf16 else 'fp32'}_{threads}t"] = summary(t_times)
            row[f"student_{threads}t"] = summary(student_times[-2 * repeat:])
        torch.set_num_threads(2)
        best_teacher = min(row[k]["median_ms"] for k in row if k.startswith("teacher_") and k.endswith("2t"))
        row["speedup_vs_best_teacher_2t"] = best_teacher / row["student_2t"]["median_ms"]
        rows.append(row)
    return rows


def bench_streams(model, tokenizer, teacher, counts, prefix_tokens=64):
    """N concurrent streams each typing one character: updates per second, student vs teacher restart."""
    rows = []
    prefix = text_of_tokens(tokenizer, prefix_tokens)
    for n in counts:
        batch = BatchStreamingEncoder(model, tokenizer)
        ids = batch.open(n)
        batch.type({i: prefix + " w" for i in ids})
        letters = iter("abcdefgh" * 1000)
        reps = max(3, min(20, 2000 // n))

        def student():
            c = next(letters)
            batch.type({i: c for i in ids})

        texts = [prefix + " word"] * n

        def restart():
            teacher.embed_batched([teacher.wrap(x) for x in teacher.tokenizer(texts, add_special_tokens=False)
                                   ["input_ids"]], token_budget=8192)

        s = statistics.median(timed(student, reps))
        t = statistics.median(timed(restart, max(2, reps // 4)))
        rows.append({"streams": n, "student_updates_per_s": n / s, "teacher_updates_per_s": n / t,
                     "ratio": t / s})
    return rows


def bench_bulk(model, tokenizer, teacher, texts):
    """Finished sentences, final embeddings only, batch 64: sentences/s."""
    from tf2rnn_hf.evaluation import static_encoder, student_encoder, teacher_encoder

    vectors = torch.nn.functional.normalize(teacher.model.get_input_embeddings().weight.detach(), dim=-1)
    systems = {"student": student_encoder(model, tokenizer, batch_size=64), "teacher (bf16)": None,
               "teacher (fp32)": teacher_encoder(teacher), "static mean": static_encoder(teacher, vectors)}
    out = {}
    for name, encode in systems.items():
        if encode is None:
            teacher.bf16 = True
            encode = teacher_encoder(teacher)
        start = time.perf_counter()
        encode(texts)
        out[name] = len(texts) / (time.perf_counter() - start)
        teacher.bf16 = False
    return out


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


def bench_rss(model, tokenizer, n=1000):
    gc.collect()
    before = rss_mb()
    batch = BatchStreamingEncoder(model, tokenizer)
    ids = batch.open(n)
    batch.type({i: "a few words typed so far in this session and a partial wo" for i in ids})
    after = rss_mb()
    return {"streams": n, "rss_growth_mb": after - before,
            "per_stream_kb": 1024 * (after - before) / n,
            "current_state_bytes_per_stream": model.init_state(1).nbytes(),
            "teacher_keeps_text_bytes_per_stream": len("a few words typed so far in this session and a partial wo")}


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


def markdown(results) -> str:
    lines = ["| prefix tokens | student ms/keystroke (2t) | teacher fp32 ms (2t) | teacher bf16 ms (2t) | "
             "speed-up vs best teacher |", "|---|---|---|---|---|"]
    for r in results["keystroke"]:
        lines.append(f"| {r['prefix_tokens']} | {r['student_2t']['median_ms']:.3f} (p95 {r['student_2t']['p95_ms']:.3f})"
                     f" | {r['teacher_fp32_2t']['median_ms']:.2f} | {r['teacher_bf16_2t']['median_ms']:.2f} | "
                     f"{r['speedup_vs_best_teacher_2t']:.0f}x |")
    lines += ["", "| concurrent streams | student updates/s | teacher-restart updates/s | ratio |", "|---|---|---|---|"]
    for r in results["streams"]:
        lines.append(f"| {r['streams']} | {r['student_updates_per_s']:.0f} | {r['teacher_updates_per_s']:.0f} | "
                     f"{r['ratio']:.1f}x |")
    lines += ["", "| bulk encoding (batch 64) | sentences/s |", "|---|---|"]
    lines += [f"| {k} | {v:.0f} |" for k, v in results["bulk"].items()]
    lines += ["", "| cell (comparison size) | recurrent params | state bytes per stream | step ms (batch 1) |",
              "|---|---|---|---|"]
    lines += [f"| {k} | {v['recurrent_params']:,} | {v['state_bytes']:,} | {v['step_ms']:.3f} |"
              for k, v in results["cells"].items()]
    r = results["rss"]
    lines += ["", f"RSS growth for {r['streams']} live streams: {r['rss_growth_mb']:.1f} MB "
              f"({r['per_stream_kb']:.1f} KB per stream, including the per-word states kept for deletes); "
              f"the current state alone is {r['current_state_bytes_per_stream']:,} bytes. The teacher instead "
              f"keeps each stream's text and re-reads it at every keystroke."]
    s = results["scale"]["student"]
    lines += ["", "| steps seen | student step ms | state bytes |", "|---|---|---|"]
    lines += [f"| {r['steps_seen']} | {r['step_ms']:.3f} | {r['state_bytes']} |" for r in s]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="A saved student (default: a fresh default-config student).")
    parser.add_argument("--quick", action="store_true", help="Fewer repeats and sizes (a smoke run).")
    parser.add_argument("--output", default=str(OUT))
    parser.add_argument("--keep-denormals", action="store_true",
                        help="Leave denormal floats on (a profile showed them making the GRU step 1.5x slower).")
    args = parser.parse_args()
    torch.set_num_threads(2)
    torch.set_flush_denormal(not args.keep_denormals)
    teacher = Teacher("built-in")
    if args.model:
        from transformers import AutoTokenizer

        model, tokenizer = TF2RNNModel.from_pretrained(args.model).eval(), AutoTokenizer.from_pretrained(args.model)
    else:
        model, tokenizer = TF2RNNModel.from_teacher(teacher, token_init="random")
        model.eval()
    repeat = 10 if args.quick else 60
    results = {"machine": {"python": sys.version.split()[0], "torch": torch.__version__, "cpus": os.cpu_count(),
                           "platform": platform.platform(), "flush_denormal": not args.keep_denormals},
               "student": {"cell": model.config.cell_type, "hidden_size": model.config.hidden_size,
                           "layers": model.config.num_hidden_layers, "source": args.model or "fresh default config"}}
    t0 = time.perf_counter()
    results["keystroke"] = bench_keystrokes(model, tokenizer, teacher, (16, 64, 128, 256), repeat)
    results["streams"] = bench_streams(model, tokenizer, teacher, (1, 64) if args.quick else (1, 64, 1024))
    from tf2rnn_hf.corpus import load_texts

    try:
        texts = load_texts("offline", "heldout", limit=256 if args.quick else 2048)["text"]
    except Exception:  # no Debian access: the bulk figure uses generated sentences instead
        texts = [" ".join(WORDS[i % 7:i % 7 + 12]) for i in range(512)]
    results["bulk"] = bench_bulk(model, tokenizer, teacher, texts)
    results["cells"] = bench_cells(tokenizer, 50 if args.quick else 200)
    results["rss"] = bench_rss(model, tokenizer, 100 if args.quick else 1000)
    results["scale"] = bench_scale(model, tokenizer, teacher, (10, 1000) if args.quick else (10, 1000, 100_000))
    results["seconds"] = time.perf_counter() - t0
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    (out / "benchmarks.json").write_text(json.dumps(results, indent=1))
    (out / "benchmarks.md").write_text(markdown(results) + "\n")
    print(markdown(results))
    print(f"\n{results['seconds']:.0f} s; wrote {out / 'benchmarks.json'}")


if __name__ == "__main__":
    main()
