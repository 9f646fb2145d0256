"""How close a student is to its teacher: fidelity on held-out trajectories, against baselines.

Rows of every table: the student, the teacher itself, "one token late" (the teacher's embedding one
step earlier, which shows how forgiving final cosine is) and the static order-free baseline (the mean of
each token's teacher vector, Model2Vec-style, distilled by our own code).
"""

from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F

from . import scores
from .teacher import Teacher

DRIFT_BUCKETS = ((1, 8), (9, 16), (17, 32), (33, 64), (65, 128), (129, 256))


def _rows_to_tensors(dataset) -> List[Dict[str, torch.Tensor]]:
    ds = dataset.with_format("numpy", columns=["input_ids", "target_steps", "trajectory"])
    return [{"input_ids": torch.as_tensor(r["input_ids"], dtype=torch.long),
             "steps": torch.as_tensor(r["target_steps"], dtype=torch.long),
             "trajectory": torch.as_tensor(r["trajectory"], dtype=torch.float32)} for r in ds]


def _pad_ids(sequences) -> Tuple[torch.Tensor, torch.Tensor]:
    """Right-padded ids (0) and attention mask for a list of id sequences (lists or tensors)."""
    width = max(len(seq) for seq in sequences)
    ids = torch.zeros(len(sequences), width, dtype=torch.long)
    mask = torch.zeros(len(sequences), width, dtype=torch.long)
    for i, seq in enumerate(sequences):
        ids[i, :len(seq)] = torch.as_tensor(seq, dtype=torch.long)
        mask[i, :len(seq)] = 1
    return ids, mask


@torch.no_grad()
def student_trajectories(model, rows: Sequence[Dict[str, torch.Tensor]], batch_size: int = 64
                         ) -> List[torch.Tensor]:
    """The student's free-running embedding after each target step of each row."""
    model.eval()
    device = next(model.parameters()).device
    out = []
    for start in range(0, len(rows), batch_size):
        chunk = rows[start:start + batch_size]
        ids, mask = _pad_ids([r["input_ids"] for r in chunk])
        traj = model(ids.to(device), attention_mask=mask.to(device), use_cache=False).last_hidden_state.cpu()
        out.extend(traj[i, r["steps"] - 1] for i, r in enumerate(chunk))
    return out


def static_trajectories(rows, token_vectors: torch.Tensor, weights: Optional[torch.Tensor] = None
                        ) -> List[torch.Tensor]:
    """The order-free baseline: the (weighted) running mean of per-token teacher vectors, normalised."""
    out = []
    for r in rows:
        vec = token_vectors[r["input_ids"]]
        if weights is not None:
            vec = vec * weights[r["input_ids"], None]
        out.append(F.normalize(torch.cumsum(vec, 0)[r["steps"] - 1], dim=-1))
    return out


def late_trajectories(rows, empty_embedding: torch.Tensor) -> List[torch.Tensor]:
    """"One token late": the teacher's embedding of the previous prefix (the empty text before step 1)."""
    return [torch.cat([empty_embedding[None], r["trajectory"][:-1]]) for r in rows]


def fidelity(predicted: Sequence[torch.Tensor], rows) -> Dict[str, float]:
    """Final cosine, mean cosine over all prefixes, neighbour agreement@10 and the drift curve."""
    cos = [scores.cosine_fidelity(p, r["trajectory"]) for p, r in zip(predicted, rows)]
    finals = torch.stack([c[-1] for c in cos])
    result = {"final_cosine": float(finals.mean()), "prefix_cosine": float(torch.cat(cos).mean())}
    if len(rows) > 10:
        result["neighbour_agreement@10"] = scores.neighbour_agreement(
            torch.stack([p[-1] for p in predicted]), torch.stack([r["trajectory"][-1] for r in rows]))
    for lo, hi in DRIFT_BUCKETS:
        vals = [c[(r["steps"] >= lo) & (r["steps"] <= hi)] for c, r in zip(cos, rows)]
        vals = torch.cat(vals)
        if len(vals):
            result[f"drift_{lo}-{hi}"] = float(vals.mean())
    return result


def fidelity_table(model, dataset, teacher: Teacher, token_vectors: Optional[torch.Tensor] = None,
                   baselines: bool = True) -> Dict[str, Dict[str, float]]:
    """Fidelity rows for the student, the teacher, and (on token rows) one-token-late and the static
    baseline. On a byte student's rows, steps (and drift buckets) count bytes."""
    rows = _rows_to_tensors(dataset)
    table = {"student": fidelity(student_trajectories(model, rows), rows),
             "teacher": fidelity([r["trajectory"] for r in rows], rows)}
    if baselines:
        if token_vectors is None:
            token_vectors = teacher.token_vectors(progress=False)
        empty = teacher.embed_ids([teacher.wrap([])])[0]
        table["one token late"] = fidelity(late_trajectories(rows, empty), rows)
        table["static mean"] = fidelity(static_trajectories(rows, token_vectors), rows)
    return table


def format_table(table: Dict[str, Dict[str, float]], title: str = "") -> str:
    """A markdown table: one row per system, one column per metric."""
    columns = []
    for metrics in table.values():
        columns.extend(k for k in metrics if k not in columns)
    lines = [f"### {title}", ""] if title else []
    lines.append("| system | " + " | ".join(columns) + " |")
    lines.append("|---" * (len(columns) + 1) + "|")
    for name, metrics in table.items():
        cells = [f"{metrics[c]:.3f}" if c in metrics else "-" for c in columns]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


# ---------------------------------------------------------------- encoders: texts -> [N, D]


Encoder = Callable[[Sequence[str]], torch.Tensor]


def student_encoder(model, tokenizer, batch_size: int = 64, max_length: Optional[int] = None) -> Encoder:
    """Final embeddings of a TF2RNN student (texts truncated like the teacher's: 256 tokens, or 1,024
    bytes for a byte student)."""
    if max_length is None:
        max_length = 1024 if model.config.granularity == "byte" else 256

    @torch.no_grad()
    def encode(texts: Sequence[str]) -> torch.Tensor:
        model.eval()
        device = next(model.parameters()).device
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # less padding per batch
        out = torch.zeros(len(texts), model.config.output_size)
        for start in range(0, len(order), batch_size):
            idx = order[start:start + batch_size]
            batch = tokenizer([texts[i] for i in idx], padding=True, truncation=True, max_length=max_length,
                              return_tensors="pt").to(device)
            out[idx] = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                             use_cache=False).pooler_output.float().cpu()
        return out

    return encode


def teacher_encoder(teacher: Teacher) -> Encoder:
    return lambda texts: teacher.encode(list(texts))


def token_frequencies(teacher: Teacher, texts: Sequence[str]) -> torch.Tensor:
    """Token counts over `texts` (+1 smoothing), for SIF weights."""
    counts = torch.ones(len(teacher.tokenizer))
    for ids in teacher.tokenizer(list(texts), add_special_tokens=False)["input_ids"]:
        counts += torch.bincount(torch.as_tensor(ids, dtype=torch.long), minlength=len(counts)).float()
    return counts


def sif_weights(counts: torch.Tensor, a: float = 1e-3) -> torch.Tensor:
    """Smooth inverse frequency a / (a + p(w)) (Arora et al. 2017, as Model2Vec weights its vectors)."""
    return a / (a + counts / counts.sum())


def static_encoder(teacher: Teacher, token_vectors: torch.Tensor, weights: Optional[torch.Tensor] = None,
                   pca_dims: Optional[int] = None) -> Encoder:
    """The order-free static baseline: (weighted) mean of per-token teacher vectors, optionally PCA'd
    (fitted on the token table) as Model2Vec does."""
    table = token_vectors
    if pca_dims:
        centred = table - table.mean(0)
        _, _, v = torch.pca_lowrank(centred, q=pca_dims, center=False)
        table = centred @ v[:, :pca_dims]

    def encode(texts: Sequence[str]) -> torch.Tensor:
        enc = teacher.tokenizer(list(texts), add_special_tokens=False, truncation=True,
                                max_length=teacher.max_length)["input_ids"]
        out = torch.zeros(len(texts), table.shape[1])
        for i, ids in enumerate(enc):
            if not ids:
                continue
            ids_t = torch.as_tensor(ids, dtype=torch.long)
            vec = table[ids_t] if weights is None else table[ids_t] * weights[ids_t, None]
            out[i] = vec.sum(0)
        return F.normalize(out, dim=-1)

    return encode


# ---------------------------------------------------------------- suites


class SkipSuite(Exception):
    """A suite whose data is not available here; reported with its reason, never dropped silently."""


def _sample(items: Sequence, n: int, salt: str) -> List:
    from .corpus import stable_bucket

    keyed = sorted(range(len(items)), key=lambda i: stable_bucket(f"{salt}:{i}", 1 << 30))
    return [items[i] for i in sorted(keyed[:n])]


def _retrieval_suite(loader: str, label: str, n: int):
    """A suite over (query, answer) pairs from `evaluation_data.<loader>`, `n` of them sampled stably."""
    def run(encode: Encoder) -> Dict[str, float]:
        from . import evaluation_data

        try:
            pairs = getattr(evaluation_data, loader)()
        except Exception as err:
            raise SkipSuite(f"{label} unavailable: {err}") from err
        picked = _sample(list(pairs), n, loader)
        if len(picked) < n:
            raise SkipSuite(f"only {len(picked)} {label} pairs available, {n} needed")
        return scores.retrieval_scores(encode([q for q, _ in picked]), encode([d for _, d in picked]))
    return run


def bible_suite(n: int = 2000):
    """KJV verse -> its WEB verse among `n` (public-domain paraphrase pairs)."""
    return _retrieval_suite("bible_pairs", "Bible texts", n)


def wordnet_suite(n: int = 2000):
    """WordNet example sentence -> its synset's definition among `n` held-out synsets."""
    return _retrieval_suite("wordnet_pairs", "WordNet", n)


def lee_suite(encode: Encoder) -> Dict[str, float]:
    """Lee et al. (2005) document similarity: Pearson and Spearman over the 1,225 rated pairs."""
    from .evaluation_data import lee_documents, lee_similarities

    try:
        docs, human = lee_documents(), torch.tensor(lee_similarities())
    except Exception as err:
        raise SkipSuite(f"Lee corpus unavailable: {err}") from err
    emb = F.normalize(encode(docs), dim=-1)
    sims = emb @ emb.T
    iu = torch.triu_indices(len(docs), len(docs), offset=1)
    return {"pearson": scores.pearson(sims[iu[0], iu[1]], human[iu[0], iu[1]]),
            "spearman": scores.spearman(sims[iu[0], iu[1]], human[iu[0], iu[1]])}


def word_similarity_suite(encode: Encoder) -> Dict[str, float]:
    """WordSim-353 and SimLex-999: Spearman between embedding cosine and human scores."""
    from .evaluation_data import word_pairs

    result = {}
    for name in ("wordsim353", "simlex999"):
        try:
            pairs = word_pairs(name)
        except Exception as err:
            raise SkipSuite(f"{name} unavailable: {err}") from err
        a = F.normalize(encode([p[0] for p in pairs]), dim=-1)
        b = F.normalize(encode([p[1] for p in pairs]), dim=-1)
        result[f"{name}_spearman"] = scores.spearman((a * b).sum(-1), torch.tensor([p[2] for p in pairs]))
    return result


SUITES = {"bible": bible_suite(), "wordnet": wordnet_suite(), "lee": lee_suite, "wordsim": word_similarity_suite}


def run_suites(encoders: Dict[str, Encoder], suites: Sequence[str] = tuple(SUITES)) -> Dict[str, dict]:
    """Every suite for every encoder: {suite: {system: metrics}} plus {suite: {"skipped": reason}}."""
    unknown = [s for s in suites if s not in SUITES]
    if unknown:
        raise ValueError(f"Unknown suites {unknown}; choose from {', '.join(SUITES)}.")
    results: Dict[str, dict] = {}
    for suite in suites:
        results[suite] = {}
        for system, encode in encoders.items():
            try:
                results[suite][system] = SUITES[suite](encode)
            except SkipSuite as reason:
                results[suite] = {"skipped": str(reason)}
                break
    return results


# ---------------------------------------------------------------- per keystroke


@torch.no_grad()
def keystroke_fidelity(model, char_dataset, token_vectors: Optional[torch.Tensor] = None, tokenizer=None,
                       batch_size: int = 256) -> Dict[str, Dict[str, float]]:
    """Cosine to the teacher after every keystroke that changes the teacher's tokens (character-level
    trajectories).

    The student's embedding of text[:c] is what the streaming encoder shows after typing c characters
    (the two are equal, tested); it is computed here in batches of prefixes. A byte student (pass its
    `tokenizer`) reads the prefixes' bytes; `prefixes` and the static baseline are the teacher's tokens.
    """
    model.eval()
    prefixes, targets = [], []
    for row in char_dataset.with_format("numpy", columns=["char_input_ids", "trajectory"]):
        prefixes.extend(list(ids) for ids in row["char_input_ids"])
        targets.append(torch.as_tensor(row["trajectory"], dtype=torch.float32))
    target = torch.cat(targets)
    if model.config.granularity == "byte":
        # Byte prefixes of a text are prefixes of its byte sequence: one free run per text gives them all.
        if not hasattr(tokenizer, "offset"):
            raise ValueError("keystroke_fidelity of a byte student needs its ByT5 tokenizer.")
        from .trajectories import byte_rows

        rows = _rows_to_tensors(byte_rows(char_dataset, tokenizer.offset))
        student = torch.cat(student_trajectories(model, rows, batch_size))
    else:
        student = torch.zeros_like(target)
        order = sorted(range(len(prefixes)), key=lambda i: len(prefixes[i]))
        for start in range(0, len(order), batch_size):
            idx = order[start:start + batch_size]
            ids, mask = _pad_ids([prefixes[i] for i in idx])
            student[idx] = model(ids, attention_mask=mask, use_cache=False).pooler_output.float()
    table = {"student": {"keystroke_cosine": float(scores.cosine_fidelity(student, target).mean())}}
    if token_vectors is not None:
        static = torch.stack([F.normalize(token_vectors[torch.as_tensor(p, dtype=torch.long)].sum(0), dim=-1)
                              for p in prefixes])
        table["static mean"] = {"keystroke_cosine": float(scores.cosine_fidelity(static, target).mean())}
    table["_keystrokes"] = {"count": float(len(prefixes))}
    return table


# ---------------------------------------------------------------- the whole evaluation of one student


ALL_SUITES = ("fidelity", "long", "keystroke") + tuple(SUITES)


def evaluate_model(model_path: str, teacher_name: Optional[str] = None, suites: Sequence[str] = ALL_SUITES,
                   corpus: str = "offline", eval_split: str = "heldout", n_texts: int = 1000,
                   cache_dir: Optional[str] = None, baselines: bool = True) -> Dict[str, dict]:
    """Evaluate a saved student against its teacher and the static baselines on every suite.

    Returns {"suites": {suite: {system: metrics} | {"skipped": reason}}, "model": ..., "teacher": ...}.
    """
    from transformers import AutoTokenizer

    from . import trajectories
    from .corpus import load_texts, passages
    from .modeling_tf2rnn import TF2RNNModel

    model = TF2RNNModel.from_pretrained(model_path).eval()
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    teacher_name = teacher_name or ("built-in" if model.config.teacher_name_or_path in (None, "sentence-transformers/"
                                                                                       "all-MiniLM-L6-v2")
                                    else model.config.teacher_name_or_path)
    teacher = Teacher(teacher_name)
    results: Dict[str, dict] = {}
    encoders: Dict[str, Encoder] = {"student": student_encoder(model, tokenizer), "teacher": teacher_encoder(teacher)}
    token_vectors = teacher.token_vectors(cache_dir, progress=False)
    if baselines:
        freq_texts = load_texts(corpus, "train", limit=50_000, cache_dir=cache_dir)["text"] if corpus else []
        weights = sif_weights(token_frequencies(teacher, freq_texts))
        encoders.update({
            "static mean": static_encoder(teacher, token_vectors),
            "static SIF": static_encoder(teacher, token_vectors, weights),
            "static SIF+PCA256": static_encoder(teacher, token_vectors, weights, pca_dims=256),
        })
    byte_student = model.config.granularity == "byte"
    if "fidelity" in suites:
        texts = load_texts(corpus, eval_split, limit=n_texts, cache_dir=cache_dir)["text"]
        # A byte student is scored at every keystroke (character trajectories); steps count bytes.
        settings = trajectories.TrajectorySettings(max_tokens=64, granularity="char" if byte_student else "token")
        ds = trajectories.load(trajectories.generate(texts, teacher, settings, cache_dir, progress=False))
        if byte_student:
            ds = trajectories.byte_rows(ds, tokenizer.offset)
        results["fidelity"] = fidelity_table(model, ds, teacher, token_vectors, baselines=not byte_student)
        results["fidelity"]["_n_texts"] = len(ds)
    if "long" in suites and not byte_student:
        # Passages of 100-128 tokens: past the 64 tokens the students train on (drift_65-128).
        texts = passages(load_texts(corpus, eval_split, limit=20 * n_texts, cache_dir=cache_dir)["text"],
                         teacher.tokenizer, min_tokens=100, count=max(1, n_texts // 5))
        settings = trajectories.TrajectorySettings(max_tokens=128)
        ds = trajectories.load(trajectories.generate(texts, teacher, settings, cache_dir, progress=False))
        results["long"] = fidelity_table(model, ds, teacher, token_vectors)
        results["long"]["_n_texts"] = len(ds)
    if "keystroke" in suites:
        texts = load_texts(corpus, eval_split, limit=min(n_texts, 200), cache_dir=cache_dir)["text"]
        settings = trajectories.TrajectorySettings(granularity="char", max_tokens=64)
        ds = trajectories.load(trajectories.generate(texts, teacher, settings, cache_dir, progress=False))
        results["keystroke"] = keystroke_fidelity(model, ds, token_vectors, tokenizer)
    results.update(run_suites(encoders, [s for s in suites if s not in ("fidelity", "long", "keystroke")]))
    return {"model": str(model_path), "teacher": teacher.hub_id, "model2vec": MODEL2VEC_NOTE, "suites": results}


MODEL2VEC_NOTE = ("Model2Vec itself is not run: its `distill` extra pins transformers<5.4, which conflicts with this "
                  "package's transformers 5.x. The 'static' rows are the same method (per-token teacher vectors, "
                  "SIF weighting, PCA) implemented here.")


def results_markdown(results: Dict[str, dict]) -> str:
    """One markdown table per suite, and a line for each skipped suite."""
    parts = []
    for suite, table in results["suites"].items():
        if "skipped" in table:
            parts.append(f"### {suite}\n\nskipped: {table['skipped']}")
            continue
        clean = {k: v for k, v in table.items() if not k.startswith("_")}
        parts.append(format_table(clean, title=suite))
    return "\n\n".join(parts)
