"""The evaluation suites (Bible paraphrase retrieval, WordNet definition retrieval, Lee document
similarity, word similarity) and the whole evaluation of one saved student (`evaluate_model`)."""

from typing import Callable, Dict, List, Optional, Sequence

import torch
import torch.nn.functional as F
from transformers import AutoTokenizer

from ..data import evaluation_sets, trajectories
from ..data.corpus import RECIPES, load_texts, passages
from ..data.teacher import Teacher, teacher_name_of
from ..inference.encode import encode_texts
from ..models import TF2RNNModel
from ..utils import stable_bucket
from . import scores
from .baselines import StaticEmbedding, sif_weights, token_frequencies
from .fidelity import fidelity, fidelity_table, keystroke_fidelity, rows_to_tensors, student_trajectories

Encoder = Callable[[Sequence[str]], torch.Tensor]


def student_encoder(model: TF2RNNModel, tokenizer, batch_size: int = 64) -> Encoder:
    """texts -> the student's final embeddings (`inference.encode_texts`)."""
    return lambda texts: encode_texts(model, tokenizer, texts, batch_size=batch_size)


def teacher_encoder(teacher: Teacher) -> Encoder:
    """texts -> the teacher's sentence embeddings."""
    return lambda texts: teacher.encode(list(texts))


class SkipSuite(Exception):
    """A suite whose data is not available here; reported with its reason, never dropped silently."""


def _sample(items: Sequence, n: int, salt: str) -> List:
    keyed = sorted(range(len(items)), key=lambda i: stable_bucket(f"{salt}:{i}", 1 << 30))
    return [items[i] for i in sorted(keyed[:n])]


def _retrieval_suite(loader: str, label: str, n: int):
    """A suite over (query, answer) pairs from `data.evaluation_sets.<loader>`, `n` of them sampled stably."""
    def run(encode: Encoder) -> Dict[str, float]:
        try:
            pairs = getattr(evaluation_sets, loader)()
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
    try:
        docs, human = evaluation_sets.lee_documents(), torch.tensor(evaluation_sets.lee_similarities())
    except Exception as err:
        raise SkipSuite(f"Lee corpus unavailable: {err}") from err
    emb = F.normalize(encode(docs), dim=-1)
    sims = emb @ emb.T
    iu = torch.triu_indices(len(docs), len(docs), offset=1)
    return {"pearson": scores.pearson(sims[iu[0], iu[1]], human[iu[0], iu[1]]),
            "spearman": scores.spearman(sims[iu[0], iu[1]], human[iu[0], iu[1]])}


def word_similarity_suite(encode: Encoder) -> Dict[str, float]:
    """WordSim-353 and SimLex-999: Spearman between embedding cosine and human scores."""
    result = {}
    for name in ("wordsim353", "simlex999"):
        try:
            pairs = evaluation_sets.word_pairs(name)
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


def fidelity_by_source(model: TF2RNNModel, dataset, sources: Sequence[str]) -> Dict[str, Dict[str, float]]:
    """The student's fidelity on the held-out rows of each source (the corpus records where each sentence came
    from), one row per source with its count; neighbour agreement is among that source's texts."""
    rows = rows_to_tensors(dataset)
    predicted = student_trajectories(model, rows)
    table = {}
    for source in sorted(set(sources)):
        idx = [i for i, s in enumerate(sources) if s == source]
        table[source] = {**fidelity([predicted[i] for i in idx], [rows[i] for i in idx]), "texts": float(len(idx))}
    return table


STS_B_CUTS = (1.0, 0.75, 0.5)


def token_prefix(text: str, tokenizer, fraction: float) -> str:
    """The start of `text` that holds its first `fraction` of tokens (at least one): what a user has typed
    by then, cut where that token ends."""
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    offsets = enc["offset_mapping"]
    if fraction >= 1 or not offsets:
        return text
    keep = max(1, round(fraction * len(offsets)))
    return text[:offsets[keep - 1][1]]


def sts_b_table(encoders: Dict[str, Encoder], tokenizer, split: str = "test") -> Dict[str, Dict[str, float]]:
    """STS-B (the field's sentence-similarity benchmark): cosine Spearman x100 against the gold scores on
    whole sentences and on each sentence cut to its first 75% and 50% of tokens (`tokenizer`'s). On the cut
    sentences every system but the teacher also gets `teacher_agreement@N%`: Spearman x100 between its pair
    cosines and the teacher's on the same cut pairs (how alike the two rank partial text)."""
    try:
        pairs = evaluation_sets.sts_b_pairs(split)
    except Exception as err:
        raise SkipSuite(f"STS-B unavailable: {err}") from err
    gold = torch.tensor([p[2] for p in pairs])
    cuts = {f: ([token_prefix(a, tokenizer, f) for a, _, _ in pairs],
                [token_prefix(b, tokenizer, f) for _, b, _ in pairs]) for f in STS_B_CUTS}
    table: Dict[str, Dict[str, float]] = {}
    cosines = {}
    for system, encode in encoders.items():
        row = {}
        for fraction, (first, second) in cuts.items():
            cos = (F.normalize(encode(first), dim=-1) * F.normalize(encode(second), dim=-1)).sum(-1)
            cosines[system, fraction] = cos
            row["spearman" if fraction == 1 else f"spearman@{fraction:.0%}"] = 100 * scores.spearman(cos, gold)
        table[system] = row
    if "teacher" in encoders:
        for system in table:
            if system != "teacher":
                table[system].update({f"teacher_agreement@{f:.0%}": 100 * scores.spearman(
                    cosines[system, f], cosines["teacher", f]) for f in STS_B_CUTS if f < 1})
    table["_pairs"] = {"count": float(len(pairs))}
    return table


ALL_SUITES = ("fidelity", "long", "keystroke", "sts-b") + tuple(SUITES)


def evaluate_model(model_path: str, teacher_name: Optional[str] = None, suites: Sequence[str] = ALL_SUITES,
                   corpus: str = "offline", eval_split: str = "heldout", n_texts: int = 1000,
                   cache_dir: Optional[str] = None, baselines: bool = True) -> Dict[str, dict]:
    """Evaluate a saved student against its teacher and the static baselines on every suite.

    Returns {"suites": {suite: {system: metrics} | {"skipped": reason}}, "model": ..., "teacher": ...}.
    """
    unknown = [suite for suite in suites if suite not in ALL_SUITES]
    if unknown:
        raise ValueError(f"Unknown suites {', '.join(map(repr, unknown))}; choose from {', '.join(ALL_SUITES)}.")
    model = TF2RNNModel.from_pretrained(model_path).eval()
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    teacher_name = teacher_name or teacher_name_of(model.config.teacher_name_or_path)
    teacher = Teacher(teacher_name)
    results: Dict[str, dict] = {}
    encoders: Dict[str, Encoder] = {"student": student_encoder(model, tokenizer), "teacher": teacher_encoder(teacher)}
    token_vectors = teacher.token_vectors(cache_dir, progress=False)
    if baselines:
        freq_texts = load_texts(corpus, "train", limit=50_000, cache_dir=cache_dir)["text"] if corpus else []
        weights = sif_weights(token_frequencies(teacher.tokenizer, freq_texts))
        encoders.update({
            name: StaticEmbedding(token_vectors, **kwargs).encoder(teacher.tokenizer, teacher.max_length)
            for name, kwargs in (("static mean", {}), ("static SIF", {"weights": weights}),
                                 ("static SIF+PCA256", {"weights": weights, "pca_dims": 256}))})
    byte_student = model.config.granularity == "byte"
    # The built-in corpora's splits run source by source: a stable sample spans every source (the first
    # 1,000 held-out rows, which evaluations before 0.2 read, are all WordNet glosses). Other text is read in order.
    sample_seed = 0 if corpus in RECIPES else None
    if "fidelity" in suites:
        held_out = load_texts(corpus, eval_split, limit=n_texts, cache_dir=cache_dir, shuffle_seed=sample_seed)
        texts = held_out["text"]
        # A byte student is scored at every keystroke (character trajectories); steps count bytes.
        settings = trajectories.TrajectorySettings(max_tokens=64, prefix_unit="char" if byte_student else "token")
        ds = trajectories.load(trajectories.generate(texts, teacher, settings, cache_dir, progress=False))
        if byte_student:
            ds = trajectories.byte_rows(ds, tokenizer.offset)
        results["fidelity"] = fidelity_table(model, ds, teacher, token_vectors, baselines=not byte_student)
        results["fidelity"]["_n_texts"] = len(ds)
        if "source" in held_out.column_names and len(ds) == len(held_out):
            results["fidelity-by-source"] = fidelity_by_source(model, ds, held_out["source"])
    if "long" in suites and not byte_student:
        # Passages of 100-128 tokens: past the 64 tokens the students train on (drift_65-128).
        texts = passages(load_texts(corpus, eval_split, limit=20 * n_texts, cache_dir=cache_dir)["text"],
                         teacher.tokenizer, min_tokens=100, count=max(1, n_texts // 5))
        settings = trajectories.TrajectorySettings(max_tokens=128)
        ds = trajectories.load(trajectories.generate(texts, teacher, settings, cache_dir, progress=False))
        results["long"] = fidelity_table(model, ds, teacher, token_vectors)
        results["long"]["_n_texts"] = len(ds)
    if "keystroke" in suites:
        texts = load_texts(corpus, eval_split, limit=min(n_texts, 200), cache_dir=cache_dir,
                           shuffle_seed=sample_seed)["text"]
        settings = trajectories.TrajectorySettings(prefix_unit="char", max_tokens=64)
        ds = trajectories.load(trajectories.generate(texts, teacher, settings, cache_dir, progress=False))
        results["keystroke"] = keystroke_fidelity(model, ds, token_vectors, tokenizer)
    teacher.bf16 = False  # the suites' teacher rows in full precision (building trajectories switched bf16 on)
    if "sts-b" in suites:
        try:
            results["sts-b"] = sts_b_table(encoders, teacher.tokenizer)
        except SkipSuite as reason:
            results["sts-b"] = {"skipped": str(reason)}
    results.update(run_suites(encoders, [s for s in suites if s not in ("fidelity", "long", "keystroke", "sts-b")]))
    return {"model": str(model_path), "teacher": teacher.hub_id, "static_baselines": STATIC_NOTE, "suites": results}


STATIC_NOTE = ("The 'static' rows are this project's own implementation of the static method (per-token teacher "
               "vectors, SIF weights, PCA), not Model2Vec; the real Model2Vec is scored as a peer by "
               "benchmarks/peers/model2vec.sh.")
