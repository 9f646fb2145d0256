"""Pictures: teacher and student trajectories as characters are typed, the drift curve, suite bars."""

from pathlib import Path
from typing import Dict, Sequence, Union

import torch

from .data.teacher import Teacher


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # headless
    import matplotlib.pyplot as plt

    return plt


@torch.no_grad()
def char_prefix_embeddings(model, tokenizer, text: str) -> torch.Tensor:
    """The student's embedding of text[:c] for c = 1..len(text), each prefix re-tokenised as typed."""
    prefixes = [text[:c] for c in range(1, len(text) + 1)]
    batch = tokenizer(prefixes, padding=True, return_tensors="pt")
    return model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], use_cache=False).pooler_output


def plot_trajectories(model, tokenizer, teacher: Teacher, texts: Sequence[str], path: Union[str, Path]) -> Path:
    """The seed's picture: each text unmasked one character at a time, teacher (solid) and student
    (dashed) trajectories projected to 2-D by a PCA fitted on the teacher's points."""
    plt = _pyplot()
    teacher_runs = [teacher.encode([t[:c] for c in range(1, len(t) + 1)]) for t in texts]
    student_runs = [char_prefix_embeddings(model, tokenizer, t).float() for t in texts]
    points = torch.cat(teacher_runs)
    mean = points.mean(0)
    _, _, v = torch.pca_lowrank(points - mean, q=2, center=False)
    fig, ax = plt.subplots(figsize=(7, 6))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (text, tr, st) in enumerate(zip(texts, teacher_runs, student_runs)):
        colour = colours[i % len(colours)]
        t2, s2 = (tr - mean) @ v, (st - mean) @ v
        ax.plot(t2[:, 0], t2[:, 1], "-o", color=colour, ms=2, label=f"teacher: {text[:30]}")
        ax.plot(s2[:, 0], s2[:, 1], "--", color=colour, alpha=0.7, label="student")
        ax.annotate(text[:24], t2[-1].tolist(), fontsize=7, color=colour)
    ax.set_title("Prefix trajectories, one character at a time (PCA of the teacher)")
    ax.legend(fontsize=6, loc="best")
    fig.tight_layout()
    return _save(fig, path)


def plot_drift(fidelity: Dict[str, Dict[str, float]], path: Union[str, Path]) -> Path:
    """Cosine to the teacher by prefix-length bucket, one line per system."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for system, metrics in fidelity.items():
        if system.startswith("_") or system == "teacher":
            continue
        buckets = [k for k in metrics if k.startswith("drift_")]
        ax.plot([b[len("drift_"):] for b in buckets], [metrics[b] for b in buckets], "-o", label=system)
    ax.set_xlabel("prefix length (tokens)")
    ax.set_ylabel("cosine to the teacher")
    ax.set_title("Drift: free-running fidelity by prefix length")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return _save(fig, path)


def plot_suites(results: Dict[str, dict], path: Union[str, Path]) -> Path:
    """One bar group per suite's headline metric: student vs teacher vs baselines."""
    plt = _pyplot()
    headline = {"fidelity": "neighbour_agreement@10", "keystroke": "keystroke_cosine", "bible": "recall@1",
                "wordnet": "recall@1", "lee": "pearson", "wordsim": "wordsim353_spearman"}
    suites = [s for s in headline if s in results and "skipped" not in results[s]]
    systems = []
    for s in suites:
        systems.extend(k for k in results[s] if not k.startswith("_") and k not in systems)
    fig, ax = plt.subplots(figsize=(1.8 * max(1, len(suites)) + 2, 4))
    width = 0.8 / max(1, len(systems))
    for j, system in enumerate(systems):
        values = [results[s].get(system, {}).get(headline[s], float("nan")) for s in suites]
        ax.bar([i + j * width for i in range(len(suites))], values, width, label=system)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(suites))])
    ax.set_xticklabels([f"{s}\n{headline[s]}" for s in suites], fontsize=7)
    ax.set_ylim(0, 1)
    ax.legend(fontsize=7)
    ax.set_title("Evaluation suites")
    fig.tight_layout()
    return _save(fig, path)


def _save(fig, path: Union[str, Path]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    _pyplot().close(fig)
    return path
