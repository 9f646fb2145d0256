"""Trajectories: batched == one call per prefix, char prefixes, crash-safe resumable shards, and two
accelerate processes producing the same cache as one."""

import dataclasses
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tf2rnn_hf.data import trajectories as T

ACCELERATE = [sys.executable, "-m", "accelerate.commands.launch"]  # `accelerate launch`, whatever PATH holds
SCRIPT = Path(__file__).parents[1] / "scripts" / "gen_trajectories.py"
RANDOM_TEXTS = ["Colourless green ideas sleep furiously.", "A", "an unusual-looking 1999 café, oddly named",
                "Hello hello HELLO", "    ", "x y z w v u t s r q p", "Colourless green dreams."]


def test_batched_equals_one_call_per_prefix(teacher):
    settings = T.TrajectorySettings(bf16=False, token_budget=64)
    ds, stats = T.compute_shard(RANDOM_TEXTS, teacher, settings)
    assert stats["skipped_empty"] == 1 and stats["texts"] == 6
    assert stats["teacher_calls"] < stats["prefixes"]  # the shared "Colourless green" prefixes run once
    ds = ds.with_format("numpy")
    for row in ds:
        ids = row["input_ids"].tolist()
        for k, t in enumerate(row["target_steps"]):
            single = teacher.embed_ids([teacher.wrap(ids[:t])])[0].numpy()
            assert np.abs(row["trajectory"][k].astype(np.float32) - single).max() < 2e-3  # float16 storage


def test_stride_keeps_first_and_last():
    assert T.target_steps(10, 4) == [1, 4, 8, 10]
    assert T.target_steps(1, 3) == [1]
    assert T.target_steps(5, 1) == [1, 2, 3, 4, 5]
    assert T.target_steps(0, 1) == []
    assert T.target_steps(10, 4, dense_prefixes=3) == [1, 2, 3, 4, 8, 10]
    assert T.target_steps(2, 4, dense_prefixes=8) == [1, 2]
    with pytest.raises(ValueError, match="dense_prefixes"):
        T.TrajectorySettings(dense_prefixes=-1)


def test_dense_prefixes_in_shards_and_cache_key(teacher, tmp_path):
    text = "x y z w v u t s r q p"
    settings = T.TrajectorySettings(bf16=False, stride=4, dense_prefixes=3)
    ds, _ = T.compute_shard([text], teacher, settings)
    n = len(ds[0]["input_ids"])
    assert ds[0]["target_steps"] == T.target_steps(n, 4, 3) and len(ds[0]["trajectory"]) == len(ds[0]["target_steps"])
    # Unset, the new field leaves the cache key as it was before the field existed (earlier caches stay valid).
    plain = T.TrajectorySettings(bf16=False, stride=4)
    old_fields = {k: v for k, v in dataclasses.asdict(plain).items() if k != "dense_prefixes"}
    old_key = json.dumps({"teacher": teacher.fingerprint(), "settings": old_fields}, sort_keys=True)
    assert T.cache_root(teacher, plain, tmp_path).name == f"token-{hashlib.sha256(old_key.encode()).hexdigest()[:16]}"
    assert T.cache_root(teacher, settings, tmp_path) != T.cache_root(teacher, plain, tmp_path)


def test_char_granularity_records_shared_tokens(teacher):
    settings = T.TrajectorySettings(prefix_unit="char", bf16=False)
    ds, _ = T.compute_shard(["Hello world"], teacher, settings)
    row = ds[0]
    # Typing the space changes no token, so "Hello " gets no target of its own.
    assert 6 not in row["char_ends"] and row["char_ends"][-1] == len("Hello world")
    final = teacher.tokenizer("Hello world", add_special_tokens=False)["input_ids"]
    assert row["char_input_ids"][-1] == final
    assert row["shared_tokens"][-1] == len(final)
    for end, ids, shared in zip(row["char_ends"], row["char_input_ids"], row["shared_tokens"]):
        assert ids == teacher.tokenizer("Hello world"[:end], add_special_tokens=False)["input_ids"]
        assert ids[:shared] == final[:shared]


def test_byte_rows_put_each_target_at_its_keystrokes_last_byte(teacher):
    settings = T.TrajectorySettings(prefix_unit="char", bf16=False)
    text = "Naïve café 😀 ok"
    ds, _ = T.compute_shard([text], teacher, settings)
    row, byte_row = ds[0], T.byte_rows(ds)[0]
    assert byte_row["input_ids"] == [b + 3 for b in text[:row["char_ends"][-1]].encode("utf-8")]
    assert byte_row["target_steps"] == [len(text[:c].encode("utf-8")) for c in row["char_ends"]]
    assert len(text.encode("utf-8")) > len(text)  # multi-byte characters are in the test
    assert byte_row["trajectory"] == row["trajectory"]
    with pytest.raises(ValueError, match="character-level"):
        T.byte_rows(T.compute_shard([text], teacher, T.TrajectorySettings(bf16=False))[0])


def test_truncation_is_recorded(teacher):
    ds, stats = T.compute_shard(["word " * 50], teacher, T.TrajectorySettings(max_tokens=8, bf16=False))
    assert stats["truncated"] == 1 and ds[0]["truncated"] and len(ds[0]["input_ids"]) == 8


def test_bad_settings():
    with pytest.raises(ValueError, match="prefix_unit"):
        T.TrajectorySettings(prefix_unit="byte")
    with pytest.raises(ValueError, match="stride"):
        T.TrajectorySettings(stride=0)


def _env():
    env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
    env.pop("ACCELERATE_USE_CPU", None)
    return env


def _shards(cache):
    return sorted(p for p in cache.glob("trajectories/*/shards/*") if not p.name.startswith("."))


def test_killed_run_resumes_without_recomputing(tmp_path):
    interrupted, clean = tmp_path / "interrupted", tmp_path / "clean"
    proc = subprocess.Popen([sys.executable, str(SCRIPT), str(interrupted), "40", "4"], env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    while time.time() < deadline and len(_shards(interrupted)) < 2:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = _shards(interrupted)
    assert 2 <= len(done) < 10, done  # killed mid-way
    stamps = {p.name: p.stat().st_mtime_ns for p in done}
    subprocess.run([sys.executable, str(SCRIPT), str(interrupted), "40", "4"], env=_env(), check=True,
                   capture_output=True)
    assert len(_shards(interrupted)) == 10
    assert all(p.stat().st_mtime_ns == stamps[p.name] for p in done)  # finished shards were not recomputed
    subprocess.run([sys.executable, str(SCRIPT), str(clean), "40", "4"], env=_env(), check=True,
                   capture_output=True)
    resumed = T.load(next(interrupted.glob("trajectories/*/runs/*.json"))).with_format("numpy")
    reference = T.load(next(clean.glob("trajectories/*/runs/*.json"))).with_format("numpy")
    assert resumed["text"] == reference["text"]
    for a, b in zip(resumed["trajectory"], reference["trajectory"]):
        assert np.array_equal(a, b)


def test_a_larger_slice_reuses_finished_shards(tmp_path, teacher):
    texts = [f"text number {i} of a corpus" for i in range(12)]
    settings = T.TrajectorySettings(shard_size=4, bf16=False)
    T.generate(texts[:8], teacher, settings, tmp_path, progress=False)
    stamps = {p.name: p.stat().st_mtime_ns for p in _shards(tmp_path)}
    run = T.generate(texts, teacher, settings, tmp_path, progress=False)
    assert len(_shards(tmp_path)) == 3
    assert all(p.stat().st_mtime_ns == stamps[p.name] for p in _shards(tmp_path) if p.name in stamps)
    assert T.load(run)["text"] == texts and T.stats(run)["texts"] == 12


def test_two_accelerate_processes_match_one(tmp_path):
    env = _env()
    two = subprocess.run([*ACCELERATE, "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
                          "--mixed_precision", "no", "--dynamo_backend", "no", str(SCRIPT), str(tmp_path / "two"),
                          "24", "4"], env=env, capture_output=True, text=True, timeout=300)
    assert two.returncode == 0, two.stderr[-3000:]
    assert "WORLD 2" in two.stdout
    one = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "one"), "24", "4"], env=_env(),
                         capture_output=True, text=True, check=True)
    assert "WORLD 1" in one.stdout
    a = T.load(next((tmp_path / "two").glob("trajectories/*/runs/*.json"))).with_format("numpy")
    b = T.load(next((tmp_path / "one").glob("trajectories/*/runs/*.json"))).with_format("numpy")
    assert a["text"] == b["text"] and len(a) == 24
    for x, y in zip(a["trajectory"], b["trajectory"]):
        assert np.abs(x.astype(np.float32) - y.astype(np.float32)).max() < 1e-3


@pytest.mark.parametrize("unit", T.PREFIX_UNITS)
def test_shard_workers_write_the_shards_one_process_writes(tmp_path, teacher, unit):
    texts = RANDOM_TEXTS + [f"sentence {i} of a longer corpus, for several shards" for i in range(9)]
    settings = T.TrajectorySettings(prefix_unit=unit, shard_size=4, bf16=False, stride=2)
    serial = T.generate(texts, teacher, settings, tmp_path / "serial", progress=False)
    pooled = T.generate(texts, teacher, settings, tmp_path / "pooled", progress=False, workers=2)
    a, b = T.load(serial), T.load(pooled)
    assert len(_shards(tmp_path / "pooled")) == 4 and not list((tmp_path / "pooled").glob("trajectories/*/shards/.*"))
    assert a.column_names == b.column_names
    for column in set(a.column_names) - {"trajectory"}:
        assert a[column] == b[column], column
    for x, y in zip(a.with_format("numpy")["trajectory"], b.with_format("numpy")["trajectory"]):
        assert np.array_equal(x, y)
    counts = {k: v for k, v in T.stats(pooled).items() if k != "seconds"}
    assert counts == {k: v for k, v in T.stats(serial).items() if k != "seconds"} and counts["skipped_empty"] == 1


def test_negative_shard_workers_are_refused(tmp_path, teacher):
    with pytest.raises(ValueError, match="workers"):
        T.generate(["a text"], teacher, T.TrajectorySettings(bf16=False), tmp_path, progress=False, workers=-1)


def test_missing_shard_is_reported(tmp_path, teacher):
    run = T.generate(["one text here", "and another"], teacher, T.TrajectorySettings(shard_size=1, bf16=False),
                     tmp_path, progress=False)
    assert T.stats(run)["texts"] == 2
    import shutil

    shutil.rmtree(run.parent.parent / "shards" / json.loads(run.read_text())["shards"][1])
    with pytest.raises(RuntimeError, match=r"missing shards \[1\]"):
        T.load(run)
