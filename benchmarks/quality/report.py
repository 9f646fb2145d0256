#!/usr/bin/env python
"""Markdown tables from the quality results: the loss ablation, the cell comparison and the release.

    python benchmarks/quality/report.py > docs/results.md
    python benchmarks/quality/report.py --cells > cells.md   # the comparison alone, for the model card
    python benchmarks/quality/report.py --cells --peers --transfer  # with Model2Vec and transfer (released card)
"""

import json
import sys
from pathlib import Path

from tf2rnn_hf.evaluation.report import format_table

RESULTS = Path(__file__).parent / "results"
KEYS = ("final_cosine", "prefix_cosine", "neighbour_agreement@10", "drift_9-16", "drift_33-64")


def load(name):
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.is_file() else None


SPEED = Path(__file__).parents[1] / "results" / "benchmarks.json"
CELLS = ("gru", "lstm", "linear_attention", "rem", "multistate-k8", "multistate-k32")


def cell_comparison() -> str:
    """Quality (benchmarks/quality/cells.sh) beside per-step latency and state size (benchmarks/run.py)."""
    speed = json.loads(SPEED.read_text()).get("cells", {}) if SPEED.is_file() else {}
    lines = ["### Cell comparison", "",
             "Every cell at ~2.9M recurrent parameters, trained for 5 CPU-minutes (one core) on the same 60k "
             "sentences with the rollout loss; held-out free-running fidelity (1,000 texts). Step time at batch 1 "
             "and state size from `benchmarks/run.py`. Reproduce: `bash benchmarks/quality/cells.sh`.", "",
             "| cell | final cosine | all-prefix cosine | NA@10 | drift 33-64 | step ms | state bytes |",
             "|---|---|---|---|---|---|---|"]
    for name in CELLS:
        r = load(f"cells-{name}")
        if not r:
            continue
        s, b = r["fidelity"]["student"], speed.get(name, {})
        step = f"{b['step_ms']:.3f}" if "step_ms" in b else "n/a"
        state = f"{b['state_bytes']:,}" if "state_bytes" in b else "n/a"
        lines.append(f"| {name} | {s['final_cosine']:.3f} | {s['prefix_cosine']:.3f} | "
                     f"{s['neighbour_agreement@10']:.3f} | {s['drift_33-64']:.3f} | {step} | {state} |")
    return "\n".join(lines)


# Where each training run ran (the figures come from its results file).
SCALE_RUNS = {
    "release-60k": "1 CPU core, 45 min",
    "release-1core": "1 CPU core, 45 min",
    "release-tf2rnn-minilm-small": "1 CPU core, 35 min",
    "release-tf2rnn-minilm-gru": "2 CPU cores (DDP), 45 min",
    "release-s35": "2 AVX2 cores (one process), 45 min",
    # Session 49: the release's recipe at lr 5e-4 on the Zen 4 host; its lr 3e-4 run (AMX host, sessions 44-48).
    "release-lr3e-4": "2 AVX512/AMX cores (one process, bf16, row-sparse table), 45 min",
    "release-tf2rnn-minilm-l1": "2 AVX512-BF16 cores (Zen 4, one process, bf16, row-sparse table, lr 5e-4), 45 min",
    "gpu-h100-gru768": "1 H100, 5 min",
    "gpu-h100-gru1024": "1 H100, 5 min",
    # Two learning rates trained side by side on the one GPU (gpu.sh LRS), each 6.5 minutes.
    "gpu-h200-inherited-fast-lr3e-4": "1 H200 shared by 2 runs, 6.5 min",
    "gpu-h200-inherited-fast-lr6e-4": "1 H200 shared by 2 runs, 6.5 min",
    # Two shapes side by side (gpu.sh SHAPES), 5.7 minutes each after one trajectory pass (session 44).
    "gpu-h200-inherited-fast-l2-512-lr6e-4": "1 H200 shared by 2 runs, 5.7 min",
    "gpu-h200-inherited-fast-l2-lr6e-4": "1 H200 shared by 2 runs, 5.7 min",
    # Session 45: three whole layers, and two at lr 1e-3, side by side for 5.2 minutes (the trajectory pass with shard
    # workers, in the same call).
    "gpu-h200-inherited-fast-l3": "1 H200 shared by 2 runs, 5.2 min",
    "gpu-h200-inherited-fast-l2-lr1e-3": "1 H200 shared by 2 runs, 5.2 min",
    # Session 48: four and six whole layers side by side for 3.85 minutes (the trajectory pass slower beside a check of
    # the row-sparse table on the GPU).
    "gpu-h200-inherited-fast-l4": "1 H200 shared by 2 runs, 3.85 min",
    "gpu-h200-inherited-fast-l6": "1 H200 shared by 2 runs, 3.85 min",
    # Session 46: three whole layers by release.sh from an empty cache, on a host new to the project.
    "release-tf2rnn-minilm-l3-lr3e-4": "2 AVX512-BF16 cores (Zen 4, one process, bf16, row-sparse table), 45 min",
    # Session 47: the same at lr 5e-4, on the same host, its trajectories cached by session 46's run.
    "release-tf2rnn-minilm-l3": "2 AVX512-BF16 cores (Zen 4, one process, bf16, row-sparse table, lr 5e-4), 45 min",
    # Session 50: six whole causal layers by the same recipe at lr 3e-4 with --seed 1 (the second seed of session
    # 49's student.sh row), released as tf2rnn-minilm-l6.
    "release-tf2rnn-minilm-l6": "2 AVX512-BF16 cores (Zen 4, one process, bf16, row-sparse table, lr 3e-4, seed 1), "
                                "45 min",
    # Session 51: two whole layers by the same recipe at lr 5e-4 with --seed 1 (the second seed of session 50's
    # student.sh row), released as tf2rnn-minilm-l2.
    "release-tf2rnn-minilm-l2": "2 AVX512-BF16 cores (Zen 4, one process, bf16, row-sparse table, lr 5e-4, seed 1), "
                                "45 min",
    # Session 52: the same recipe with seed 0, released as the default tf2rnn-minilm (served at 32 cache slots).
    "release": "2 AVX512-BF16 cores (Zen 4, one process, bf16, row-sparse table, lr 5e-4), 45 min",
}


def scale_table() -> str:
    """Quality against training compute: text-passes (texts x epochs) seen by each run, same held-out texts."""
    lines = ["### Quality against training compute", "",
             "Distillation's own held-out check (the first 1,000 held-out sentences, free-running). Text-passes = "
             "training texts x epochs: the training compute each run afforded.", "",
             "| run | where | student | texts | epochs | text-passes | final cosine | all-prefix cosine | NA@10 | "
             "drift 33-64 |", "|---|---|---|---|---|---|---|---|---|---|"]
    for name, where in SCALE_RUNS.items():
        r = load(name)
        if not r:
            continue
        d = r.get("distill", r)
        s, epochs, texts = d["fidelity"]["student"], d["train"]["epoch"], d["args"]["data"]["max_train_texts"]
        model = d["args"]["model"]
        shape = (f"{model['cell_type']}, {model['num_hidden_layers']} layer(s)"
                 if model.get("cell_type", "gru") == "tova_attention" else f"GRU-{model['hidden_size']}")
        if model.get("intermediate_size"):
            shape += f" of {model['intermediate_size']} neurons"
        lines.append(f"| {name} | {where} | {shape} | {texts:,} | {epochs:.2f} | "
                     f"{texts * epochs / 1e6:.2f}M | {s['final_cosine']:.3f} | {s['prefix_cosine']:.3f} | "
                     f"{s['neighbour_agreement@10']:.3f} | {s['drift_33-64']:.3f} |")
    return "\n".join(lines)


def transfer_peer_table() -> str:
    """Students, the teacher, one token late and the real Model2Vec side by side on what transfers: STS-B
    (whole and half sentences), neighbour agreement@10 on held-out sentences and on keystroke prefixes, and
    the retrieval / similarity suites. Students come from `tf2rnn evaluate` files (quick-eval.json: the
    `make distill` student, two inherited layers since session 53; quick-l1-eval.json: the one layer it trained from
    session 35 to 52; quick-gru-eval.json: the GRU-768 it trained until 2026-11-26; quick-wordnet-eval.json:
    that GRU before it drew across sources; release.json: two inherited layers at 32 cache slots since session 52;
    release-tf2rnn-minilm-l1.json, release-lr3e-4.json (until session 49) and release-s35.json (its recipe before
    session 44): the one layer released from session 35 to 51;
    release-tf2rnn-minilm-gru.json: the GRU-768 released
    before it; gpu-h200-inherited-fast-*-eval.json: the released shape and two- to six-layer shapes trained on a
    lent H200),
    the peer from
    benchmarks/peers/model2vec.sh."""
    peer = load("peer-model2vec")
    students = {name: load(file) for name, file in (("student (make distill)", "quick-eval"),
                                                    ("student (make distill in sessions 35-52, one inherited layer)",
                                                     "quick-l1-eval"),
                                                    ("student (make distill until 2026-11-26, GRU-768)",
                                                     "quick-gru-eval"),
                                                    ("student (make distill, GRU-768, WordNet head)",
                                                     "quick-wordnet-eval"),
                                                    ("student (tf2rnn-minilm: two inherited layers at 32 cache "
                                                     "slots, 2 CPU cores)", "release"),
                                                    ("student (tf2rnn-minilm-l1: one inherited layer, the default "
                                                     "of sessions 49-51)", "release-tf2rnn-minilm-l1"),
                                                    ("student (that layer until session 49: lr 3e-4, AMX host)",
                                                     "release-lr3e-4"),
                                                    ("student (that layer, session 35: 150,000 texts on AVX2)",
                                                     "release-s35"),
                                                    ("student (tf2rnn-minilm until 2026-11-26, GRU-768)",
                                                     "release-tf2rnn-minilm-gru"),
                                                    ("student (tf2rnn-minilm-fast-gpu: its shape, one H200)",
                                                     "gpu-h200-inherited-fast-lr6e-4-eval"),
                                                    ("student (two inherited layers of 512 neurons, one H200)",
                                                     "gpu-h200-inherited-fast-l2-512-lr6e-4-eval"),
                                                    ("student (tf2rnn-minilm-l2-gpu: two inherited layers, one H200)",
                                                     "gpu-h200-inherited-fast-l2-lr6e-4-eval"),
                                                    ("student (tf2rnn-minilm-l3-gpu: three inherited layers, one H200)",
                                                     "gpu-h200-inherited-fast-l3-eval"),
                                                    ("student (four inherited layers, one H200)",
                                                     "gpu-h200-inherited-fast-l4-eval"),
                                                    ("student (tf2rnn-minilm-l6-gpu: six causal inherited layers, "
                                                     "one H200)", "gpu-h200-inherited-fast-l6-eval"),
                                                    ("student (three inherited layers, 2 CPU cores, lr 3e-4)",
                                                     "release-tf2rnn-minilm-l3-lr3e-4"),
                                                    ("student (tf2rnn-minilm-l3: three inherited layers, 2 CPU cores)",
                                                     "release-tf2rnn-minilm-l3"),
                                                    ("student (tf2rnn-minilm-l2: two inherited layers, 2 CPU cores)",
                                                     "release-tf2rnn-minilm-l2"),
                                                    ("student (tf2rnn-minilm-l6: six causal inherited layers, 2 CPU "
                                                     "cores)", "release-tf2rnn-minilm-l6"),
                                                    ("student (the same recipe, seed 0: session 49's student.sh row)",
                                                     "tf2rnn-minilm-l6-seed0-eval"),
                                                    ("student (tf2rnn-minilm-l6-tail2-int4: six layers, the upper four "
                                                     "at word ends, int4, 32 slots)",
                                                     "release-tf2rnn-minilm-l6-tail2-int4"),
                                                    ("student (its fp32 stage at 32 slots, no int4 stage)",
                                                     "slots-tf2rnn-minilm-l6-tail2-int4-fp32-s32-eval"),
                                                    ("student (its int4 stage with learned scales, 3,000 steps)",
                                                     "student-l6-tail2-int4-lsq-ata616b2c-eval"),
                                                    ("student (its int4 stage with learned scales, 6,000 steps)",
                                                     "student-l6-tail2-int4-lsq-6000-atc2b64e8-eval"))}
    students = {k: v for k, v in students.items() if v and "sts-b" in v.get("suites", {})}
    if not peer and not students:
        return ""
    rows = {}

    def row(suites, system):
        cells = {}
        if system in suites.get("sts-b", {}):
            cells["STS-B"] = suites["sts-b"][system]["spearman"]
            cells["STS-B@50%"] = suites["sts-b"][system]["spearman@50%"]
            if "teacher_agreement@50%" in suites["sts-b"][system]:
                cells["STS-B@50% rank agreement with teacher"] = suites["sts-b"][system]["teacher_agreement@50%"]
        if system in suites.get("fidelity", {}):
            cells["NA@10 held-out"] = suites["fidelity"][system].get("neighbour_agreement@10", float("nan"))
        for suite, key in (("bible", "recall@1"), ("wordnet", "recall@1"), ("lee", "pearson")):
            if system in suites.get(suite, {}):
                cells[f"{suite} {key}"] = suites[suite][system][key]
        return cells

    first = next(iter(students.values()), None) or peer
    rows["teacher"] = row(first["suites"], "teacher")
    for name, result in students.items():
        rows[name] = row(result["suites"], "student")
    if students:
        rows["one token late"] = row(next(iter(students.values()))["suites"], "one token late")
    if peer:
        rows["Model2Vec (real, PCA 256)"] = row(peer["suites"], peer["peer"])
        rows["Model2Vec (real, PCA 256)"]["NA@10 keystrokes"] = peer["suites"]["keystroke"][peer["peer"]][
            "neighbour_agreement@10"]
    return format_table(rows, "Transfer: students, the teacher and a real Model2Vec peer (STS-B test x100; "
                              "`tf2rnn evaluate --suites sts-b,...` and benchmarks/peers/model2vec.sh)")


# (row, evaluation file, training file, whether it trained on the `make distill` texts: WordNet glosses only)
STUDENTS = (("GRU-768 (make distill until it drew across sources)", "quick-wordnet-eval", None, True),
            ("inherited, 6 layers, untrained", "student-tova-l6-stage0-eval", None, True),
            ("inherited, 6 layers", "student-tova-l6-eval", "student-tova-l6", True),
            ("inherited, 3 layers", "student-tova-l3-eval", "student-tova-l3", True),
            ("inherited, 2 layers", "student-tova-l2-eval", "student-tova-l2", True),
            ("inherited, 6 layers, bidirectional pooling", "student-tova-l6-bidi-eval", "student-tova-l6-bidi", True),
            ("inherited, 6 layers, lr 3e-4", "student-tova-l6-lr3e-4-eval", "student-tova-l6-lr3e-4", True),
            ("inherited, 6 layers, lr 1e-3", "student-tova-l6-lr1e-3-eval", "student-tova-l6-lr1e-3", True),
            ("inherited, 6 layers, lr 3e-4, length-grouped batches", "student-tova-l6-lr3e-4-grouped-eval",
             "student-tova-l6-lr3e-4-grouped", True),
            ("inherited, 6 layers, lr 3e-4, length-grouped batches, last step weighted 4",
             "student-tova-l6-lr3e-4-grouped-final4-eval", "student-tova-l6-lr3e-4-grouped-final4", True),
            ("the same two rows with seed 1 (batch order): weight 1", "student-tova-l6-lr3e-4-grouped-seed1-eval",
             "student-tova-l6-lr3e-4-grouped-seed1", True),
            ("the same two rows with seed 1 (batch order): last step weighted 4",
             "student-tova-l6-lr3e-4-grouped-final4-seed1-eval", "student-tova-l6-lr3e-4-grouped-final4-seed1", True),
            ("inherited, 6 layers, 30,000 texts across sources, 20 min", "student-tova-l6-sampled-eval",
             "student-tova-l6-sampled", False),
            ("inherited, 6 layers, the same 30,000 texts, 20 min, lr 3e-4", "student-tova-l6-sampled-lr3e-4-eval",
             "student-tova-l6-sampled-lr3e-4", False),
            ("inherited, 6 layers, the same 30,000 texts, 20 min, lr 3e-4, length-grouped batches",
             "student-tova-l6-sampled-lr3e-4-grouped-eval", "student-tova-l6-sampled-lr3e-4-grouped", False),
            ("inherited, 6 layers, the same 30,000 texts, 20 min, lr 3e-4, length-grouped batches, "
             "position-weighted pooling (p from 1, learned)", "student-tova-l6-sampled-lr3e-4-grouped-posweight-eval",
             "student-tova-l6-sampled-lr3e-4-grouped-posweight", False),
            ("inherited, 6 layers, the same 30,000 texts, 20 min, lr 3e-4, length-grouped batches, "
             "position-weighted pooling, last step weighted 4",
             "student-tova-l6-sampled-lr3e-4-grouped-posweight-final4-eval",
             "student-tova-l6-sampled-lr3e-4-grouped-posweight-final4", False),
            ("the same, batches of 32 (the rows above: 64)",
             "student-tova-l6-sampled-lr3e-4-grouped-posweight-final4-bs32-eval",
             "student-tova-l6-sampled-lr3e-4-grouped-posweight-final4-bs32", False),
            ("the same on the first 12,000 of those texts (the rows above: 30,000)",
             "student-tova-l6-sampled12k-lr3e-4-grouped-posweight-final4-eval",
             "student-tova-l6-sampled12k-lr3e-4-grouped-posweight-final4", False),
            ("the same (30,000 texts) plus the neighbour loss at weight 1 (bank 8,192, temperature 0.05)",
             "student-tova-l6-sampled-lr3e-4-grouped-posweight-final4-neighbour1-eval",
             "student-tova-l6-sampled-lr3e-4-grouped-posweight-final4-neighbour1", False),
            ("the same (30,000 texts) plus the neighbour loss at weight 0.2",
             "student-tova-l6-sampled-lr3e-4-grouped-posweight-final4-neighbour0.2-eval",
             "student-tova-l6-sampled-lr3e-4-grouped-posweight-final4-neighbour0.2", False),
            ("the same (30,000 texts) with the token table frozen (the teacher's)",
             "student-tova-l6-sampled-lr3e-4-grouped-posweight-final4-frozen-table-eval",
             "student-tova-l6-sampled-lr3e-4-grouped-posweight-final4-frozen-table", False),
            ("the same (30,000 texts) keeping 768 of each layer's 1,536 feed-forward neurons (the most active; the rest's mean in the bias)",
             "student-tova-l6-ffn768-sampled-lr3e-4-grouped-posweight-final4-eval",
             "student-tova-l6-ffn768-sampled-lr3e-4-grouped-posweight-final4", False),
            ("the same keeping 768 neurons, their down projection refitted to the whole block by least squares",
             "student-tova-l6-ffn768-refit-sampled-lr3e-4-grouped-posweight-final4-eval",
             "student-tova-l6-ffn768-refit-sampled-lr3e-4-grouped-posweight-final4", False),
            ("the same keeping 384 neurons, refitted", "student-tova-l6-ffn384-refit-sampled-lr3e-4-grouped-posweight-final4-eval",
             "student-tova-l6-ffn384-refit-sampled-lr3e-4-grouped-posweight-final4", False),
            ("the preset's 20-minute recipe again on the trainer of 0e1bc07 (no attention over empty slots; the "
             "length-grouped sampler sorts plain ints)",
             "student-tova-l6-sampled-lr3e-4-grouped-posweight-final4-at0e1bc07-eval",
             "student-tova-l6-sampled-lr3e-4-grouped-posweight-final4-at0e1bc07", False),
            ("the same 20 minutes (trainer of 0e1bc07) on 60,000 sampled texts (holding the 30,000)",
             "student-tova-l6-sampled60k-lr3e-4-grouped-posweight-final4-eval",
             "student-tova-l6-sampled60k-lr3e-4-grouped-posweight-final4", False),
            ("the same 20 minutes (trainer of ac3402c) on 100,000 sampled texts (holding the 60,000)",
             "student-tova-l6-sampled100k-lr3e-4-grouped-posweight-final4-ata55724a-eval",
             "student-tova-l6-sampled100k-lr3e-4-grouped-posweight-final4-ata55724a", False),
            ("the same 100,000 texts and 20 minutes with a target at every 2nd prefix (--stride 2)",
             "student-tova-l6-sampled100k-stride2-lr3e-4-grouped-posweight-final4-at7949fbe-eval",
             "student-tova-l6-sampled100k-stride2-lr3e-4-grouped-posweight-final4-at7949fbe", False),
            ("150,000 texts and 20 minutes with a target at every 3rd prefix (--stride 3)",
             "student-tova-l6-sampled150k-stride3-lr3e-4-grouped-posweight-final4-at91006fd-eval",
             "student-tova-l6-sampled150k-stride3-lr3e-4-grouped-posweight-final4-at91006fd", False),
            ("the same 20 minutes with every prefix up to 4 tokens kept (--dense_prefixes 4)",
             "student-tova-l6-sampled150k-stride3-dense4-lr3e-4-grouped-posweight-final4-at3a7afeb-eval",
             "student-tova-l6-sampled150k-stride3-dense4-lr3e-4-grouped-posweight-final4-at3a7afeb", False),
            ("inherited, 6 layers, the same 30,000 texts, 45 min", "student-tova-l6-sampled-45-eval",
             "student-tova-l6-sampled-45", False),
            ("inherited, 6 layers, the same 30,000 texts, 45 min, lr 3e-4", "student-tova-l6-sampled-45-lr3e-4-eval",
             "student-tova-l6-sampled-45-lr3e-4", False),
            ("inherited, 6 layers, the same 30,000 texts, 45 min, lr 3e-4, length-grouped batches",
             "student-tova-l6-sampled-45-lr3e-4-grouped-eval", "student-tova-l6-sampled-45-lr3e-4-grouped", False),
            ("inherited, 6 layers, the same 30,000 texts, 45 min, lr 3e-4, length-grouped batches, "
             "position-weighted pooling (p from 1, learned)", "student-tova-l6-sampled-45-lr3e-4-grouped-posweight-eval",
             "student-tova-l6-sampled-45-lr3e-4-grouped-posweight", False),
            ("inherited, 6 layers, the same 30,000 texts, 90 min, lr 3e-4, length-grouped batches, "
             "last step weighted 4", "student-tova-l6-sampled-90-lr3e-4-grouped-final4-eval",
             "student-tova-l6-sampled-90-lr3e-4-grouped-final4", False),
            ("inherited, 6 layers, the same 30,000 texts, 60 min, lr 3e-4, length-grouped batches, "
             "position-weighted pooling, last step weighted 4",
             "student-tova-l6-sampled-60-lr3e-4-grouped-posweight-final4-eval",
             "student-tova-l6-sampled-60-lr3e-4-grouped-posweight-final4", False),
            ("the same 60 minutes on the trainer of 0e1bc07",
             "student-tova-l6-sampled-60-lr3e-4-grouped-posweight-final4-at0e1bc07-eval",
             "student-tova-l6-sampled-60-lr3e-4-grouped-posweight-final4-at0e1bc07", False),
            ("the 60,000 texts for 45 minutes on the trainer of ac3402c (44 minutes of trajectories from an empty "
             "cache: the issue's 90 in all)",
             "student-tova-l6-sampled60k-45-lr3e-4-grouped-posweight-final4-atac3402c-eval",
             "student-tova-l6-sampled60k-45-lr3e-4-grouped-posweight-final4-atac3402c", False),
            ("the 100,000 texts for 45 minutes with a target at every 2nd prefix (--stride 2: their trajectories from "
             "an empty cache fit the issue's 90 minutes beside the training)",
             "student-tova-l6-sampled100k-stride2-45-lr3e-4-grouped-posweight-final4-ata55724a-eval",
             "student-tova-l6-sampled100k-stride2-45-lr3e-4-grouped-posweight-final4-ata55724a", False),
            ("150,000 texts for 45 minutes with a target at every 3rd prefix (--stride 3; trajectories from an empty "
             "cache inside the issue's 90 minutes)",
             "student-tova-l6-sampled150k-stride3-45-lr3e-4-grouped-posweight-final4-atd993c24-eval",
             "student-tova-l6-sampled150k-stride3-45-lr3e-4-grouped-posweight-final4-atd993c24", False),
            ("the same with every prefix up to 4 tokens kept (--dense_prefixes 4; trajectories from an empty cache "
             "in a slower phase of the host)",
             "student-tova-l6-sampled150k-stride3-dense4-45-lr3e-4-grouped-posweight-final4-ate37f861-eval",
             "student-tova-l6-sampled150k-stride3-dense4-45-lr3e-4-grouped-posweight-final4-ate37f861", False),
            ("150,000 texts at --stride 3, 20 min, the newest three tokens open (--open_tokens 3)",
             "student-tova-l6-sampled150k-stride3-open3-lr3e-4-grouped-posweight-final4-ated37f861-eval",
             "student-tova-l6-sampled150k-stride3-open3-lr3e-4-grouped-posweight-final4-ated37f861", False),
            ("the same, 45 min (the card student of sessions 24-25)",
             "student-tova-l6-sampled150k-stride3-open3-45-lr3e-4-grouped-posweight-final4-ated37f861-eval",
             "student-tova-l6-sampled150k-stride3-open3-45-lr3e-4-grouped-posweight-final4-ated37f861", False),
            ("the 20-min open-token row less FOLDOC's texts (--exclude_sources dict-foldoc; a slow host phase)",
             "student-tova-l6-sampled150k-stride3-open3-no-foldoc-lr3e-4-grouped-posweight-final4-atc7defd2-eval",
             "student-tova-l6-sampled150k-stride3-open3-no-foldoc-lr3e-4-grouped-posweight-final4-atc7defd2", False),
            ("the 20-min open-token row less fortunes' texts (--exclude_sources fortunes; a slow host phase)",
             "student-tova-l6-sampled150k-stride3-open3-no-fortunes-lr3e-4-grouped-posweight-final4-atfb4b852-eval",
             "student-tova-l6-sampled150k-stride3-open3-no-fortunes-lr3e-4-grouped-posweight-final4-atfb4b852", False),
            ("150,000 texts at --stride 3, 20 min, the newest six tokens open (--open_tokens 6)",
             "student-tova-l6-sampled150k-stride3-open6-lr3e-4-grouped-posweight-final4-atc7defd2-eval",
             "student-tova-l6-sampled150k-stride3-open6-lr3e-4-grouped-posweight-final4-atc7defd2", False),
            ("the same, 45 min (the 90-minute recipe: the card student since session 26)",
             "student-tova-l6-sampled150k-stride3-open6-45-lr3e-4-grouped-posweight-final4-at51e0747-eval",
             "student-tova-l6-sampled150k-stride3-open6-45-lr3e-4-grouped-posweight-final4-at51e0747", False),
            ("150,000 texts at --stride 3, 20 min, the newest eight tokens open (--open_tokens 8)",
             "student-tova-l6-sampled150k-stride3-open8-lr3e-4-grouped-posweight-final4-atac4a30e-eval",
             "student-tova-l6-sampled150k-stride3-open8-lr3e-4-grouped-posweight-final4-atac4a30e", False),
            ("the same, 45 min",
             "student-tova-l6-sampled150k-stride3-open8-45-lr3e-4-grouped-posweight-final4-at62e9228-eval",
             "student-tova-l6-sampled150k-stride3-open8-45-lr3e-4-grouped-posweight-final4-at62e9228", False),
            ("eight open tokens, 20 min, a quarter of the targets inside a block (--open_middle_fraction 0.25)",
             "student-tova-l6-sampled150k-stride3-open8-mid25-lr3e-4-grouped-posweight-final4-at064aa1b-eval",
             "student-tova-l6-sampled150k-stride3-open8-mid25-lr3e-4-grouped-posweight-final4-at064aa1b", False),
            ("its control: every target, the same code and session",
             "student-tova-l6-sampled150k-stride3-open8-lr3e-4-grouped-posweight-final4-at064aa1b-eval",
             "student-tova-l6-sampled150k-stride3-open8-lr3e-4-grouped-posweight-final4-at064aa1b", False),
            ("the control again, on session 31's machine (a repeat of the same recipe)",
             "student-tova-l6-sampled150k-stride3-open8-lr3e-4-grouped-posweight-final4-atc7ac7d7-eval",
             "student-tova-l6-sampled150k-stride3-open8-lr3e-4-grouped-posweight-final4-atc7ac7d7", False),
            ("its recipe less fortunes' texts (--exclude_sources fortunes), right after it",
             "student-tova-l6-sampled150k-stride3-open8-no-fortunes-lr3e-4-grouped-posweight-final4-atc7ac7d7-eval",
             "student-tova-l6-sampled150k-stride3-open8-no-fortunes-lr3e-4-grouped-posweight-final4-atc7ac7d7", False),
            ("its recipe less FOLDOC's texts (--exclude_sources dict-foldoc, session 32)",
             "student-tova-l6-sampled150k-stride3-open8-no-foldoc-lr3e-4-grouped-posweight-final4-atc7ac7d7-eval",
             "student-tova-l6-sampled150k-stride3-open8-no-foldoc-lr3e-4-grouped-posweight-final4-atc7ac7d7", False),
            ("sixteen open tokens, 20 min (the control's recipe, --open_tokens 16)",
             "student-tova-l6-sampled150k-stride3-open16-lr3e-4-grouped-posweight-final4-at40bae08-eval",
             "student-tova-l6-sampled150k-stride3-open16-lr3e-4-grouped-posweight-final4-at40bae08", False),
            ("twenty-four open tokens, 20 min (--open_tokens 24)",
             "student-tova-l6-sampled150k-stride3-open24-lr3e-4-grouped-posweight-final4-at40bae08-eval",
             "student-tova-l6-sampled150k-stride3-open24-lr3e-4-grouped-posweight-final4-at40bae08", False),
            ("sixteen open tokens less FOLDOC's texts, 20 min (session 33)",
             "student-tova-l6-sampled150k-stride3-open16-no-foldoc-lr3e-4-grouped-posweight-final4-at1f78114-eval",
             "student-tova-l6-sampled150k-stride3-open16-no-foldoc-lr3e-4-grouped-posweight-final4-at1f78114", False),
            ("sixteen open tokens, 45 min (--open_tokens 16, the card recipe's minutes)",
             "student-tova-l6-sampled150k-stride3-open16-45-lr3e-4-grouped-posweight-final4-at1f78114-eval",
             "student-tova-l6-sampled150k-stride3-open16-45-lr3e-4-grouped-posweight-final4-at1f78114", False),
            ("the same, --seed 1 (another batch order; session 34)",
             "student-tova-l6-sampled150k-stride3-open16-45-seed1-lr3e-4-grouped-posweight-final4-at1f78114-eval",
             "student-tova-l6-sampled150k-stride3-open16-45-seed1-lr3e-4-grouped-posweight-final4-at1f78114", False),
            ("inherited, 6 layers, 60,000 sampled texts (holding the 30,000), 45 min, lr 3e-4, length-grouped batches",
             "student-tova-l6-sampled60k-45-lr3e-4-grouped-eval", "student-tova-l6-sampled60k-45-lr3e-4-grouped",
             False),
            ("inherited, 3 layers, the same 30,000 texts, 20 min", "student-tova-l3-sampled-eval",
             "student-tova-l3-sampled", False),
            ("GRU 2x480, residual", "student-gru-l2-residual-eval", "student-gru-l2-residual", True),
            ("GRU 3x384, residual", "student-gru-l3-residual-eval", "student-gru-l3-residual", True),
            ("GRU-640, MLP readout", "student-gru-mlp-readout-eval", "student-gru-mlp-readout", True))


def padding_table() -> str:
    """Padded over real tokens (and token pairs) per batch of 64, random against length-grouped (padding.py)."""
    r = load("padding")
    if not r:
        return ""
    rows = {name: {"texts": d["texts"], "mean tokens": d["mean_tokens"], "99th pct tokens": d["p99_tokens"],
                   "random: tokens": d["random"]["tokens"], "random: pairs": d["random"]["pairs"],
                   "grouped: tokens": d["group_by_length"]["tokens"], "grouped: pairs": d["group_by_length"]["pairs"]}
            for name, d in r.items() if isinstance(d, dict)}
    return format_table(rows, "Padding (padding.py): padded / real tokens, and token pairs (attention), over one epoch "
                              "of batches of 64, random (`RandomSampler`) or length-grouped (`LengthGroupedSampler`, "
                              "`--train_sampling_strategy group_by_length`)")


L2_QUICK = "tova-l2-quick-bf16-lr3e-4-grouped-posweight-final4-at369c36c"  # make distill's recipe (student.sh, s53)
L2_QUICK_INT4 = "tova-l2-quick-int4row-bf16-lr3e-4-grouped-posweight-final4-at8977845"  # the same, --weight_bits 4
# Session 54's release-budget rows: a control by the release's recipe and step count, int4 from the start, and int4 as
# a second stage of 3,000 and 9,000 steps from the control.
L2_RELEASE = "tova-l2-steps23290-bf16-sparse-sampled300k-stride3-lr5e-4-grouped-posweight-final4-at07011a6"
# Session 58: the same recipe and steps on every training sentence of the default corpus (472,249).
L2_ALL = "tova-l2-steps23290-bf16-sparse-all472k-stride3-lr5e-4-grouped-posweight-final4-ata1a9c51"
L2_RELEASE_INT4 = "tova-l2-steps23290-int4row-bf16-sparse-sampled300k-stride3-lr5e-4-grouped-posweight-final4-at8977845"
L2_RELEASE_THEN_INT4 = \
    "tova-l2-steps23290-then-int4row-3000-lr1e-4-bf16-sparse-sampled300k-stride3-grouped-posweight-final4-atf0a2b50"
L2_RELEASE_THEN_INT4_9K = \
    "tova-l2-steps23290-then-int4row-9000-lr1e-4-bf16-sparse-sampled300k-stride3-grouped-posweight-final4-at35a8944"
# Session 55's second stages from the same control: clipped scales and the readout kept fp32, the readout kept alone
# (--weight_bits since 4ac82ff), and the same 3,000 steps in fp32.
L2_THEN_INT4_CLIP = ("tova-l2-steps23290-then-int4row-clip-keepreadout-3000-lr1e-4-bf16-sparse-sampled300k-stride3-grouped-"
                     "posweight-final4-at73265e4")
L2_THEN_INT4_KEEP = ("tova-l2-steps23290-then-int4row-keepreadout-3000-lr1e-4-bf16-sparse-sampled300k-stride3-grouped-"
                     "posweight-final4-at73265e4")
L2_THEN_FP32 = "tova-l2-steps23290-then-fp32-3000-lr1e-4-bf16-sparse-sampled300k-stride3-grouped-posweight-final4-at73265e4"


def weight_bits_table() -> str:
    """Fidelity with every linear weight rounded to fewer bits, weights only (weight_bits.py)."""
    tables = []
    # The six-layer 90-minute student and the card's (with int7); then two layers at make distill's budget trained
    # in fp32 and trained through int4 per row (--weight_bits 4, session 54): rounded after training, or on the grid;
    # then two layers by the release's recipe in fp32 (23,290 steps).
    for name in ("weight-bits", "weight-bits-card", f"weight-bits-{L2_QUICK}", f"weight-bits-{L2_QUICK_INT4}",
                 f"weight-bits-{L2_RELEASE}"):
        r = load(name)
        if r:
            tables.append(format_table(r["schemes"], f"Weight bits (weight_bits.py, {r['model']}, {r['texts']} "
                                                     "held-out texts across sources; activations fp32)"))
    return "\n\n".join(tables)


def _unseen_sources(by_source: dict, trained_on: str = "wordnet-base") -> dict:
    """Final cosine on the sources the WordNet-head quick texts never include (its 12,000 texts are WordNet glosses),
    weighted by their held-out counts, beside the source it trained on."""
    other = {k: v for k, v in by_source.items() if k != trained_on}
    n = sum(v["texts"] for v in other.values())
    return {"final_cosine, trained-on source": by_source[trained_on]["final_cosine"],
            "final_cosine, unseen sources": sum(v["final_cosine"] * v["texts"] for v in other.values()) / n}


def student_table() -> str:
    """Student v2 (student.sh): students that inherit the teacher's layers, against the GRU of `make distill`,
    at its data and time; per-keystroke cost from `benchmarks/run.py --compare` (student-speed.json)."""
    ratio, streamed_by = {}, {}
    # Later runs measure new students beside older ones (in another phase of the host), so a student's figure comes
    # from the first run, in this order, that measured it: student-speed, then -v2 (after the fused step's
    # filled-slot attention), -v7 (after the live cache: the card student and the feed-forward rows), -v9 (the
    # 60-minute student of 0e1bc07), -v10 (the 60,000-text student of ac3402c), -v11 (the --stride 2 student). Each
    # ratio is teacher vs student within one run.
    for file in ("student-speed", "student-speed-v2", "student-speed-v7", "student-speed-v9", "student-speed-v10",
                 "student-speed-v11"):
        speed = load(file) or {}
        for row in speed.get("keystroke", []):
            for key, value in row.items():
                if key.startswith("speedup_") and not key.endswith("_cold"):
                    ratio.setdefault((key[len("speedup_"):], row["prefix_tokens"]), value)
        for student, streamed in speed.get("streamed_fidelity", {}).get("students", {}).items():
            streamed_by.setdefault(student, streamed)
    rows = {}
    for name, eval_file, train_file, wordnet_only in STUDENTS:
        r = load(eval_file)
        if not r:
            continue
        s_ = r["suites"]
        f = s_["fidelity"]["student"]
        trained = load(train_file) if train_file else None
        row = {**({"epochs": trained["train"]["epoch"]} if trained else {}),
               "final_cosine": f["final_cosine"], "NA@10": f["neighbour_agreement@10"],
               **(_unseen_sources(s_["fidelity-by-source"]) if wordnet_only else {}),
               "keystroke_cosine": s_["keystroke"]["student"]["keystroke_cosine"],
               "STS-B": s_["sts-b"]["student"]["spearman"], "STS-B@50%": s_["sts-b"]["student"]["spearman@50%"],
               "bible R@1": s_["bible"]["student"]["recall@1"], "wordnet R@1": s_["wordnet"]["student"]["recall@1"],
               "lee pearson": s_["lee"]["student"]["pearson"],
               "wordsim353": s_["wordsim"]["student"]["wordsim353_spearman"]}
        folder = Path(r["model"]).name
        for tokens in (64, 256):
            if (f"{folder}_int8", tokens) in ratio:
                row[f"x cheaper per keystroke @{tokens} (int8)"] = ratio[(f"{folder}_int8", tokens)]
        streamed = streamed_by.get(f"{folder}_int8")
        if streamed:  # typed token by token through the int8 keystroke path, against its own fp32 forward
            row["int8 keystroke path: cosine to fp32"] = streamed["cosine_to_fp32_forward"]
        rows[name] = row
        teacher = s_
    if not rows:
        return ""
    rows["teacher"] = {"final_cosine": 1.0, "NA@10": 1.0, "STS-B": teacher["sts-b"]["teacher"]["spearman"],
                       "STS-B@50%": teacher["sts-b"]["teacher"]["spearman@50%"],
                       "bible R@1": teacher["bible"]["teacher"]["recall@1"],
                       "wordnet R@1": teacher["wordnet"]["teacher"]["recall@1"],
                       "lee pearson": teacher["lee"]["teacher"]["pearson"],
                       "wordsim353": teacher["wordsim"]["teacher"]["wordsim353_spearman"]}
    return format_table(rows, "Student v2 (student.sh): the teacher's own layers made causal over a TOVA-bounded "
                              "cache, and GRUs of other depth or readout at GRU-768's bytes per keystroke, against "
                              "the GRU of `make distill`; the same 12,000 texts and 7 minutes on 2 cores unless "
                              "named; `tf2rnn evaluate` on held-out texts of every source; cost from "
                              "`benchmarks/run.py --compare` (student-speed.json; student-speed-v2.json for "
                              "the students it alone measured; student-speed-v7.json for the 60-minute student "
                              "and the feed-forward rows, a later kernel and host phase; student-speed-v9.json "
                              "for the 60-minute student of 0e1bc07, where the 60-minute card student measured 23x / 44x; "
                              "student-speed-v10.json for the 60,000-text student of ac3402c, where the 60-minute "
                              "student it replaces measured 25x / 40x; student-speed-v11.json for the --stride 2 "
                              "student, in a slower phase of the host where the 60,000-text student measured "
                              "17x / 31x)")


def transfer_row(seen: dict, left: dict) -> dict:
    """One source's row from two fidelity suites on its held-out sentences: a student trained with the source
    (`seen`) and the same recipe without it (`left`); the target is NA@10 within 0.05."""
    gap = seen["student"]["neighbour_agreement@10"] - left["student"]["neighbour_agreement@10"]
    return {"texts": left["_n_texts"],
            "trained on: final_cosine": seen["student"]["final_cosine"],
            "left out: final_cosine": left["student"]["final_cosine"],
            "trained on: NA@10": seen["student"]["neighbour_agreement@10"],
            "left out: NA@10": left["student"]["neighbour_agreement@10"],
            "NA@10 lost": gap, "within 0.05": "met" if gap <= 0.05 else "missed",
            "one token late: NA@10": left["one token late"]["neighbour_agreement@10"]}


def transfer_table() -> str:
    """Leave one source out (transfer.sh): on each source's held-out sentences, the GRU quick recipe's student that
    never saw the source beside the one trained on the same draw with it."""
    rows = {}
    for path in sorted(RESULTS.glob("transfer-left-out-*.json")):
        source = path.stem[len("transfer-left-out-"):]
        left, seen = load(path.stem)["suites"]["fidelity"], load(f"transfer-trained-on-{source}")
        if not seen:
            continue
        rows[source] = transfer_row(seen["suites"]["fidelity"], left)
        # release.sh's students: the default (two whole layers at 32 cache slots since session 52); the GRU-768
        # trained on the corpus's first 200,000 rows, which hold three sources only; the one-layer inherited student
        # that replaced it (sessions 35-51), on 150,000 then 300,000 drawn across all five; its shape
        # trained on a lent H200 (gpu.sh), on 470,000 drawn across all five; two and three whole layers trained there
        # alike (six causal ones since session 48); two, three and six whole layers released from 2 CPU cores (300,000
        # drawn across all five; three at lr 3e-4, then 5e-4); session 66's six with the upper four at word ends.
        for label, file in (("released", "transfer-released"),
                            ("one layer (tf2rnn-minilm-l1)", "transfer-released-l1"),
                            ("one layer at lr 3e-4 (until session 49)", "transfer-released-lr3e-4"),
                            ("GRU release", "transfer-released-gru"),
                            ("H200 fast tier", "transfer-released-fast-gpu"),
                            ("H200 two layers", "transfer-released-l2-gpu"),
                            ("H200 three layers", "transfer-released-l3-gpu"),
                            ("H200 six causal layers", "transfer-released-l6-gpu"),
                            ("CPU two layers", "transfer-released-l2"),
                            ("CPU three layers, lr 3e-4", "transfer-released-l3-lr3e-4"),
                            ("CPU three layers", "transfer-released-l3"),
                            ("CPU six causal layers", "transfer-released-l6"),
                            ("CPU six layers, K = 2, int4", "transfer-released-l6-tail2-int4")):
            released = load(f"{file}-{source}")
            if not released:
                continue
            by_source = released["distill"].get("train_texts_by_source")
            rows[source][f"{label}: NA@10"] = released["suites"]["fidelity"]["student"]["neighbour_agreement@10"]
            rows[source][f"{label} trained on it"] = ("unknown" if by_source is None else
                                                      f"yes ({by_source[source]:,} texts)" if source in by_source
                                                      else "no")
    return format_table(rows, "Leave one source out (transfer.sh): the GRU-768 quick recipe (--preset quick-gru) on "
                              "12,000 texts drawn across sources, with and without one source, scored on that "
                              "source's held-out sentences; and the released students on the same sentences") if rows else ""


# Session 59's 2,000-step rows (student.sh): layers, "no-foldoc-" or "", and the variant.
_S2K = "tova-l{}-steps2000-{}{}-bf16-lr3e-4-grouped-posweight-final4-at898d0cd"
# (source, a student.sh row trained on every source, the same recipe without the source): both scored on the
# source's held-out sentences by student.sh's on_source (results student-<row>-on-<source>.json).
STUDENT_TRANSFER = (("dict-foldoc, three open tokens", "dict-foldoc",
                     "tova-l6-sampled150k-stride3-open3-lr3e-4-grouped-posweight-final4-ated37f861",
                     "tova-l6-sampled150k-stride3-open3-no-foldoc-lr3e-4-grouped-posweight-final4-atc7defd2"),
                    ("fortunes, three open tokens", "fortunes",
                     "tova-l6-sampled150k-stride3-open3-lr3e-4-grouped-posweight-final4-ated37f861",
                     "tova-l6-sampled150k-stride3-open3-no-fortunes-lr3e-4-grouped-posweight-final4-atfb4b852"),
                    ("fortunes, eight open tokens (both rows of session 31)", "fortunes",
                     "tova-l6-sampled150k-stride3-open8-lr3e-4-grouped-posweight-final4-atc7ac7d7",
                     "tova-l6-sampled150k-stride3-open8-no-fortunes-lr3e-4-grouped-posweight-final4-atc7ac7d7"),
                    ("dict-foldoc, eight open tokens (the same control, session 32)", "dict-foldoc",
                     "tova-l6-sampled150k-stride3-open8-lr3e-4-grouped-posweight-final4-atc7ac7d7",
                     "tova-l6-sampled150k-stride3-open8-no-foldoc-lr3e-4-grouped-posweight-final4-atc7ac7d7"),
                    ("dict-foldoc, sixteen open tokens (session 33)", "dict-foldoc",
                     "tova-l6-sampled150k-stride3-open16-lr3e-4-grouped-posweight-final4-at40bae08",
                     "tova-l6-sampled150k-stride3-open16-no-foldoc-lr3e-4-grouped-posweight-final4-at1f78114"),
                    ("dict-foldoc, one causal layer at make distill's 12,000 texts and 7 minutes (session 34)",
                     "dict-foldoc", "tova-l1-quick-lr3e-4-grouped-posweight-final4-at1f78114",
                     "tova-l1-quick-no-foldoc-lr3e-4-grouped-posweight-final4-at1f78114"),
                    ("dict-foldoc, two causal layers at make distill's budget (session 53)", "dict-foldoc",
                     "tova-l2-quick-bf16-lr3e-4-grouped-posweight-final4-at369c36c",
                     "tova-l2-quick-no-foldoc-bf16-lr3e-4-grouped-posweight-final4-at369c36c"),
                    ("fortunes, two causal layers at make distill's budget (session 53)", "fortunes",
                     "tova-l2-quick-bf16-lr3e-4-grouped-posweight-final4-at369c36c",
                     "tova-l2-quick-no-fortunes-bf16-lr3e-4-grouped-posweight-final4-at369c36c"),
                    ("dict-foldoc, two causal layers at the release's budget (300,000 texts, 23,290 steps; "
                     "sessions 54-55)", "dict-foldoc", L2_RELEASE,
                     "tova-l2-steps23290-no-foldoc-bf16-sparse-sampled300k-stride3-lr5e-4-grouped-posweight-final4-"
                     "at07011a6"),
                    ("dict-foldoc, two causal layers at make distill's 12,000 texts for 2,000 steps, fp32 (session 57)",
                     "dict-foldoc", "tova-l2-steps2000-control-fp32-lr3e-4-grouped-posweight-final4-atbe6c5e1",
                     "tova-l2-steps2000-no-foldoc-control-fp32-lr3e-4-grouped-posweight-final4-atbe6c5e1"),
                    ("dict-foldoc, the same with layer 1 aligned to the teacher's hidden state 3 (session 57)",
                     "dict-foldoc", "tova-l2-steps2000-align13w01-fp32-lr3e-4-grouped-posweight-final4-atbe6c5e1",
                     "tova-l2-steps2000-no-foldoc-align13w01-fp32-lr3e-4-grouped-posweight-final4-atbe6c5e1"),
                    ("dict-foldoc, two causal layers at the release's 23,290 steps on every training sentence "
                     "(472,249; session 58)", "dict-foldoc", L2_ALL,
                     "tova-l2-steps23290-no-foldoc-bf16-sparse-all472k-stride3-lr5e-4-grouped-posweight-final4-"
                     "ata1a9c51"),
                    ("dict-foldoc, two causal layers at make distill's 12,000 texts for 2,000 steps, bf16 (session 59)",
                     "dict-foldoc", _S2K.format(2, "", "control"), _S2K.format(2, "no-foldoc-", "control")),
                    ("dict-foldoc, the same with the newest four tokens open (session 59)", "dict-foldoc",
                     _S2K.format(2, "", "open4"), _S2K.format(2, "no-foldoc-", "open4")),
                    ("dict-foldoc, two causal layers, 2,000 steps at 32 slots, fp32 (session 62)", "dict-foldoc",
                     "tova-l2-steps2000-sentences-train32-fp32-lr3e-4-grouped-posweight-final4-at76aab9f",
                     "tova-l2-steps2000-no-foldoc-train32-fp32-lr3e-4-grouped-posweight-final4-at76aab9f"),
                    ("dict-foldoc, three causal layers, the same (session 64)", "dict-foldoc",
                     "tova-l3-steps2000-sentences-train32-fp32-lr3e-4-grouped-posweight-final4-at3b9ec25",
                     "tova-l3-steps2000-no-foldoc-train32-fp32-lr3e-4-grouped-posweight-final4-at39639a3"),
                    ("dict-foldoc, six causal layers with K = 2, the same (session 69)", "dict-foldoc",
                     "tova-l6-tail2-steps2000-train32-fp32-lr3e-4-grouped-posweight-final4-at8ce0e96",
                     "tova-l6-tail2-steps2000-no-foldoc-train32-fp32-lr3e-4-grouped-posweight-final4-at8ce0e96"))


def student_transfer_table() -> str:
    """Leave one source out for the inherited student (student.sh): issue 19's left-out source target."""
    rows = {}
    for label, source, seen, left in STUDENT_TRANSFER:
        seen, left = load(f"student-{seen}-on-{source}"), load(f"student-{left}-on-{source}")
        if seen and left:
            rows[label] = transfer_row(seen["suites"]["fidelity"], left["suites"]["fidelity"])
    return format_table(rows, "Leave one source out, inherited student (student.sh): an open-token 20-minute row "
                              "(150,000 texts at --stride 3) unless the label says otherwise, and the same draw less "
                              "the source's texts, scored on that source's held-out sentences") if rows else ""


# Depth against cost (student.sh): (label, the shape student.sh times in student-speed-v21.json, the row whose
# fidelity that shape had: a 20-minute row on the card recipe's 150,000 texts at --stride 3 where one exists).
DEPTH_COST = (("GRU-768 (`make distill` until 2026-11-26: its own 12,000 texts, 7 min)", "gru768", "quick-gru-eval",
               None),
              ("inherited, 1 layer, causal", "l1", "student-tova-l1-sampled150k-stride3-lr3e-4-grouped-posweight-"
               "final4-at064aa1b-eval", "student-tova-l1-sampled150k-stride3-lr3e-4-grouped-posweight-final4-at064aa1b"),
              ("inherited, 1 layer, causal, at `make distill`'s texts and 7 minutes", "l1",
               "student-tova-l1-quick-lr3e-4-grouped-posweight-final4-at1f78114-eval",
               "student-tova-l1-quick-lr3e-4-grouped-posweight-final4-at1f78114"),
              ("inherited, 1 layer copied from the teacher's first", "l1", "student-tova-l1-layer0-sampled150k-stride3-"
               "lr3e-4-grouped-posweight-final4-at1d357c2-eval", "student-tova-l1-layer0-sampled150k-stride3-lr3e-4-"
               "grouped-posweight-final4-at1d357c2"),
              ("the fast tier (1 layer, 45 min: `--preset inherited-fast`)", "l1", "student-tova-l1-sampled150k-stride3-"
               "45-lr3e-4-grouped-posweight-final4-at1d357c2-eval", "student-tova-l1-sampled150k-stride3-45-lr3e-4-"
               "grouped-posweight-final4-at1d357c2"),
              ("inherited, 2 layers, causal", "l2", "student-tova-l2-sampled150k-stride3-lr3e-4-grouped-posweight-"
               "final4-at064aa1b-eval", "student-tova-l2-sampled150k-stride3-lr3e-4-grouped-posweight-final4-at064aa1b"),
              ("inherited, 2 layers, causal, 45 min", "l2", "student-tova-l2-sampled150k-stride3-45-lr3e-4-grouped-"
               "posweight-final4-at080bfdb-eval", "student-tova-l2-sampled150k-stride3-45-lr3e-4-grouped-posweight-"
               "final4-at080bfdb"),
              ("inherited, 3 layers, causal", "l3", "student-tova-l3-sampled150k-stride3-lr3e-4-grouped-posweight-"
               "final4-atc7ac7d7-eval", "student-tova-l3-sampled150k-stride3-lr3e-4-grouped-posweight-final4-atc7ac7d7"),
              ("inherited, 6 layers, causal, at `make distill`'s texts and 7 minutes (`--preset inherited`)", "l6",
               "student-tova-l6-quick-lr3e-4-grouped-posweight-final4-at1f78114-eval",
               "student-tova-l6-quick-lr3e-4-grouped-posweight-final4-at1f78114"),
              ("inherited, 6 layers, causal (trainer of 91006fd)", "l6",
               "student-tova-l6-sampled150k-stride3-lr3e-4-grouped-posweight-final4-at91006fd-eval",
               "student-tova-l6-sampled150k-stride3-lr3e-4-grouped-posweight-final4-at91006fd"),
              ("inherited, 3 layers, eight open tokens", "l3-open8", "student-tova-l3-sampled150k-stride3-open8-lr3e-4-"
               "grouped-posweight-final4-at064aa1b-eval", "student-tova-l3-sampled150k-stride3-open8-lr3e-4-grouped-"
               "posweight-final4-at064aa1b"),
              ("inherited, 6 layers, eight open tokens", "l6-open8", "student-tova-l6-sampled150k-stride3-open8-lr3e-4-"
               "grouped-posweight-final4-at064aa1b-eval", "student-tova-l6-sampled150k-stride3-open8-lr3e-4-grouped-"
               "posweight-final4-at064aa1b"),
              ("the card student (6 layers, eight open tokens, 45 min)", "l6-open8", "student-tova-l6-sampled150k-"
               "stride3-open8-45-lr3e-4-grouped-posweight-final4-at62e9228-eval", "student-tova-l6-sampled150k-stride3-"
               "open8-45-lr3e-4-grouped-posweight-final4-at62e9228"))


def _scored(r, trained) -> dict:
    """A row's fidelity, STS-B and keystroke cosine from its evaluation, and its training speed where it trained."""
    row = {}
    if r:
        s_ = r["suites"]
        f = s_["fidelity"]["student"]
        row.update({"final_cosine": f["final_cosine"], "NA@10": f["neighbour_agreement@10"],
                    "STS-B": s_["sts-b"]["student"]["spearman"],
                    "keystroke_cosine": s_["keystroke"]["student"]["keystroke_cosine"]})
    if trained:
        row.update({"samples/s": trained["train"]["train_samples_per_second"], "epochs": trained["train"]["epoch"]})
    return row


def _int8_ratios(run: dict, prefix: str = "shape-") -> dict:
    """A speed run's int8 keystroke ratios by (student, prefix tokens), for the students whose folder name starts with
    `prefix`, named without it (by default the shapes, without `shape-`; "" for every student, named whole)."""
    head = f"speedup_{prefix}"
    return {(key[len(head):-len("_int8")], row["prefix_tokens"]): value for row in run["keystroke"]
            for key, value in row.items() if key.startswith(head) and key.endswith("_int8")}


def depth_cost_table() -> str:
    """Fidelity against per-keystroke cost by depth and open tokens: issue 19's speed target as a curve."""
    speed, before = load("student-speed-v22"), load("student-speed-v21")
    if not speed or not before:
        return ""
    ratio, ratio_before = _int8_ratios(speed), _int8_ratios(before)
    rows = {}
    for label, shape, eval_file, train_file in DEPTH_COST:
        info = speed["students"].get(f"shape-{shape}", {})
        row = {"weights per token (M)": info.get("parameters_without_token_table", float("nan")) / 1e6,
               **{f"x cheaper per keystroke @{n}": ratio[(shape, n)] for n in (16, 64, 256) if (shape, n) in ratio},
               "@64 in v21": ratio_before.get((shape, 64), float("nan"))}
        row.update(_scored(load(eval_file), load(train_file) if train_file else None))
        rows[label] = row
    return format_table(rows, "Depth against cost (student.sh): per keystroke, int8, batch 1, against the teacher "
                              "re-encoding the prefix, every shape in one run (student-speed-v22.json, with the lean "
                              "keystroke of 314fc19; v21's ratio at 64 tokens, before it, beside; fresh students: "
                              "speed does not depend on the weights' values); fidelity of the trained rows, 150,000 "
                              "texts at --stride 3 for 20 minutes unless named; a blank is a row not trained")


# Open-block width against cost (student.sh): (label, width, a row on the card recipe's texts, the speed runs
# that timed its shape and the name each timed it under). Ratios move with the host's phase, so each run has its
# own columns and only widths timed in the same run compare.
PROBE = Path(__file__).parents[1] / "probes" / "results" / "block-causal-wide.json"
_ROW = "student-tova-l6-sampled150k-stride3-open{}-lr3e-4-grouped-posweight-final4-at{}"
_OPEN16, _OPEN24 = _ROW.format(16, "40bae08"), _ROW.format(24, "40bae08")
_OPEN16_TIMED = (("student-speed-v23", _OPEN16), ("student-speed-v24", _OPEN16))  # the 45-minute rows share its shape
OPEN_WIDTH = (("8 open tokens, 20 min", 8, _ROW.format(8, "c7ac7d7"), (("student-speed-v23", "shape-l6-open8"),)),
              ("16 open tokens, 20 min", 16, _OPEN16, _OPEN16_TIMED),
              ("24 open tokens, 20 min", 24, _OPEN24, (("student-speed-v24", _OPEN24),)),
              ("16 open tokens, 45 min", 16, _ROW.replace("open{}", "open{}-45").format(16, "1f78114"), _OPEN16_TIMED),
              ("16 open tokens, 45 min, --seed 1", 16, _ROW.replace("open{}", "open{}-45-seed1").format(16, "1f78114"),
               _OPEN16_TIMED))


def open_width_table() -> str:
    """Fidelity against per-keystroke cost by open-block width: untrained (the block-causal probe) and trained."""
    probe = json.loads(PROBE.read_text())["rows"] if PROBE.is_file() else {}
    rows = {}
    for label, width, name, timings in OPEN_WIDTH:
        r = load(f"{name}-eval")
        if not r:
            continue
        row = {"NA@10 untrained": probe.get(f"W={width}", {}).get("neighbour_agreement@10", float("nan")),
               **_scored(r, load(name))}
        for run, timed in timings:
            speed = load(run)
            for keystroke in speed["keystroke"] if speed else ():
                if keystroke["prefix_tokens"] in (64, 256):
                    row[f"x cheaper @{keystroke['prefix_tokens']} ({run[len('student-speed-'):]})"] = \
                        keystroke[f"speedup_{timed}_int8"]
        rows[label] = row
    return format_table(rows, "Open-block width against cost (student.sh): six inherited layers, the card recipe's "
                              "150,000 texts at --stride 3 for the minutes named; NA@10 of the teacher itself under the "
                              "block-causal mask (benchmarks/probes/block_causal.py, block-causal-wide.json) beside "
                              "the trained row's; per keystroke, int8, batch 1, keystrokes over every block "
                              "alignment, against the teacher in the same run (student-speed-v23/-v24.json; a blank "
                              "is a width that run did not time)") if rows else ""

# One layer, widened or started otherwise (student.sh, session 37): (label, the shape student-speed-v26.json timed, the
# trained row or None for a shape only timed).
_Q = "student-tova-l1-{}quick-lr3e-4-grouped-posweight-final4-at{}"
_S = "student-tova-l1-{}sampled150k-stride3-lr3e-4-grouped-posweight-final4-at{}"
ONE_LAYER = (("1 layer, causal (the control, this host)", "l1", _Q.format("", "79f1ab7")),
             ("1 layer, three open tokens", "l1-open3", _Q.format("open3-", "79f1ab7")),
             ("1 layer, token table at the last layer's inputs (`--token_init layer_inputs`)", "l1",
              _Q.format("layerin-", "ef38806")),
             ("1 layer, causal, 150,000 texts, 20 min (session 29's host)", "l1", _S.format("", "064aa1b")),
             ("1 layer, causal, 150,000 texts, 20 min (the control, this host)", "l1", _S.format("", "3b1871b")),
             ("1 layer, layer_inputs, 150,000 texts, 20 min", "l1", _S.format("layerin-", "3b1871b")),
             ("1 layer, two open tokens (timed only)", "l1-open2", None),
             ("1 layer, four open tokens (timed only)", "l1-open4", None),
             ("2 layers (timed only here)", "l2", None))


def one_layer_table() -> str:
    """The fast tier's shape with open tokens or a layer-input start: fidelity at `make distill`'s budget (and the
    depth rows' 20 minutes), cost on an AMX host whose teacher runs bf16 (student-speed-v26.json)."""
    speed = load("student-speed-v26")
    if not speed:
        return ""
    ratio = _int8_ratios(speed)
    rows = {}
    for label, shape, name in ONE_LAYER:
        if name and not load(f"{name}-eval"):
            continue
        rows[label] = {**{f"x cheaper per keystroke @{n} (v26)": ratio.get((shape, n), float("nan"))
                          for n in (16, 64, 256)},
                       **(_scored(load(f"{name}-eval"), load(name)) if name else {})}
    return format_table(rows, "One layer, widened or started otherwise (student.sh, session 37): `make distill`'s "
                              "12,000 texts and 7 minutes unless named; per keystroke, int8, batch 1, against the "
                              "teacher in one run on an AVX512-VNNI + AMX host, where the teacher's bf16 runs on AMX "
                              "(2x its fp32 at 256 tokens), so these ratios sit below the AVX2 host's (v22: one layer "
                              "105x / 306x)")

# The kernel's gemvs and attention vectorised (student.sh, session 38): (label, the file, the shapes it timed).
KERNEL_RUNS = (("before 8419218", "student-speed-v27-before", ("l1", "l2", "l6-open8")),
               ("8419218, run 1", "student-speed-v27", ("l1", "l2", "l6-open8")),
               ("8419218, run 2", "student-speed-v27-2", ("l1", "l2")),
               ("8419218, run 3", "student-speed-v27-3", ("l1", "l2")),
               ("d890625 (the session's end)", "student-speed-v28", ("l1", "l2", "gru768")))


def kernel_table() -> str:
    """Per keystroke before and after the vectorised kernel, one run a row: the ratios with the student's and the
    best teacher setting's times at 256 tokens, as this host's teacher drifts between runs."""
    rows = {}
    for label, file, shapes in KERNEL_RUNS:
        speed = load(file)
        if not speed:
            continue
        at = {row["prefix_tokens"]: row for row in speed["keystroke"]}
        for shape in shapes:
            name = f"shape-{shape}_int8"
            rows[f"{shape}, {label}"] = {
                **{f"x cheaper @{n}": at[n][f"speedup_{name}"] for n in (16, 64, 256)},
                "student ms @256 (2 threads)": at[256][f"student_{name}_2t"]["median_ms"],
                "teacher ms @256 (best)": min(v["median_ms"] for k, v in at[256].items() if k.startswith("teacher_"))}
    return format_table(rows, "The keystroke kernel's gemvs and attention vectorised (student.sh, session 38): per "
                              "keystroke, int8, batch 1, `benchmarks/run.py --quick --compare` alone on the AVX512-VNNI "
                              "+ AMX host, each row one run (student-speed-v27*.json, -v28.json); l1 / l2: one / two "
                              "inherited layers, l6-open8 the card's shape, gru768 GRU-768's") if rows else ""


# The offline-xl corpus at the quick recipe (student.sh, session 40): (label, the row's corpus).
CORPUS_ROWS = (("1 layer, 12,000 texts drawn from `offline` (the default)", "offline"),
               ("1 layer, 12,000 texts drawn from `offline-xl` (57% documentation)", "offline-xl"))
DEFAULT_SOURCES = ("wordnet-base", "fortunes", "dict-gcide", "dict-foldoc", "dict-jargon")


def _mean_cosine(by_source: dict, sources) -> float:
    """Final cosine over the named sources' held-out texts (each source weighted by its texts)."""
    rows = [by_source[s] for s in sources if s in by_source]
    return sum(r["final_cosine"] * r["texts"] for r in rows) / sum(r["texts"] for r in rows)


def corpus_table() -> str:
    """Fidelity on the default held-out texts and on offline-xl's, by the corpus the student trained on."""
    rows = {}
    for label, corpus in CORPUS_ROWS:
        name = f"student-tova-l1-quick-{corpus}-lr3e-4-grouped-posweight-final4-atb38806"
        xl = load(f"{name}-xl-eval")
        if not xl or not load(f"{name}-eval"):
            continue
        by_source, fidelity = xl["suites"]["fidelity-by-source"], xl["suites"]["fidelity"]["student"]
        docs = [s for s in by_source if s not in DEFAULT_SOURCES]
        rows[label] = {**_scored(load(f"{name}-eval"), load(name)),
                       "final_cosine, offline-xl held-out": fidelity["final_cosine"],
                       "NA@10, offline-xl held-out": fidelity["neighbour_agreement@10"],
                       f"final_cosine, its {len(docs)} documentation sources": _mean_cosine(by_source, docs),
                       "final_cosine, its 5 default sources": _mean_cosine(by_source, DEFAULT_SOURCES)}
    return format_table(rows, "The offline-xl corpus at the quick recipe (student.sh, session 40): one inherited "
                              "layer, `--preset quick`'s recipe (12,000 texts drawn across the corpus's sources, 7 "
                              "minutes), back to back; scored by `tf2rnn evaluate` on the default held-out texts "
                              "(final_cosine to keystroke_cosine) and on 1,000 of offline-xl's (fidelity only; by "
                              "source, each weighted by its texts)") if rows else ""


# Depth at about one layer's weights (student.sh, session 41): (label, the shape the speed runs timed, the trained row).
_THIN = "student-tova-{}-{}-lr3e-4-grouped-posweight-final4-at{}"
THIN_DEPTH = (("1 layer, all 1,536 neurons, 150,000 texts, 20 min (session 37's control)", "l1",
               _THIN.format("l1", "sampled150k-stride3", "3b1871b")),
              ("2 layers, 512 neurons each, 150,000 texts, 20 min", "l2-ffn512",
               _THIN.format("l2-ffn512-refit", "sampled150k-stride3", "066361d")),
              ("the same, the teacher's first and last layers (`--teacher_layers 0,5`)", "l2-ffn512",
               _THIN.format("l2-ffn512-refit-layers0-5", "sampled150k-stride3", "066361d")),
              ("2 layers, all 1,536 neurons each, 150,000 texts, 20 min", "l2",
               _THIN.format("l2", "sampled150k-stride3", "066361d")),
              ("3 layers, 128 neurons each, 150,000 texts, 20 min", "l3-ffn128",
               _THIN.format("l3-ffn128-refit", "sampled150k-stride3", "066361d")),
              ("1 layer, all 1,536 neurons, 12,000 texts, 7 min (session 37's control)", "l1",
               _THIN.format("l1", "quick", "79f1ab7")),
              ("2 layers, 512 neurons each, 12,000 texts, 7 min", "l2-ffn512", _THIN.format("l2-ffn512", "quick", "066361d")),
              ("3 layers, 128 neurons each, 12,000 texts, 7 min", "l3-ffn128", _THIN.format("l3-ffn128", "quick", "066361d")),
              # Session 44: the fast tier's release recipe (bf16, row-sparse table), this shape beside the l1 row.
              ("1 layer, 300,000 texts, 45 min, bf16, row-sparse table (session 43; the release's recipe)", "l1",
               "student-tova-l1-bf16-sparse-sampled300k-stride3-45min-lr3e-4-grouped-posweight-final4-at287013b"),
              ("2 layers, 512 neurons each, the same recipe", "l2-ffn512",
               "student-tova-l2-ffn512-bf16-sparse-sampled300k-stride3-45min-lr3e-4-grouped-posweight-final4-at4181bf9"),
              # Session 45: three whole layers on that data for the one-layer row's 20 minutes (speed: v34, gpu table).
              ("1 layer, 300,000 texts, 20 min, bf16, row-sparse table (session 43)", "l1",
               "student-tova-l1-bf16-sparse-sampled300k-stride3-lr3e-4-grouped-posweight-final4-at287013b"),
              ("3 whole layers, the same 20 minutes", "l3",
               "student-tova-l3-bf16-sparse-sampled300k-stride3-lr3e-4-grouped-posweight-final4-at5648abb"),
              # Session 46: the release's whole recipe for three whole layers (release.sh, from an empty cache), on an
              # AVX512-BF16 host without AMX (Zen 4); a release file holds its training run under "distill".
              ("3 whole layers, 300,000 texts, 45 min, the release's recipe (lr 3e-4) on a Zen 4 host", "l3",
               "release-tf2rnn-minilm-l3-lr3e-4"),
              ("2 whole layers, the same recipe and host (student.sh)", "l2",
               "student-tova-l2-bf16-sparse-sampled300k-stride3-45min-lr3e-4-grouped-posweight-final4-atb34ba2a"),
              # Session 47: three whole layers by the same recipe at lr 5e-4, twice: student.sh, then release.sh (the
              # middle tier's card, trajectories cached by session 46's run).
              ("3 whole layers, the same recipe and host at lr 5e-4 (student.sh)", "l3",
               "student-tova-l3-bf16-sparse-sampled300k-stride3-45min-lr5e-4-grouped-posweight-final4-at4f1105c"),
              ("the same again by release.sh (tf2rnn-minilm-l3)", "l3", "release-tf2rnn-minilm-l3"),
              ("3 whole layers, the same recipe and host at lr 7e-4 (student.sh)", "l3",
               "student-tova-l3-bf16-sparse-sampled300k-stride3-45min-lr7e-4-grouped-posweight-final4-at4f1105c"),
              # Session 48: one layer by the release's recipe on the Zen 4 host, at the preset's rate and at 5e-4.
              ("1 layer, the same recipe and host at lr 3e-4 (student.sh)", "l1",
               "student-tova-l1-bf16-sparse-sampled300k-stride3-45min-lr3e-4-grouped-posweight-final4-at49b681e"),
              ("1 layer, the same at lr 5e-4 (student.sh)", "l1",
               "student-tova-l1-bf16-sparse-sampled300k-stride3-45min-lr5e-4-grouped-posweight-final4-at49b681e"),
              # Session 49: the preset at lr 5e-4, released by release.sh on the same host (tf2rnn-minilm).
              ("the same again by release.sh (tf2rnn-minilm from session 49 to 51, now tf2rnn-minilm-l1)", "l1",
               "release-tf2rnn-minilm-l1"),
              # Session 49: six whole causal layers by the same recipe and host at lr 3e-4 (card tf2rnn-minilm-l6).
              ("6 whole causal layers, the same recipe and host at lr 3e-4 (student.sh)", "l6",
               "student-tova-l6-bf16-sparse-sampled300k-stride3-45min-lr3e-4-grouped-posweight-final4-at3a17242"),
              # Session 50: the same with --seed 1 by release.sh (the card tf2rnn-minilm-l6 since then).
              ("the same with `--seed 1` by release.sh (tf2rnn-minilm-l6)", "l6", "release-tf2rnn-minilm-l6"),
              ("6 whole causal layers, the same recipe and host at lr 5e-4 (student.sh)", "l6",
               "student-tova-l6-bf16-sparse-sampled300k-stride3-45min-lr5e-4-grouped-posweight-final4-at9a32608"),
              ("2 whole layers, the same recipe and host at lr 5e-4 (student.sh)", "l2",
               "student-tova-l2-bf16-sparse-sampled300k-stride3-45min-lr5e-4-grouped-posweight-final4-at9a32608"),
              # Session 51: the same with --seed 1 by release.sh (the card tf2rnn-minilm-l2).
              ("the same with `--seed 1` by release.sh (tf2rnn-minilm-l2)", "l2", "release-tf2rnn-minilm-l2"),
              # Session 52: the same with seed 0 by release.sh, served at 32 cache slots (the default tf2rnn-minilm).
              ("the same with seed 0 by release.sh at 32 cache slots (tf2rnn-minilm)", "l2", "release"),
              # Sessions 52-53: one and two whole layers at `make distill`'s budget (bf16), on the Zen 4 host, and two
              # again on the Zen 5 host (the control of the left-out-source rows).
              ("1 whole layer, 12,000 texts, 7 min, bf16 (`make distill`'s budget; session 52, Zen 4)", "l1",
               "student-tova-l1-quick-bf16-lr3e-4-grouped-posweight-final4-atf73b56a"),
              ("2 whole layers, the same (`--preset quick` since session 53)", "l2",
               "student-tova-l2-quick-bf16-lr3e-4-grouped-posweight-final4-atf73b56a"),
              ("2 whole layers, the same on the Zen 5 host (session 53)", "l2",
               "student-tova-l2-quick-bf16-lr3e-4-grouped-posweight-final4-at369c36c"))
THIN_SPEED = ("student-speed-v32", "student-speed-v33", "student-speed-v34", "student-speed-v35", "student-speed-v36",
              "student-speed-v38", "student-speed-v39", "student-speed-v40")


def _evaluated(name: str):
    """A row's evaluation and training results: `<name>-eval` and `<name>` (student.sh, gpu.sh), or one release file
    holding both (release.sh); (None, None) where neither is here."""
    if (evaluation := load(f"{name}-eval")) is not None:
        return evaluation, load(name)
    release = load(name)
    return (release, release["distill"]) if release and "distill" in release else (None, None)


def _speed_runs(names) -> dict:
    """The speed runs (`student-speed-*` results) that exist, by their short name (v33, ...)."""
    return {run[len("student-speed-"):]: speed for run in names if (speed := load(run))}


def _keystroke_columns(shape: str, runs: dict, prefix: str = "shape-") -> dict:
    """A student's size and int8 keystroke ratios in each speed run that timed it (`<prefix><shape>`: the shapes by
    default, "" for a student named whole); none where untimed."""
    row = {}
    for run, speed in runs.items():
        if f"{prefix}{shape}" not in speed["students"]:
            continue
        row["parameters without the token table (M)"] = \
            speed["students"][f"{prefix}{shape}"]["parameters_without_token_table"] / 1e6
        ratios = _int8_ratios(speed, prefix)
        row.update({f"x cheaper @{n} ({run})": ratios[(shape, n)] for n in (64, 256)})
    return row


def thin_depth_table() -> str:
    """Inherited layers that keep fewer feed-forward neurons, at about one layer's parameters: fidelity at two budgets,
    and cost per keystroke against the one-layer shape in the same run."""
    runs = _speed_runs(THIN_SPEED)
    rows = {}
    for label, shape, name in THIN_DEPTH:
        evaluation, trained = _evaluated(name)
        if evaluation:
            rows[label] = {**_keystroke_columns(shape, runs), **_scored(evaluation, trained)}
    return format_table(rows, "Depth on 2 CPU cores (student.sh, sessions 41 and 44-53; release.sh, sessions 46-52): "
                              "inherited layers keeping their most important feed-forward neurons "
                              "(`--intermediate_size`, refitted), the teacher's last layer alone or layers evenly "
                              "spaced up to it; the depth rows' recipe and `make distill`'s, each on the AVX512-VNNI + "
                              "AMX host of its control unless the row names another; per keystroke, int8, batch 1, "
                              "against the teacher, the shapes of one speed run timed together (v32-v34 on the AMX "
                              "host, v35-v36 and v38-v40 on the Zen 4 host; a blank: not timed in that run)") if rows else ""


# Depth at GPU scale (gpu.sh on lent H200s, 470,000 texts, the fast tier's recipe at batch 256): (label, the shape the
# speed run timed, the results file of the run, evaluated here as <name>-eval).
GPU_DEPTH = (("1 layer, lr 6e-4, 6.5 min (session 36; tf2rnn-minilm-fast-gpu)", "l1", "gpu-h200-inherited-fast-lr6e-4"),
             ("2 layers of 512 neurons, lr 6e-4, 5.7 min (session 44)", "l2-ffn512",
              "gpu-h200-inherited-fast-l2-512-lr6e-4"),
             ("2 whole layers, lr 6e-4, 5.7 min (session 44; tf2rnn-minilm-l2-gpu)", "l2",
              "gpu-h200-inherited-fast-l2-lr6e-4"),
             ("2 whole layers, lr 1e-3, 5.2 min (session 45)", "l2", "gpu-h200-inherited-fast-l2-lr1e-3"),
             ("3 whole layers, lr 6e-4, 5.2 min (session 45; tf2rnn-minilm-l3-gpu)", "l3", "gpu-h200-inherited-fast-l3"),
             ("4 whole layers, lr 6e-4, 3.85 min (session 48)", "l4", "gpu-h200-inherited-fast-l4"),
             ("6 whole layers, causal, lr 6e-4, 3.85 min (session 48)", "l6", "gpu-h200-inherited-fast-l6"))
GPU_DEPTH_SPEED = ("student-speed-v33", "student-speed-v34", "student-speed-v35", "student-speed-v36")


def gpu_depth_table() -> str:
    """Depth at GPU scale: each shape's fidelity, STS-B, long passages and similarity suites from `tf2rnn evaluate`,
    and its cost per keystroke from the speed runs that timed it."""
    runs = _speed_runs(GPU_DEPTH_SPEED)
    rows = {}
    for label, shape, name in GPU_DEPTH:
        evaluation, trained = _evaluated(name)
        if not evaluation:
            continue
        suites = evaluation["suites"]
        rows[label] = {**_keystroke_columns(shape, runs), **_scored(evaluation, trained),
                       "long final cosine": suites["long"]["student"]["final_cosine"],
                       "Lee": suites["lee"]["student"]["pearson"],
                       "SimLex": suites["wordsim"]["student"]["simlex999_spearman"]}
    return format_table(rows, "Depth at GPU scale (gpu.sh, one lent H200 per session shared by two runs, 470,000 "
                              "texts, a target every third prefix, batches of 256): `tf2rnn evaluate` here on the "
                              "1,000 held-out texts across sources; per keystroke, int8, batch 1, against the "
                              "teacher on 2 CPU cores (v33-v34: the AVX512-VNNI + AMX host; v35-v36: the Zen 4 host), the shapes of one "
                              "speed run timed together (a blank: not timed in that run)") if rows else ""


# The cache's slot count as an inference budget (student.sh, session 51): (depth, the release file at 128 slots, the
# shape the speed runs timed at 128); at 64, 48 and 32 slots the same weights, evaluated as slots-<model>-s<n>-eval and
# timed as the folder <model>-s<n>.
SLOTS = (("2 whole layers (tf2rnn-minilm-l2)", "release-tf2rnn-minilm-l2", "shape-l2"),
         ("3 whole layers (tf2rnn-minilm-l3)", "release-tf2rnn-minilm-l3", "shape-l3"),
         ("6 causal layers (tf2rnn-minilm-l6)", "release-tf2rnn-minilm-l6", "shape-l6"))
SLOTS_SPEED = ("student-speed-v41", "student-speed-v42", "student-speed-v43", "student-speed-v44",
               "student-speed-v45")


def slots_table() -> str:
    """Each released depth at 128, 64, 48 and 32 cache slots: fidelity on sentences and 100+-token passages, STS-B, Lee, and
    the int8 keystroke ratio in the speed runs that timed that slot count (a blank: not timed in that run)."""
    runs = _speed_runs(SLOTS_SPEED)
    rows = {}
    for label, release, shape in SLOTS:
        model = release[len("release-"):]
        for slots, name, timed in ((128, release, shape),
                                   *((n, f"slots-{model}-s{n}-eval", f"{model}-s{n}") for n in (64, 48, 32))):
            evaluation = load(name)
            if not evaluation:
                continue
            suites = evaluation["suites"]
            row = {"final cosine": suites["fidelity"]["student"]["final_cosine"],
                   "NA@10": suites["fidelity"]["student"]["neighbour_agreement@10"],
                   "STS-B": suites["sts-b"]["student"]["spearman"],
                   "passages: final cosine": suites["long"]["student"]["final_cosine"],
                   "passages: NA@10": suites["long"]["student"]["neighbour_agreement@10"],
                   "Lee": suites["lee"]["student"]["pearson"]}
            for run, speed in runs.items():
                ratios = _int8_ratios(speed, prefix="")
                row.update({f"x cheaper @{n} ({run})": ratios[(timed, n)] for n in (64, 256) if (timed, n) in ratios})
            rows[f"{label}, {slots} slots"] = row
    return format_table(rows, "Cache slots (student.sh, session 51): each released 2-core student with the same weights "
                              "at 128 slots (as trained), 64, 48 and 32 (`num_slots`), `tf2rnn evaluate` on every suite; "
                              "per keystroke, int8, batch 1, against the teacher on the Zen 4 host, the students of "
                              "one speed run timed together (a blank: not timed in that run)") if rows else ""


# The released shapes per keystroke on two hosts (student.sh, sessions 52-53): (label, {speed run: the folder it timed}).
HOSTS = (("1 whole layer (tf2rnn-minilm-l1's shape), 128 slots", {"v47": "shape-l1", "v48": "shape-l1", "v49": "shape-l1"}),
         ("2 whole layers, 128 slots (make distill's student)", {"v47": "shape-l2", "v48": "shape-l2", "v49": "shape-l2"}),
         ("2 whole layers, 32 slots (tf2rnn-minilm)", {"v47": "tf2rnn-minilm", "v48": "shape-l2-s32", "v49": "shape-l2-s32"}),
         ("3 whole layers, 128 slots", {"v47": "shape-l3"}),
         ("3 whole layers, 32 slots", {"v48": "shape-l3-s32", "v49": "shape-l3-s32"}))
HOST_NAMES = {"v47": "Zen 4", "v48": "Zen 5", "v49": "Zen 5"}


def host_table() -> str:
    """The released shapes' int8 keystroke ratios on the Zen 4 host (v47) and the Zen 5 host (v48, v49), whose teacher runs
    bf16 ~1.7x faster, with each run's fastest teacher."""
    runs = _speed_runs(f"student-speed-{run}" for run in HOST_NAMES)
    if not runs:
        return ""
    rows = {}
    for label, timed in HOSTS:
        row = {}
        for run, folder in timed.items():
            if run in runs:
                ratios = _int8_ratios(runs[run], prefix="")
                row.update({f"x cheaper @{n} ({HOST_NAMES[run]}, {run})": ratios[(folder, n)] for n in (64, 256)
                            if (folder, n) in ratios})
        rows[label] = row
    rows["the teacher's fastest setting, ms"] = {
        f"x cheaper @{n} ({HOST_NAMES[run]}, {run})": min(v["median_ms"] for k, v in row.items()
                                                          if k.startswith("teacher_"))
        for run, speed in runs.items() for row in speed["keystroke"] for n in (64, 256) if row["prefix_tokens"] == n}
    return format_table(rows, "Per keystroke on two hosts (student.sh, sessions 52-53): int8, batch 1, two cores, each "
                              "host's shapes timed together in one `benchmarks/run.py --quick` run, alone; the last row "
                              "is the teacher's own time (ms), fp32 or bf16 on one or two threads, whichever was faster")


# (label, the weight_bits.py file and its scheme, the 32-slot evaluation's file, (speed run, folder)): two layers trained in
# fp32, rounded to int4 per row after training, and trained through int4 per row (--weight_bits 4), at two budgets.
INT4_ROWS = (
    ("make distill's budget (12,000 texts, 7 min): trained in fp32", (L2_QUICK, "fp32"), None, ("v50", "shape-l2-s32")),
    ("make distill's budget: the same weights rounded to int4 per row", (L2_QUICK, "int4 per row"), None, None),
    ("make distill's budget: trained through int4 per row (`--weight_bits 4`)", (L2_QUICK_INT4, "int4 per row"), None,
     ("v50", f"student-{L2_QUICK_INT4}-s32")),
    ("the release's budget (300,000 texts, 23,290 steps): trained in fp32", (L2_RELEASE, "fp32"), f"student-{L2_RELEASE}-s32-eval",
     ("v51", f"student-{L2_RELEASE}-s32")),
    ("the release's budget: the same weights rounded to int4 per row", (L2_RELEASE, "int4 per row"), None, None),
    ("the release's budget: trained through int4 per row (`--weight_bits 4`)", None, f"student-{L2_RELEASE_INT4}-s32-eval",
     ("v51", f"student-{L2_RELEASE_INT4}-s32")),
    ("the release's budget: trained in fp32, then 3,000 steps through int4 per row at lr 1e-4", None,
     f"student-{L2_RELEASE_THEN_INT4}-s32-eval", ("v52", f"student-{L2_RELEASE_THEN_INT4}-s32")),
    ("the release's budget: trained in fp32, then 9,000 steps through int4 per row at lr 1e-4", None,
     f"student-{L2_RELEASE_THEN_INT4_9K}-s32-eval", None),
    ("the release's budget: rounded to int4 per row after training, the readout int8",
     (L2_RELEASE, "int4 per row, readout int8"), None, None),
    ("the release's budget: rounded after training, each row's scale clipped (`clip_ratios`)",
     (L2_RELEASE, "int4 per row, clipped"), None, None),
    ("the release's budget: rounded after training, clipped, the readout int8",
     (L2_RELEASE, "int4 per row, clipped, readout int8"), None, None),
    ("the release's budget: 3,000 steps in fp32 at lr 1e-4 from the fp32 student (the second stage alone)", None,
     f"student-{L2_THEN_FP32}-s32-eval", None),
    ("the release's budget: 3,000 steps through int4, the readout kept fp32 (`--weight_bits 4` since session 55)", None,
     f"student-{L2_THEN_INT4_KEEP}-s32-eval", None),
    ("the release's budget: 3,000 steps through int4, clipped scales, the readout kept fp32", None,
     f"student-{L2_THEN_INT4_CLIP}-s32-eval", None),
    ("`release.sh` on this host (45 min: 8.9 epochs), the fp32 stage", None, "slots-tf2rnn-minilm-int4-fp32-s32-eval",
     ("v52", "tf2rnn-minilm-int4-fp32-s32")),
    ("`INT4_STEPS=3000 release.sh`: then 3,000 steps through int4 (`tf2rnn-minilm-int4`)", None,
     "release-tf2rnn-minilm-int4", ("v52", "tf2rnn-minilm-int4")),
)


def int4_table() -> str:
    """Two layers trained in fp32 or through int4 weights: fidelity (weight_bits.py's 1,000 texts at the trained 128
    slots; `tf2rnn evaluate` at the served 32), STS-B, and the keystroke (int4 products where the weights are int4)."""
    rows = {}
    for label, bits, evaluated, timed in INT4_ROWS:
        row = {}
        if bits and (r := load(f"weight-bits-{bits[0]}")):
            scores = r["schemes"][bits[1]]
            row.update({"final cosine (weight_bits.py)": scores["final_cosine"],
                        "NA@10 (weight_bits.py)": scores["neighbour_agreement@10"]})
        if evaluated and (r := load(evaluated)):
            fid = r["suites"]["fidelity"]["student"]
            row.update({"final cosine (32 slots)": fid["final_cosine"], "NA@10 (32 slots)": fid["neighbour_agreement@10"],
                        "STS-B": r["suites"]["sts-b"]["student"]["spearman"]})
        if timed and (speed := load(f"student-speed-{timed[0]}")):
            ratios = _int8_ratios(speed, prefix="")
            row.update({f"x cheaper @{n} ({timed[0]})": ratios[(timed[1], n)] for n in (64, 256) if (timed[1], n) in ratios})
        if row:
            rows[label] = row
    return format_table(rows, "Int4 weights (student.sh and release.sh, sessions 54-55, the Zen 5 host): two whole layers trained in fp32, "
                              "rounded to int4 per row after training, or trained through it; per keystroke at 32 slots, "
                              "int8 products or int4 where the weights are, alone") if rows else ""


# A bounded both-ways window for two layers (student.sh, session 59): (label, the 2,000-step row at make distill's
# 12,000 texts, its left-out-FOLDOC partner or None, the shape student-speed-v54.json timed at 32 slots).
TWO_LAYER_OPEN = (("2 layers, causal (the control)", _S2K.format(2, "", "control"),
                   _S2K.format(2, "no-foldoc-", "control"), "shape-l2-s32"),
                  ("2 layers, two open tokens", _S2K.format(2, "", "open2"), None, "shape-l2-open2-s32"),
                  ("2 layers, four open tokens", _S2K.format(2, "", "open4"), _S2K.format(2, "no-foldoc-", "open4"),
                   "shape-l2-open4-s32"),
                  ("3 layers, causal", _S2K.format(3, "", "control"), None, "shape-l3-s32"))


def two_layer_open_table() -> str:
    """Two layers with their newest two or four tokens open against a third layer, at equal steps: fidelity in
    training, on FOLDOC's held-out sentences (trained on it, and left out), and the keystroke at 32 slots."""
    speed, rows = load("student-speed-v54"), {}
    ratios = _int8_ratios(speed, prefix="") if speed else {}
    for label, row_name, left_name, shape in TWO_LAYER_OPEN:
        trained, seen = load(f"student-{row_name}"), load(f"student-{row_name}-on-dict-foldoc")
        if not trained:
            continue
        fid = trained["fidelity"]["student"]
        row = {"final cosine": fid["final_cosine"], "NA@10": fid["neighbour_agreement@10"],
               "samples/s": trained["train"]["train_samples_per_second"]}
        if seen:
            row["FOLDOC NA@10, trained on it"] = seen["suites"]["fidelity"]["student"]["neighbour_agreement@10"]
        if left_name and (left := load(f"student-{left_name}-on-dict-foldoc")):
            row["FOLDOC NA@10, left out"] = left["suites"]["fidelity"]["student"]["neighbour_agreement@10"]
        row.update({f"x cheaper @{n} (v54)": ratios[(shape, n)] for n in (64, 256) if (shape, n) in ratios})
        rows[label] = row
    return format_table(rows, "Open tokens for two layers against a third layer (student.sh, session 59, the Zen 5 "
                              "host): 2,000 steps on make distill's 12,000 texts, bf16, one after the other, alone; "
                              "per keystroke int8 at 32 slots, every shape in one run") if rows else ""


# Depth at two whole layers' bytes (student.sh, session 64): (label, the student.sh row, its left-out-FOLDOC partner,
# its name in the speed runs). Every row 2,000 steps on make distill's 12,000 texts at 32 slots, fp32; the int4 rows
# 500 more steps through int4 weights at lr 1e-4.
_S64 = "steps2000-sentences-train32-fp32-lr3e-4-grouped-posweight-final4"
EQUAL_BYTES = (
    ("two whole layers (session 62's base)", f"tova-l2-{_S64}-at76aab9f",
     "tova-l2-steps2000-no-foldoc-train32-fp32-lr3e-4-grouped-posweight-final4-at76aab9f", "s64-l2"),
    ("three layers of 768 neurons (two layers' bytes)", f"tova-l3-i768-{_S64}-at39639a3", None, "s64-l3-i768"),
    ("four layers of 384 neurons (two layers' bytes)", f"tova-l4-i384-{_S64}-at39639a3", None, "s64-l4-i384"),
    ("three whole layers, the middle one's attention reading nothing", f"tova-l3-af1-{_S64}-at39639a3", None, None),
    ("three whole layers, the top one's attention reading nothing", f"tova-l3-af2-{_S64}-at39639a3", None, None),
    ("three whole layers (session 63's base)", f"tova-l3-{_S64}-at3b9ec25",
     "tova-l3-steps2000-no-foldoc-train32-fp32-lr3e-4-grouped-posweight-final4-at39639a3", "s64-l3"),
    ("four whole layers", f"tova-l4-{_S64}-at39639a3", None, None),
    ("four whole layers, then 500 steps in fp32", "tova-l4-steps2000-sentences-train32-then-sentences-500-lr1e-4-"
     "fp32-grouped-posweight-final4-at39639a3", None, None),
    ("four whole layers, then 500 steps through int4", "tova-l4-steps2000-sentences-train32-then-int4row-500-lr1e-4-"
     "fp32-grouped-posweight-final4-at39639a3", None, "s64-l4-int4-stage"),
    ("three whole layers, then 500 steps through int4 (session 63)", "tova-l3-steps2000-sentences-train32-then-"
     "int4row-500-lr1e-4-fp32-grouped-posweight-final4-at3b9ec25", None, "s63-l3-int4-stage"),
    ("two whole layers, then 500 steps in fp32 (session 62)", "tova-l2-steps2000-sentences-train32-then-sentences-500-"
     "lr1e-4-fp32-grouped-posweight-final4-at76aab9f", None, "s63-fp32-stage"),
)


def equal_bytes_table() -> str:
    """Depth at two whole layers' bytes: layers with fewer feed-forward neurons, or with an attention reading nothing,
    against whole layers (and whole layers through int4); fidelity in training and scored at 32 slots, FOLDOC's
    held-out sentences trained on and left out, and the int8 (or int4) keystroke of the trained students."""
    runs = _speed_runs(("student-speed-v64-1", "student-speed-v64-2", "student-speed-v64-int4-1",
                        "student-speed-v64-int4-2"))
    rows = {}
    for label, name, left_name, speed_name in EQUAL_BYTES:
        trained = load(f"student-{name}")
        if not trained:
            continue
        fid = trained["fidelity"]["student"]
        row = {"in training: final cosine": fid["final_cosine"], "in training: NA@10": fid["neighbour_agreement@10"]}
        if scored := load(f"student-{name}-eval"):
            s_ = scored["suites"]
            row.update({"final cosine": s_["fidelity"]["student"]["final_cosine"],
                        "NA@10": s_["fidelity"]["student"]["neighbour_agreement@10"],
                        "passages: final cosine": s_["long"]["student"]["final_cosine"],
                        "STS-B": s_["sts-b"]["student"]["spearman"]})
        if seen := load(f"student-{name}-on-dict-foldoc"):
            row["FOLDOC NA@10, trained on it"] = seen["suites"]["fidelity"]["student"]["neighbour_agreement@10"]
        if left_name and (left := load(f"student-{left_name}-on-dict-foldoc")):
            row["FOLDOC NA@10, left out"] = left["suites"]["fidelity"]["student"]["neighbour_agreement@10"]
        if speed_name:
            row.update(_keystroke_columns(speed_name, runs, prefix=""))
        rows[label] = row
    return format_table(rows, "Depth at two whole layers' bytes (student.sh, session 64, a Zen 3 host, AVX2): 2,000 "
                              "steps on make distill's 12,000 texts at 32 slots, fp32, one after the other, alone; "
                              "scored as session 61's rows; per keystroke the trained students, int8 (int4 where "
                              "their weights are), each run alone") if rows else ""


# Int4 stages on six layers with K = 2 (student.sh, sessions 70-72): 500 or 1,500 steps at lr 1e-4 from S69_L6, each
# variant in two batch orders at 500 steps; (label, the stage's name after S69_L6's "-then-").
S69_L6 = "tova-l6-tail2-steps2000-train32-fp32-lr3e-4-grouped-posweight-final4-at8ce0e96"
INT4_STAGES = (
    ("fp32", "fp32-500-lr1e-4-at5371991"), ("fp32, seed 1", "fp32-500-lr1e-4-seed1-at5371991"),
    ("int4 per row", "int4-500-lr1e-4-control-at5371991"),
    ("int4 per row, seed 1", "int4-500-lr1e-4-control-seed1-at5371991"),
    ("int4 per row, learned scales", "int4-500-lr1e-4-learned-at5371991"),
    ("int4 per row, learned scales, seed 1", "int4-500-lr1e-4-learned-seed1-at5371991"),
    ("int4 per row, down int8", "int4-500-lr1e-4-keep-down-at5371991"),
    ("int4 per row, down int8, seed 1", "int4-500-lr1e-4-keep-down-seed1-at5371991"),
    ("int4 per row, down int8, learned scales", "int4-500-lr1e-4-keep-down-learned-at5371991"),
    ("int4 per row, down int8, learned scales, seed 1", "int4-500-lr1e-4-keep-down-learned-seed1-at5371991"),
    ("int4 per row, up and down int8", "int4-500-lr1e-4-keep-up-down-at5371991"),
    ("int4 per row, up and down int8, seed 1", "int4-500-lr1e-4-keep-up-down-seed1-at5371991"),
    ("int4 per 128 columns", "int4-500-lr1e-4-group128-at21db094"),
    ("int4 per 128 columns, seed 1", "int4-500-lr1e-4-group128-seed1-at21db094"),
    ("int4 per 128 columns, learned scales", "int4-500-lr1e-4-group128-learned-at21db094"),
    ("int4 per 128 columns, learned scales, seed 1", "int4-500-lr1e-4-group128-learned-seed1-at21db094"),
    ("1,500 steps: int4 per row", "int4-1500-lr1e-4-control-at5371991"),
    ("1,500 steps: int4 per row, learned scales", "int4-1500-lr1e-4-learned-at5371991"),
    ("1,500 steps: int4 per row, learned scales, seed 1", "int4-1500-lr1e-4-learned-seed1-atd49b790"),
    ("1,500 steps: int4 per row, down int8", "int4-1500-lr1e-4-keep-down-at5371991"),
    ("1,500 steps: int4 per 128 columns", "int4-1500-lr1e-4-group128-atd49b790"),
    ("1,500 steps: int4 per 128 columns, learned scales", "int4-1500-lr1e-4-group128-learned-atd49b790"),
    ("1,500 steps: int4 per 128 columns, learned scales, seed 1", "int4-1500-lr1e-4-group128-learned-seed1-atd49b790"),
    ("int4 per 128 columns, targets halfway to the fp32 student (--parent_weight 0.5)",
     "int4-500-lr1e-4-group128-parent0.5-at6f79798"),
    ("int4 per 128 columns, the fp32 student's targets (--parent_weight 1)", "int4-500-lr1e-4-group128-parent1-at6f79798"),
    ("int4 per 128 columns, lr 3e-4", "int4-500-lr3e-4-group128-at6f79798"),
    ("int4 per 128 columns, lr 3e-5", "int4-500-lr3e-5-group128-at6f79798"),
    ("fp32, lr 3e-4", "fp32-500-lr3e-4-at6f79798"),
    ("1,500 steps: fp32", "fp32-1500-lr1e-4-at6f79798"),
    ("3,000 steps: int4 per 128 columns, learned scales", "int4-3000-lr1e-4-group128-learned-at6f79798"),
    ("1,500 steps: int4 per row, up and down int8", "int4-1500-lr1e-4-keep-up-down-at6f79798"),
    ("1,500 steps: int4 per row in layers 0-1 (a keystroke's), layers 2-5 int8", "int4-1500-lr1e-4-keep-upper4-at4a7d1ec"),
    ("1,500 steps: int4 per row in layers 2-5, layers 0-1 int8", "int4-1500-lr1e-4-keep-lower2-at4a7d1ec"),
    ("1,500 steps: int4 per 128 columns, learned scales, in layers 0-1, layers 2-5 int8",
     "int4-1500-lr1e-4-group128-learned-keep-upper4-at4a7d1ec"),
    ("1,500 steps: int4 per 128 columns, learned scales, in layers 0-1, layers 2-5 int8, seed 1",
     "int4-1500-lr1e-4-group128-learned-keep-upper4-seed1-at6032343"),
    ("1,500 steps: int4 per 128 columns, learned scales, in layers 0-1 but down, the rest int8",
     "int4-1500-lr1e-4-group128-learned-keep-upper4-down-atdd84bb1"),
)


def int4_stage_table() -> str:
    """Ways to win back what an int4 stage costs six layers with K = 2: products left at int8, learned scales, a scale
    per 128 columns; in training and scored at 32 slots."""
    rows = {}
    for label, stage in INT4_STAGES:
        name = f"student-{S69_L6}-then-{stage}"
        trained, scored = load(name), load(f"{name}-eval")
        if not (trained and scored):
            continue
        s_ = scored["suites"]
        rows[label] = {"final cosine": s_["fidelity"]["student"]["final_cosine"],
                       "NA@10": s_["fidelity"]["student"]["neighbour_agreement@10"],
                       "passages: final cosine": s_["long"]["student"]["final_cosine"],
                       "passages: NA@10": s_["long"]["student"]["neighbour_agreement@10"],
                       "STS-B": s_["sts-b"]["student"]["spearman"],
                       "in training: final cosine": trained["fidelity"]["student"]["final_cosine"],
                       "in training: NA@10": trained["fidelity"]["student"]["neighbour_agreement@10"]}
    return format_table(rows, "Int4 stages on six layers with K = 2 (student.sh, sessions 70-74, a Zen 3 host): "
                              "500 steps (or as named) at lr 1e-4 (or as named) from the 2,000-step fp32 student at 32 "
                              "slots, each alone; --weight_keep leaves products (or layers) at int8, --weight_scale "
                              "learned learns the scales, --weight_group 128 gives each 128 columns of a row a scale, "
                              "--parent_weight moves the targets towards the fp32 student; scored by tf2rnn evaluate at "
                              "32 slots"
                        ) if rows else ""


# Depth paid per word (student.sh, session 65): (label, the student.sh row, its probe file in benchmarks/probes/results,
# the probe row of its second embedding). The plain rows read the untrained probe's rows of the same student.
PROBES = Path(__file__).parents[1] / "probes" / "results"
PER_WORD = (
    ("two whole layers, 2,000 steps", "student-tova-l2-steps2000-sentences-train32-fp32-lr3e-4-grouped-posweight-"
     "final4-at76aab9f", "deferred-depth-s65-untrained", None),
    ("three whole layers, 2,000 steps", "student-tova-l3-steps2000-sentences-train32-fp32-lr3e-4-grouped-posweight-"
     "final4-at3b9ec25", "deferred-depth-s65-untrained", None),
    ("four whole layers, 2,000 steps; second embedding untrained, least-squares adapter, K = 2",
     "student-tova-l4-steps2000-sentences-train32-fp32-lr3e-4-grouped-posweight-final4-at39639a3",
     "deferred-depth-s65-untrained", "words being typed through 2 layers, least squares"),
    ("+ 500 steps (the control)", "student-tova-l4-steps2000-sentences-train32-then-sentences-500-lr1e-4-fp32-grouped-"
     "posweight-final4-at39639a3", None, None),
    ("+ 500 steps with K = 2, adapter from the identity", "student-tova-l4-steps2000-sentences-train32-then-tail2-500-"
     "lr1e-4-fp32-grouped-posweight-final4-at3fefda1", "deferred-depth-s65-tail2", "words being typed through 2 "
     "layers, trained"),
    ("+ 500 steps with K = 1, adapter from the identity", "student-tova-l4-steps2000-sentences-train32-then-tail1-500-"
     "lr1e-4-fp32-grouped-posweight-final4-at3fefda1", "deferred-depth-s65-tail1", "words being typed through 1 "
     "layers, trained"),
    ("+ 500 steps with K = 2, adapter from least squares", "student-tova-l4-steps2000-sentences-train32-then-tail2ls-"
     "500-lr1e-4-fp32-grouped-posweight-final4-at3fefda1", "deferred-depth-s65-tail2ls", "words being typed through 2 "
     "layers, trained"),
    ("four layers trained with K = 2 from the start, 2,000 steps", "student-tova-l4-tail2-steps2000-sentences-train32-"
     "fp32-lr3e-4-grouped-posweight-final4-ata72805a", "deferred-depth-s65-l4-tail2", "words being typed through 2 "
     "layers, trained"),
    ("six layers trained with K = 2 from the start, 2,000 steps", "student-tova-l6-tail2-steps2000-sentences-train32-"
     "fp32-lr3e-4-grouped-posweight-final4-ata72805a", "deferred-depth-s65-l6-tail2", "words being typed through 2 "
     "layers, trained"),
    ("the same by session 69's recipe, 128 slots (sessions 75-76)", "student-tova-l6-tail2-steps2000-train128-fp32-"
     "lr3e-4-grouped-posweight-final4-at6daf21d", "deferred-depth-s75-l6-tail2-control", "words being typed through 2 "
     "layers, trained"),
    ("the same, 4 tokens open in the upper layers (--tail_open_tokens 4)", "student-tova-l6-tail2-open4-steps2000-"
     "train128-fp32-lr3e-4-grouped-posweight-final4-at03f88b9", "deferred-depth-s75-l6-tail2-open4", "words being "
     "typed through 2 layers, trained"),
    ("the same, 6 tokens open in the upper layers (--tail_open_tokens 6)", "student-tova-l6-tail2-open6-steps2000-"
     "train128-fp32-lr3e-4-grouped-posweight-final4-ata7c29c0", "deferred-depth-s75-l6-tail2-open6", "words being "
     "typed through 2 layers, trained"),
    ("the same, 8 tokens open in the upper layers (--tail_open_tokens 8)", "student-tova-l6-tail2-open8-steps2000-"
     "train128-fp32-lr3e-4-grouped-posweight-final4-at37ae4d5", "deferred-depth-s75-l6-tail2-open8", "words being "
     "typed through 2 layers, trained"),
    ("session 78, equal CPU time: causal upper layers, the release's texts, 30 minutes (2,104 steps)",
     "student-tova-l6-tail2-sampled150k-stride3-30min-fp32-lr3e-4-at29202ae", None, None),
    ("session 78, equal CPU time: 8 tokens open in the upper layers, the same 30 minutes (843 steps)",
     "student-tova-l6-tail2-open8-sampled150k-stride3-30min-fp32-lr3e-4-at29202ae", None, None),
)


def per_word_table() -> str:
    """Depth paid per word: the full embedding of four-layer students scored at 32 slots, and the second embedding a
    keystroke would show inside a word with the layers above K waiting for its end (benchmarks/probes/deferred_depth.py),
    beside two whole layers."""
    rows = {}
    for label, name, probe, second in PER_WORD:
        scored = load(f"{name}-eval")
        if not scored:
            continue
        s_ = scored["suites"]
        row = {"final cosine": s_["fidelity"]["student"]["final_cosine"],
               "NA@10": s_["fidelity"]["student"]["neighbour_agreement@10"],
               "passages: final cosine": s_["long"]["student"]["final_cosine"], "STS-B": s_["sts-b"]["student"]["spearman"]}
        path = PROBES / f"{probe}.json" if probe else None
        if path and path.is_file():
            table = json.loads(path.read_text())["fidelity"]
            inside = table[second] if second else table[f"{name} as it is"]
            row.update({"inside a word: final cosine": inside["final_cosine"],
                        "inside a word: all-prefix cosine": inside["prefix_cosine"],
                        "inside a word: NA@10": inside["neighbour_agreement@10"]})
        rows[label] = row
    return format_table(rows, "Depth paid per word (student.sh, sessions 65 and 75-78): causal layers at 32 slots (128 "
                              "where named), make distill's 12,000 texts, fp32 (six and eight open tokens at 2,000 "
                              "steps: bf16; session 78's rows: the release's 150,000 texts, fp32, 30 minutes each on "
                              "one Zen 3 host); the full embedding scored as session 61's rows, the "
                              "one shown inside a word (the layers above K waiting for its end: --tail_layers) by "
                              "benchmarks/probes/deferred_depth.py on the same held-out texts at every token prefix; "
                              "two whole layers show their only embedding") if rows else ""


# Typing sentences (student.sh, session 66): (label, the speed run, the shape's name in it), int8 streams.
TYPING = (("two whole layers", "student-speed-v66-2", "shape-l2-s32-int4_int8"),
          ("three whole layers", "student-speed-v66-2", "shape-l3-s32-int4_int8"),
          ("six layers, K = 2: upper layers at word ends", "student-speed-v66-2", "shape-l6-tail2-s32-int4_int8"),
          ("six layers, K = 2: every layer at every keystroke", "student-speed-v66-2",
           "shape-l6-tail2-s32-int4_int8_every_layer"),
          ("six layers, K = 2, at word ends (v66-1: whole states a keystroke, fp32 adapter)", "student-speed-v66-1",
           "shape-l6-tail2-s32-int4_int8"),
          ("v66-3: two whole layers (the default's shape)", "student-speed-v66-3", "shape-l2-s32-int4_int8"),
          ("v66-3: tf2rnn-minilm-l6-tail2-int4 (trained by the release's recipe)", "student-speed-v66-3",
           "tf2rnn-minilm-l6-tail2-int4_int8"),
          ("v66-3: the same, every layer at every keystroke", "student-speed-v66-3",
           "tf2rnn-minilm-l6-tail2-int4_int8_every_layer"),
          ("v67-1 (each block warmed through a word's end): two whole layers", "student-speed-v67-1",
           "shape-l2-s32-int4_int8"),
          ("v67-1: tf2rnn-minilm-l6-tail2-int4", "student-speed-v67-1", "tf2rnn-minilm-l6-tail2-int4_int8"),
          ("v67-1: the same, every layer at every keystroke", "student-speed-v67-1",
           "tf2rnn-minilm-l6-tail2-int4_int8_every_layer"),
          ("v67-1: its int4 stage with learned scales", "student-speed-v67-1",
           "student-l6-tail2-int4-lsq-ata616b2c_int8"),
          # session 68, an Intel host (AVX512-VNNI, AMX) whose student steps run ~3x the Zen 5's: compare within a run
          ("v68-0 (Intel host, no settle, as v67-1): two whole layers", "student-speed-v68-0", "shape-l2-s32-int4_int8"),
          ("v68-0: six layers, K = 2", "student-speed-v68-0", "shape-l6-tail2-s32-int4_int8"),
          ("v68-1 (50 ms settle each side of the teacher): two whole layers", "student-speed-v68-1",
           "shape-l2-s32-int4_int8"),
          ("v68-1: six layers, K = 2", "student-speed-v68-1", "shape-l6-tail2-s32-int4_int8"),
          ("v68-2 (no settle, again): two whole layers", "student-speed-v68-2", "shape-l2-s32-int4_int8"),
          ("v68-2: six layers, K = 2", "student-speed-v68-2", "shape-l6-tail2-s32-int4_int8"),
          ("v68-3 (settle, again): two whole layers", "student-speed-v68-3", "shape-l2-s32-int4_int8"),
          ("v68-3: six layers, K = 2", "student-speed-v68-3", "shape-l6-tail2-s32-int4_int8"),
          # session 69, an AMD EPYC host (Zen 3, AVX2 only), settle on: idle_commits leaves a word's upper layers to idle()
          ("v69-0 (Zen 3 host, settle): two whole layers", "student-speed-v69-0", "shape-l2-s32-int4_int8"),
          ("v69-0: six layers, K = 2", "student-speed-v69-0", "shape-l6-tail2-s32-int4_int8"),
          ("v69-0: six layers, K = 2, idle_commits (idle() untimed; all work in the last column)", "student-speed-v69-0",
           "shape-l6-tail2-s32-int4_int8_idle_commits"),
          ("v69-1 (again): two whole layers", "student-speed-v69-1", "shape-l2-s32-int4_int8"),
          ("v69-1: six layers, K = 2", "student-speed-v69-1", "shape-l6-tail2-s32-int4_int8"),
          ("v69-1: six layers, K = 2, idle_commits", "student-speed-v69-1", "shape-l6-tail2-s32-int4_int8_idle_commits"),
          ("v69-2 (with int8 products beside int4): six layers, K = 2, int4", "student-speed-v69-2",
           "shape-l6-tail2-s32-int4_int8"),
          ("v69-2: six layers, K = 2, int4, idle_commits", "student-speed-v69-2",
           "shape-l6-tail2-s32-int4_int8_idle_commits"),
          ("v69-2: six layers, K = 2, int8 products (no int4 stage)", "student-speed-v69-2", "shape-l6-tail2-s32_int8"),
          ("v69-2: the same, idle_commits", "student-speed-v69-2", "shape-l6-tail2-s32_int8_idle_commits"),
          ("v69-3 (again): six layers, K = 2, int4", "student-speed-v69-3", "shape-l6-tail2-s32-int4_int8"),
          ("v69-3: six layers, K = 2, int4, idle_commits", "student-speed-v69-3",
           "shape-l6-tail2-s32-int4_int8_idle_commits"),
          ("v69-3: six layers, K = 2, int8 products", "student-speed-v69-3", "shape-l6-tail2-s32_int8"),
          ("v69-3: the same, idle_commits", "student-speed-v69-3", "shape-l6-tail2-s32_int8_idle_commits"),
          # session 77, a Zen 3 host: four tokens open in the upper layers (--tail_open_tokens 4), in the fused step
          ("v77 (Zen 3): six layers, K = 2, int4", "student-speed-v77", "shape-l6-tail2-s32-int4_int8"),
          ("v77: six layers, K = 2, int4, idle_commits", "student-speed-v77", "shape-l6-tail2-s32-int4_int8_idle_commits"),
          ("v77: the same, 4 tokens open in the upper layers", "student-speed-v77", "shape-l6-tail2-open4-s32-int4_int8"),
          ("v77: the same, 4 open, idle_commits", "student-speed-v77", "shape-l6-tail2-open4-s32-int4_int8_idle_commits"),
          ("v77: the same, 4 open, every layer at every keystroke (whole states)", "student-speed-v77",
           "shape-l6-tail2-open4-s32-int4_int8_every_layer"),
          ("v77b (again, with 6 and 8 open): six layers, K = 2, int4", "student-speed-v77b", "shape-l6-tail2-s32-int4_int8"),
          ("v77b: the same, idle_commits", "student-speed-v77b", "shape-l6-tail2-s32-int4_int8_idle_commits"),
          ("v77b: 6 tokens open in the upper layers", "student-speed-v77b", "shape-l6-tail2-open6-s32-int4_int8"),
          ("v77b: 6 open, idle_commits", "student-speed-v77b", "shape-l6-tail2-open6-s32-int4_int8_idle_commits"),
          ("v77b: 8 tokens open in the upper layers", "student-speed-v77b", "shape-l6-tail2-open8-s32-int4_int8"),
          ("v77b: 8 open, idle_commits", "student-speed-v77b", "shape-l6-tail2-open8-s32-int4_int8_idle_commits"))


def typing_table() -> str:
    """Sentences typed key by key (benchmarks/run.py's typing section): the teacher's re-encoding over each student's
    mean keystroke, its word-end keystroke and its keystroke inside a word, at 64 and 256 tokens of prefix."""
    rows = {}
    for label, run, name in TYPING:
        speed = load(run)
        if not speed or not speed.get("typing"):
            continue
        row = {}
        for r in speed["typing"]:
            ratio = r.get(f"speedup_{name}")
            if ratio:
                n = r["prefix_tokens"]
                row.update({f"{n} tokens: mean": f"{ratio['mean']:.0f}x", f"{n}: word end": f"{ratio['word_end']:.0f}x",
                            f"{n}: inside a word": f"{ratio['in_word']:.0f}x"})
                if "mean_with_idle" in ratio:
                    row[f"{n}: mean with idle()"] = f"{ratio['mean_with_idle']:.0f}x"
        if row:
            rows[label] = row
    return format_table(rows, "Typing sentences (student.sh, sessions 66-67 on a Zen 5 host, AVX512-VNNI; v68 on an "
                              "Intel host, where the student's step ran ~3x slower than there, the teacher's ~1.2x; "
                              "v69 on a Zen 3 host, AVX2, its teacher 1.1-1.3x the Intel host's time and its student "
                              "about the same; v77 on a Zen 3 host; idle_commits rows time idle() apart, the last "
                              "columns counting it): "
                              "shapes at "
                              "32 slots with int4 products, int8 streams typing WORDS key by key, each keystroke "
                              "timed; the teacher re-encoding the prefix (its faster setting) over the student's "
                              "mean keystroke, its keystrokes that end a word (a space) and those inside one (--quick, "
                              "one run)") if rows else ""


# A CPU training step's throughput (student.sh, session 42): (label, the student.sh row), the fast tier's shape.
THROUGHPUT = (("12,000 texts, 7 min (`make distill`'s budget): 87144e7's trainer (Python rows, fp32)",
               "student-tova-l1-quick-lr3e-4-grouped-posweight-final4-at87144e7"),
              ("numpy rows", "student-tova-l1-quick-lr3e-4-grouped-posweight-final4-at4f9c45b"),
              ("numpy rows, `--bf16`", "student-tova-l1-quick-bf16-lr3e-4-grouped-posweight-final4-at4f9c45b"),
              ("150,000 texts, 20 min: session 37's control (Python rows, fp32)",
               "student-tova-l1-sampled150k-stride3-lr3e-4-grouped-posweight-final4-at3b1871b"),
              ("numpy rows, `--bf16`, 20 min",
               "student-tova-l1-bf16-sampled150k-stride3-lr3e-4-grouped-posweight-final4-at4f9c45b"),
              ("numpy rows, `--bf16`, token table frozen",
               "student-tova-l1-bf16-freeze-sampled150k-stride3-lr3e-4-grouped-posweight-final4-at4f9c45b"),
              ("numpy rows, `--bf16`, 45 min (the release's recipe)",
               "student-tova-l1-bf16-sampled150k-stride3-45min-lr3e-4-grouped-posweight-final4-at4f9c45b"),
              ("numpy rows, `--bf16`, token table row-sparse (session 43), 20 min",
               "student-tova-l1-bf16-sparse-sampled150k-stride3-lr3e-4-grouped-posweight-final4-at287013b"),
              ("the same on 300,000 texts, 20 min",
               "student-tova-l1-bf16-sparse-sampled300k-stride3-lr3e-4-grouped-posweight-final4-at287013b"),
              ("the same on 300,000 texts, 45 min",
               "student-tova-l1-bf16-sparse-sampled300k-stride3-45min-lr3e-4-grouped-posweight-final4-at287013b"))


def throughput_table() -> str:
    """The fast tier trained with the trainer's numpy rows, bf16 autocast and a row-sparse token table against the code
    before, at two budgets."""
    rows = {}
    for label, name in THROUGHPUT:
        if scored := load(f"{name}-eval"):
            rows[label] = _scored(scored, load(name))
    return format_table(rows, "A CPU training step's throughput (student.sh, sessions 42-43): one inherited layer "
                              "trained on numpy rows (since 4f9c45b; Python float lists before), under `--bf16` and "
                              "with the token table's update row-sparse (`--sparse_embeddings`, since 287013b), on "
                              "the AVX512-VNNI + AMX host, each row alone") if rows else ""


# Neighbours kept on documentation, source by source (student.sh, session 40): (label, the student.sh row).
DOC_EVAL_SOURCES = ("linux-doc", "openjdk-doc", "python-doc", "manpages")
DOC_ROWS = (("1 layer, 150,000 texts of `offline`, 20 min (never saw documentation)",
             "student-tova-l1-sampled150k-stride3-lr3e-4-grouped-posweight-final4-at3b1871b"),
            ("1 layer, 12,000 texts of `offline`, 7 min (never saw documentation)",
             "student-tova-l1-quick-offline-lr3e-4-grouped-posweight-final4-atb38806"),
            ("1 layer, 12,000 texts of `offline-xl`, 7 min (other sentences of these sources)",
             "student-tova-l1-quick-offline-xl-lr3e-4-grouped-posweight-final4-atb38806"))


def documentation_table() -> str:
    """NA@10 on four documentation sources' held-out sentences against the default held-out texts, for one-layer
    students, the teacher's static token vectors and the real Model2Vec (benchmarks/peers/evaluate_peer.py --texts)."""
    rows, static = {}, None
    for label, name in DOC_ROWS:
        on = {source: load(f"{name}-on-{source}") for source in DOC_EVAL_SOURCES}
        if not all(on.values()):
            continue
        default = load(f"{name}-eval")
        rows[label] = {"NA@10, default held-out": default["suites"]["fidelity"]["student"]["neighbour_agreement@10"]
                       if default else float("nan"),
                       **{f"NA@10, {s}": on[s]["suites"]["fidelity"]["student"]["neighbour_agreement@10"]
                          for s in DOC_EVAL_SOURCES}}
        static = {s: on[s]["suites"]["fidelity"]["static mean"]["neighbour_agreement@10"] for s in DOC_EVAL_SOURCES}
    if not rows:
        return ""
    rows["static mean of the teacher's token vectors"] = {f"NA@10, {s}": v for s, v in static.items()}
    peer, peer_docs = load("peer-model2vec"), load("peer-model2vec-on-documentation")
    if peer and peer_docs:
        rows["Model2Vec (benchmarks/peers/model2vec.sh)"] = {
            "NA@10, default held-out": peer["suites"]["fidelity"]["model2vec"]["neighbour_agreement@10"],
            **{f"NA@10, {s}": peer_docs["on_texts"][f"{s}.jsonl"]["neighbour_agreement@10"] for s in DOC_EVAL_SOURCES}}
    return format_table(rows, "Neighbours kept on documentation (student.sh, session 40): neighbour agreement@10 with "
                              "the teacher on each source's first 1,000 held-out sentences of offline-xl "
                              "(`heldout_source.py --corpus offline-xl`, `tf2rnn evaluate --texts`), beside the "
                              "default held-out texts across the five default sources")


def main():
    flags = sys.argv[1:]
    sections = (("--cells", cell_comparison), ("--peers", transfer_peer_table), ("--transfer", transfer_table))
    if any(flag in flags for flag, _ in sections):  # a model card's extra sections
        tables = [make() for flag, make in sections if flag in flags]
        print("\n\n".join(t for t in tables if t))
        return
    out = []
    rows = {}
    for name in ("transition", "rollout", "mix", "rollout-similarity"):
        r = load(f"ablation-{name}")
        if r:
            rows[name] = {k: r["fidelity"]["student"][k] for k in KEYS if k in r["fidelity"]["student"]}
            rows[name]["epochs"] = r["train"].get("epoch", float("nan"))
            base = r
    if rows:
        for system in ("one token late", "static mean"):
            rows[f"baseline: {system}"] = {k: base["fidelity"][system][k] for k in KEYS}
        out.append(format_table(rows, "Loss ablation: GRU-768, 60k sentences, 10 CPU-minutes (one core) each, "
                                      "held-out free-running fidelity (1,000 texts)"))
    rows = {}
    for name in ("gru", "lstm", "linear_attention", "rem", "multistate-k8", "multistate-k32"):
        r = load(f"cells-{name}")
        if r:
            s = r["fidelity"]["student"]
            rows[name] = {k: s[k] for k in KEYS if k in s}
            rows[name]["epochs"] = r["train"].get("epoch", float("nan"))
    if rows:
        out.append(format_table(rows, "Cell comparison: ~2.9M recurrent parameters each, rollout loss, 5 CPU-minutes "
                                      "(one core) each, same data"))
    rows = {}
    for name in ("base", "control", "loss"):
        r = load(f"keystroke-eval-{name}")
        if r:
            f = r["suites"]["fidelity"]["student"]
            rows[name] = {"keystroke_cosine": r["suites"]["keystroke"]["student"]["keystroke_cosine"],
                          **{k: f[k] for k in ("final_cosine", "prefix_cosine", "neighbour_agreement@10")}}
    if rows:
        out.append(format_table(rows, "Training on the streaming path (keystroke.sh): the release student fine-tuned "
                                      "8 CPU-minutes on 4,000 sentences' character trajectories, without (control) "
                                      "and with the keystroke loss"))
    rows = {}
    for name in ("bytes", "tokens"):
        r, d = load(f"byte-eval-{name}"), load(f"byte-{name}")
        if r and d:
            s_ = r["suites"]
            rows[name] = {"keystroke_cosine": s_["keystroke"]["student"]["keystroke_cosine"],
                          "final_cosine": s_["fidelity"]["student"]["final_cosine"],
                          "bible_recall@1": s_["bible"]["student"]["recall@1"], "epochs": d["train"]["epoch"]}
    if rows:
        out.append(format_table(rows, "Byte vs token students (byte.sh): GRU-768, 20k sentences, 10 CPU-minutes "
                                      "(one core) each, rollout"))
    rows = {}
    for name in ("base", "control", "joined", "mixed", "mix-random", "mix-grouped"):
        r, d = load(f"passages-eval-{name}"), load(f"passages-{name}")
        if r:
            f, g = r["suites"]["fidelity"]["student"], r["suites"]["long"]["student"]
            rows[name] = {"samples/s": d["train"]["train_samples_per_second"] if d else float("nan"),
                          "final_cosine": f["final_cosine"], "neighbour_agreement@10": f["neighbour_agreement@10"],
                          "long_final_cosine": g["final_cosine"], **{f"long_{k}": g[k] for k in
                                                                     ("drift_9-16", "drift_33-64", "drift_65-128")}}
    if rows:
        out.append(format_table(rows, "Drift past sentence length (passages.sh): the release student fine-tuned 10 "
                                      "CPU-minutes on 20k sentences as they are (control), joined into 100+-token "
                                      "passages (joined), or half of them joined (mixed); held-out sentences, and "
                                      "held-out passages (long_*)"))
    rows = {}
    for name in ("base", "control", "w0.2", "w1"):
        r = load(f"neighbour-eval-{name}")
        if r:
            s_ = r["suites"]
            f = s_["fidelity"]["student"]
            rows[name] = {**{k: f[k] for k in ("final_cosine", "prefix_cosine", "neighbour_agreement@10")},
                          "bible_recall@1": s_["bible"]["student"]["recall@1"],
                          "wordnet_recall@1": s_["wordnet"]["student"]["recall@1"],
                          "lee_pearson": s_["lee"]["student"]["pearson"]}
    if rows:
        out.append(format_table(rows, "Neighbour structure (neighbour.sh): the release student fine-tuned 10 "
                                      "CPU-minutes on 20k sentences with the rollout loss alone (control) or plus "
                                      "the neighbour loss at weight 0.2 / 1 (bank of 8,192 teacher embeddings, "
                                      "temperature 0.05)"))
    out.append(scale_table())
    out.extend(t for t in (student_table(), padding_table(), weight_bits_table(), transfer_peer_table(),
                           transfer_table(), student_transfer_table(), depth_cost_table(), open_width_table(),
                           one_layer_table(), kernel_table(), thin_depth_table(), gpu_depth_table(), slots_table(), host_table(), int4_table(),
                           two_layer_open_table(), equal_bytes_table(), int4_stage_table(), per_word_table(),
                           typing_table(),
                           corpus_table(), documentation_table(), throughput_table()) if t)
    release = load("release")
    if release:
        from tf2rnn_hf.evaluation.report import results_markdown

        out.append("### Release (tf2rnn-minilm)\n\n" + results_markdown(release))
    header = ("# Results\n\nGenerated by `python benchmarks/quality/report.py > docs/results.md` from the files in "
              "`benchmarks/quality/results/`, each written by the script named with its table. Do not edit by hand.")
    print("\n\n".join([header, *out]))


if __name__ == "__main__":
    main()
