"""Push and pull through the real, unpatched huggingface_hub client against tests/hub_server.py on
127.0.0.1. Each client runs in a fresh process with a fresh cache and the Hub environment set before
huggingface_hub is imported."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hub_server import serve

CLIENT = Path(__file__).parents[1] / "scripts" / "hub_client.py"
REPO = "org/tf2rnn-minilm"


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    root = tmp_path_factory.mktemp("hub")
    server, store, thread = serve(root / "server")
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    yield endpoint, store, root
    server.shutdown()


def max_diff(a, b) -> float:
    return max(abs(x - y) for ra, rb in zip(a, b) for x, y in zip(ra, rb))


def client(hub, *args, block_package=False, check=True):
    endpoint, _, root = hub
    home = Path(os.environ.get("PYTEST_HUB_HOME", root)) / f"home-{len(list(root.glob('home-*')))}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update(HF_ENDPOINT=endpoint, HF_HUB_DISABLE_XET="1", HF_TOKEN="hf_dummy_test_token", HF_HOME=str(home),
               HF_HUB_DISABLE_TELEMETRY="1", OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    cmd = [sys.executable, str(CLIENT), *args] + (["--block-package"] if block_package else [])
    run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    if not check:
        return run
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(re.search(r"^RESULT (.*)$", run.stdout, re.M).group(1))


@pytest.fixture(scope="module")
def pushed(hub, tmp_path_factory):
    folder = tmp_path_factory.mktemp("push")
    first = client(hub, "push", REPO, str(folder / "v1"), "1")
    return first, folder


def test_push_then_load_in_fresh_processes(hub, pushed):
    first, _ = pushed
    _, store, _ = hub
    files = set(store.history("model", REPO)[-1]["files"])
    assert {"model.safetensors", "config.json", "modeling_tf2rnn.py", "configuration_tf2rnn.py", "cells_tf2rnn.py",
            "tokenizer.json", "modules.json", "1_Pooling/config.json", "README.md"} <= files
    assert store.history("model", REPO)[-1]["files"]["model.safetensors"]["lfs"]
    with_package = client(hub, "load", REPO)
    assert with_package["cls"] == "tf2rnn_hf.models.tf2rnn.modeling_tf2rnn", with_package["cls"]
    assert max_diff(with_package["out"], first["out"]) <= 1e-6  # the pushed model, to float rounding
    remote = client(hub, "load", REPO, "remote", block_package=True)
    assert remote["cls"].startswith("transformers_modules.")
    assert remote["out"] == with_package["out"]  # the two ways of loading agree exactly
    st = client(hub, "st", REPO)
    assert max_diff(st["out"], first["out"]) <= 1e-5


def test_card_validates_on_the_hub(hub, pushed):
    result = client(hub, "validate", REPO)
    assert result == {"valid": True, "base_model": "sentence-transformers/all-MiniLM-L6-v2"}


def test_unchanged_repush_makes_no_commit_and_old_revision_pulls_old_weights(hub, pushed):
    first, folder = pushed
    _, store, _ = hub
    n = len(store.history("model", REPO))
    again = client(hub, "push", REPO, str(folder / "v1-again"), "1")  # same seed: identical files
    assert again["commit"] == first["commit"] and len(store.history("model", REPO)) == n
    second = client(hub, "push", REPO, str(folder / "v2"), "2")
    assert second["commit"] != first["commit"] and second["out"] != first["out"]
    assert max_diff(client(hub, "load", REPO)["out"], second["out"]) <= 1e-6
    assert max_diff(client(hub, "load", REPO, first["commit"])["out"], first["out"]) <= 1e-6


def test_failed_push_leaves_the_repo_at_its_previous_commit(hub, pushed):
    _, folder = pushed
    _, store, _ = hub
    head = store.history("model", REPO)[-1]["oid"]
    store.refuse_commits = True
    try:
        run = client(hub, "push", REPO, str(folder / "v3"), "3", check=False)
    finally:
        store.refuse_commits = False
    assert run.returncode != 0 and "500" in run.stderr
    assert store.history("model", REPO)[-1]["oid"] == head


def test_corrupted_blob_is_detected_on_download(hub, tmp_path_factory):
    folder = tmp_path_factory.mktemp("corrupt")
    client(hub, "push", "org/corrupt-me", str(folder / "m"), "5")
    hub[1].corrupt("org/corrupt-me", "model.safetensors")
    run = client(hub, "pull", "org/corrupt-me", check=False)
    assert run.returncode != 0
    assert "model.safetensors at main is corrupted" in run.stderr and "Nothing was loaded" in run.stderr


def test_missing_repo_gives_a_clear_error(hub):
    endpoint, _, root = hub
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update(HF_ENDPOINT=endpoint, HF_HUB_DISABLE_XET="1", HF_TOKEN="hf_dummy", HF_HOME=str(root / "home-missing"))
    run = subprocess.run([sys.executable, "-m", "tf2rnn_hf.cli", "pull", "org/does-not-exist"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    assert run.stderr.startswith("error: ") and "org/does-not-exist" in run.stderr and "Traceback" not in run.stderr


def test_trainer_push_to_hub(hub, tmp_path):
    endpoint, store, root = hub
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update(HF_ENDPOINT=endpoint, HF_HUB_DISABLE_XET="1", HF_TOKEN="hf_dummy", HF_HOME=str(root / "home-trainer"),
               OMP_NUM_THREADS="1")
    data = Path(__file__).parents[1] / "fixtures"
    run = subprocess.run([sys.executable, "-m", "tf2rnn_hf.cli", "distill", "--preset", "tiny", "--max_steps", "2",
                          "--corpus", str(data / "train.txt"), "--eval_corpus", str(data / "heldout.txt"),
                          "--output_dir", str(tmp_path / "out"), "--cache_dir", str(tmp_path / "cache"),
                          "--report_to", "none", "--push_to_hub", "true", "--hub_model_id", "org/trained",
                          "--save_strategy", "no", "--disable_tqdm", "true"], env=env, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    files = store.history("model", "org/trained")[-1]["files"]
    assert {"model.safetensors", "modules.json", "modeling_tf2rnn.py", "tokenizer.json", "README.md"} <= set(files)
    card = store.blob_path(files["README.md"]["sha256"]).read_text()
    assert "base_model: sentence-transformers/all-MiniLM-L6-v2" in card and "## Limitations" in card
