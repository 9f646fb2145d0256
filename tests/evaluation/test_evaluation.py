"""Metrics by hand, the local evaluate modules offline, baselines, and the evaluate/plot CLI."""

import json

import evaluate
import pytest
import torch

from tf2rnn_hf.data import trajectories
from tf2rnn_hf.distill import build_student
from tf2rnn_hf.evaluation import evaluate_model, fidelity, fidelity_table, results_markdown, scores
from tf2rnn_hf.evaluation.baselines import StaticEmbedding
from tf2rnn_hf.evaluation.fidelity import late_trajectories, rows_to_tensors
from tf2rnn_hf.hub import save_student

HELD_OUT = [f"{s} number {i}." for i, s in enumerate([
    "The river floods the valley every spring", "A small dog barked at the postman",
    "Markets rallied after the announcement", "She read the letter twice before answering",
    "Heavy rain delayed the football match", "The committee approved the new budget",
    "Bright stars filled the winter sky", "He repaired the old bicycle in the garage",
    "The recipe needs two eggs and some flour", "Engineers tested the bridge for weeks",
    "Children played by the lake until dusk", "The novel was translated into French",
    "A cold wind blew across the empty square", "The museum closed early on Sunday"] * 2)]


def test_metrics_by_hand():
    a = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    b = torch.tensor([[1.0, 0.0], [1.0, 1.0]])
    assert torch.allclose(scores.cosine_fidelity(a, b), torch.tensor([1.0, 2 ** -0.5]))
    # Query 0 ranks its answer first; query 1 ranks document 0 above its answer: MRR = (1 + 1/2) / 2.
    q = torch.tensor([[1.0, 0.0], [1.0, 0.1]])
    d = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    r = scores.retrieval_scores(q, d, ks=(1, 2))
    assert r == {"recall@1": 0.5, "recall@2": 1.0, "mrr": 0.75}
    assert scores.pearson([1, 2, 3], [2, 4, 6]) == pytest.approx(1.0)
    assert scores.spearman([1, 2, 3, 4], [10, 20, 15, 40]) == pytest.approx(0.8)
    assert scores.spearman([1, 1, 2], [1, 1, 2]) == pytest.approx(1.0)  # ties share their mean rank
    # Neighbour agreement: identical embeddings agree fully; a permuted copy does not.
    x = torch.nn.functional.normalize(torch.randn(30, 8, generator=torch.Generator().manual_seed(0)), dim=-1)
    assert scores.neighbour_agreement(x, x, k=3) == 1.0
    assert scores.neighbour_agreement(x[torch.randperm(30)], x, k=3) < 0.5
    with pytest.raises(ValueError, match="more than 10 texts"):
        scores.neighbour_agreement(x[:5], x[:5])


def test_local_evaluate_modules_load_offline():
    fid = evaluate.load(scores.metric_path("trajectory_fidelity"))
    assert fid.compute(predictions=[[1.0, 0.0]], references=[[0.0, 1.0]]) == {"final_cosine": 0.0,
                                                                              "prefix_cosine": 0.0}
    ret = evaluate.load(scores.metric_path("retrieval"))
    assert ret.compute(predictions=[[1.0, 0.0], [1.0, 0.1]], references=[[1.0, 0.0], [0.0, 1.0]])["mrr"] == 0.75
    agree = evaluate.load(scores.metric_path("neighbour_agreement"))
    x = torch.randn(12, 4, generator=torch.Generator().manual_seed(1)).tolist()
    assert agree.compute(predictions=x, references=x, k=3) == {"neighbour_agreement": 1.0}
    with pytest.raises(ValueError, match="Unknown metric"):
        scores.metric_path("bleu")


@pytest.fixture(scope="module")
def held_out(teacher, tmp_path_factory):
    settings = trajectories.TrajectorySettings(bf16=False, max_tokens=32)
    root = trajectories.generate(HELD_OUT, teacher, settings, tmp_path_factory.mktemp("ev"), progress=False)
    return trajectories.load(root)


def test_teacher_is_perfect_and_one_token_late_is_near_098(teacher, held_out):
    rows = rows_to_tensors(held_out)
    assert fidelity([r["trajectory"] for r in rows], rows)["final_cosine"] == pytest.approx(1.0, abs=1e-6)
    empty = teacher.embed_ids([teacher.wrap([])])[0]
    late = fidelity(late_trajectories(rows, empty), rows)
    assert 0.95 < late["final_cosine"] < 0.995  # about 0.98: final cosine alone is a weak measure
    assert late["neighbour_agreement@10"] < 1.0


def test_fidelity_table_and_static_baseline(teacher, held_out):
    torch.manual_seed(0)
    model, tok = build_student(teacher, hidden_size=16, token_init="input_embeddings")
    vectors = torch.nn.functional.normalize(torch.randn(len(tok), 384), dim=-1)
    table = fidelity_table(model, held_out, teacher, token_vectors=vectors)
    assert set(table) == {"student", "teacher", "one token late", "static mean"}
    assert table["teacher"]["final_cosine"] == pytest.approx(1.0, abs=1e-6)
    assert "drift_1-8" in table["student"] and "neighbour_agreement@10" in table["student"]
    enc = StaticEmbedding(vectors).encoder(teacher.tokenizer)(["a cat", "cat a"])  # order-free by construction
    assert torch.allclose(enc[0], enc[1], atol=1e-6)
    markdown = results_markdown({"suites": {"fidelity": table, "bible": {"skipped": "no data"}}})
    rows = [line for line in markdown.splitlines() if line.startswith("| ")]
    assert rows[0].startswith("| system | final_cosine | prefix_cosine |")
    assert [r.split(" | ")[0] for r in rows[1:]] == [f"| {name}" for name in table]
    assert f"| teacher | {1.0:.3f} |" in markdown and "### bible\n\nskipped: no data" in markdown


def test_static_pca_baseline_is_exact_and_does_not_depend_on_the_random_state():
    torch.manual_seed(0)
    vectors = torch.randn(500, 32) * torch.linspace(3, 0.1, 32)  # distinct variances: a unique subspace
    tables = []
    for seed in (1, 2):
        torch.manual_seed(seed)
        tables.append(StaticEmbedding(vectors, pca_dims=8).table)
    assert torch.equal(tables[0], tables[1])
    # The 8 components keep the largest share of variance any 8 directions can: the top singular values'.
    centred = vectors - vectors.mean(0)
    top = torch.linalg.svdvals(centred)[:8]
    assert tables[0].pow(2).sum() == pytest.approx(float(top.pow(2).sum()), rel=1e-4)


# The second: a student whose streams defer its upper layer to word ends (tail_layers), so that inside a word they show
# the second embedding, which the suite must score (with the full one it read 0.947 for session 66's candidate).
@pytest.mark.parametrize("student", [dict(hidden_size=16, token_init="input_embeddings"),
                                     dict(cell_type="tova_attention", num_hidden_layers=2, tail_layers=1)])
def test_keystroke_fidelity_matches_the_streaming_path(teacher, student):
    from tf2rnn_hf.evaluation import keystroke_fidelity
    from tf2rnn_hf.inference.streaming import StreamingEncoder

    torch.manual_seed(0)
    model, tok = build_student(teacher, **student)
    if "tail_layers" in student:
        with torch.no_grad():  # an adapter away from the identity, so that the wrong embedding shows
            model.cell.tail_adapter.weight.add_(torch.randn_like(model.cell.tail_adapter.weight) * 0.05)
        with pytest.raises(ValueError, match="tokenizer"):
            keystroke_fidelity(model, None)
    text = "Hello there, unbelievable"
    ds, _ = trajectories.compute_shard([text], teacher, trajectories.TrajectorySettings(prefix_unit="char",
                                                                                        bf16=False))
    table = keystroke_fidelity(model, ds, tokenizer=tok)
    stream, cos = StreamingEncoder(model, tok), []
    targets = torch.as_tensor(ds.with_format("numpy")[0]["trajectory"], dtype=torch.float32)
    ends = ds[0]["char_ends"]
    for c, char in enumerate(text, start=1):
        emb = stream.type(char)
        if c in ends:
            cos.append(float(torch.nn.functional.cosine_similarity(emb, targets[ends.index(c)], dim=0)))
    assert table["student"]["keystroke_cosine"] == pytest.approx(sum(cos) / len(cos), abs=1e-5)
    assert table["_keystrokes"]["count"] == len(ends)


def test_evaluate_and_plot_cli(teacher, tmp_path, tf2rnn):
    torch.manual_seed(0)
    model, tok = build_student(teacher, hidden_size=16, token_init="input_embeddings")
    save_student(model, tok, tmp_path / "student")
    corpus = tmp_path / "held.txt"
    corpus.write_text("\n".join(HELD_OUT) + "\n")
    code, _, err = tf2rnn("evaluate", tmp_path / "student", "--suites", "fidelity,long,lee", "--corpus", corpus,
                          "--n-texts", "28", "--output", tmp_path / "eval")
    assert code == 0, err[-3000:]
    results = json.loads((tmp_path / "eval" / "results.json").read_text())
    lee = results["suites"]["lee"]
    # The suite's teacher row against an independent computation (scipy, the raw files, the teacher's own
    # sentence-transformers encoder) of the same Pearson correlation.
    import numpy as np
    from scipy.stats import pearsonr
    from sentence_transformers import SentenceTransformer

    from tf2rnn_hf.data.sources import gensim_test_data

    folder = gensim_test_data()
    docs = [" ".join(line.split()) for line in (folder / "lee.cor").read_text(errors="replace").splitlines()
            if line.strip()]
    human = np.loadtxt(folder / "similarities0-1.txt")
    emb = SentenceTransformer(teacher.path, device="cpu").encode(docs, normalize_embeddings=True)
    iu = np.triu_indices(len(docs), 1)
    independent = pearsonr((emb @ emb.T)[iu], human[iu]).statistic
    assert lee["teacher"]["pearson"] == pytest.approx(independent, abs=2e-3)
    assert set(lee) == {"student", "teacher", "static mean", "static SIF", "static SIF+PCA256"}
    assert results["suites"]["fidelity"]["teacher"]["final_cosine"] == pytest.approx(1.0, abs=1e-6)
    long = results["suites"]["long"]  # passages joined from the held-out sentences, past 64 tokens
    assert long["_n_texts"] == 2 and long["teacher"]["drift_65-128"] == pytest.approx(1.0, abs=1e-6)
    assert "drift_65-128" in long["student"] and "drift_65-128" not in results["suites"]["fidelity"]["student"]
    assert "| student |" in (tmp_path / "eval" / "results.md").read_text()
    code, _, err = tf2rnn("plot", tmp_path / "student", "--output", tmp_path / "png", "--results",
                          tmp_path / "eval" / "results.json", "--texts", "Hi there", "Cats")
    assert code == 0, err[-3000:]
    from PIL import Image

    for name in ("trajectories.png", "drift.png", "suites.png"):
        with Image.open(tmp_path / "png" / name) as image:
            image.verify()
            assert image.size[0] > 100


def test_passages_join_consecutive_sentences(teacher):
    from tf2rnn_hf.data.corpus import passages

    out = passages(HELD_OUT, teacher.tokenizer, min_tokens=40, count=3)
    assert len(out) == 3 and out[0].startswith(HELD_OUT[0]) and HELD_OUT[1] in out[0]
    lengths = [len(teacher.tokenizer(p, add_special_tokens=False)["input_ids"]) for p in out]
    assert min(lengths) >= 40 and max(lengths) < 60


def test_unknown_suite_is_an_error(tmp_path):
    from tf2rnn_hf.evaluation import ALL_SUITES, run_suites

    with pytest.raises(ValueError, match="Unknown suites"):
        run_suites({}, ["sts-b"])
    with pytest.raises(ValueError, match="'nli'.*" + ".*".join(ALL_SUITES)):
        evaluate_model(str(tmp_path / "never-loaded"), suites=["fidelity", "nli"])


def test_sts_b_reads_the_wheels_splits():
    from tf2rnn_hf.data.evaluation_sets import sts_b_pairs

    assert [len(sts_b_pairs(split)) for split in ("train", "dev", "test")] == [5749, 1500, 1379]
    assert sts_b_pairs("test")[0] == ("A girl is styling her hair.", "A girl is brushing her hair.", 2.5)
    with pytest.raises(ValueError, match="split"):
        sts_b_pairs("validation")


def test_sts_b_table_whole_and_cut_sentences(teacher, monkeypatch):
    """The teacher row against an independent computation (scipy on sentence-transformers' own encoding),
    and the cut sentences are the typed starts of the sentences."""
    import numpy as np
    from scipy.stats import spearmanr
    from sentence_transformers import SentenceTransformer

    from tf2rnn_hf.data import evaluation_sets
    from tf2rnn_hf.evaluation.suites import sts_b_table, student_encoder, teacher_encoder, token_prefix

    pairs = evaluation_sets.sts_b_pairs("test")[:120]
    monkeypatch.setattr(evaluation_sets, "sts_b_pairs", lambda split="test": pairs)
    torch.manual_seed(0)
    model, tok = build_student(teacher, hidden_size=16, token_init="input_embeddings")
    teacher.bf16 = False
    table = sts_b_table({"teacher": teacher_encoder(teacher), "student": student_encoder(model, tok)},
                        teacher.tokenizer)
    st = SentenceTransformer(teacher.path, device="cpu")
    a = st.encode([p[0] for p in pairs], normalize_embeddings=True)
    b = st.encode([p[1] for p in pairs], normalize_embeddings=True)
    independent = 100 * spearmanr((a * b).sum(1), np.array([p[2] for p in pairs])).statistic
    assert table["teacher"]["spearman"] == pytest.approx(independent, abs=0.05)
    assert set(table["student"]) == {"spearman", "spearman@75%", "spearman@50%", "teacher_agreement@75%",
                                     "teacher_agreement@50%"}
    assert table["_pairs"]["count"] == 120
    text = "A man is slicing a cucumber."
    n = len(teacher.tokenizer(text, add_special_tokens=False)["input_ids"])
    half = token_prefix(text, teacher.tokenizer, 0.5)
    assert text.startswith(half) and len(teacher.tokenizer(half, add_special_tokens=False)["input_ids"]) == round(n / 2)


def test_evaluate_on_the_users_own_text_by_source(teacher, tmp_path, tf2rnn):
    """`tf2rnn evaluate MODEL --texts FILE`: fidelity on the file's texts, and by source when it has one."""
    torch.manual_seed(0)
    model, tok = build_student(teacher, hidden_size=16, token_init="input_embeddings")
    save_student(model, tok, tmp_path / "student")
    mine = tmp_path / "mine.jsonl"
    mine.write_text("".join(json.dumps({"text": t, "source": "odd" if i % 2 else "even"}) + "\n"
                            for i, t in enumerate(HELD_OUT)))
    code, _, err = tf2rnn("evaluate", tmp_path / "student", "--texts", mine, "--no-baselines", "--output",
                          tmp_path / "eval")
    assert code == 0, err[-3000:]
    suites = json.loads((tmp_path / "eval" / "results.json").read_text())["suites"]
    assert set(suites) == {"fidelity", "fidelity-by-source"}
    assert suites["fidelity"]["_n_texts"] == len(HELD_OUT)
    by_source = suites["fidelity-by-source"]
    assert {k: v["texts"] for k, v in by_source.items()} == {"even": len(HELD_OUT) / 2, "odd": len(HELD_OUT) / 2}
    assert 0 < by_source["odd"]["final_cosine"] <= 1 and "neighbour_agreement@10" in by_source["odd"]


def test_texts_can_be_chosen_by_source(tmp_path):
    from tf2rnn_hf.data.corpus import load_texts

    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps({"text": f"text {i}", "source": s}) + "\n"
                            for i, s in enumerate(["a", "b", "c", "a"])))
    assert load_texts(str(path), exclude_sources=["a"])["text"] == ["text 1", "text 2"]
    assert load_texts(str(path), only_sources=["a", "c"])["text"] == ["text 0", "text 2", "text 3"]
    with pytest.raises(ValueError, match="Unknown sources.*'z'"):
        load_texts(str(path), exclude_sources=["z"])
