"""The search-as-you-type demo: its session follows the text box with the streaming encoder (deletes are
pops), and in a real browser (Debian's Chromium driven by Playwright) the shown top-10 after every key,
a backspace included, is the model's own top-10 for that prefix."""

import socket
from pathlib import Path

import pytest
import torch
from conftest import needs_chromium

from tf2rnn_hf.distill import build_student
from tf2rnn_hf.inference.streaming import StreamingEncoder

gr = pytest.importorskip("gradio", reason="the demo extra is not installed")
from tf2rnn_hf.demo.app import build_app, model_key  # noqa: E402
from tf2rnn_hf.demo.browser import launch_chromium  # noqa: E402
from tf2rnn_hf.demo.search import SearchSession, build_indexes, demo_texts  # noqa: E402

FIXTURES = Path(__file__).parent.parent / "fixtures"


@pytest.fixture(scope="module")
def demo(teacher, tmp_path_factory):
    torch.manual_seed(0)
    model, tokenizer = build_student(teacher, hidden_size=64, token_init="input_embeddings")
    index = tmp_path_factory.mktemp("index") / "docs.txt"
    index.write_text((FIXTURES / "train.txt").read_text() + (FIXTURES / "heldout.txt").read_text())
    cache = tmp_path_factory.mktemp("cache")
    texts = demo_texts(path=index)
    student_index, teacher_index = build_indexes(model, tokenizer, teacher, texts, model_key(model), cache)
    return model.eval(), tokenizer, index, cache, texts, student_index, teacher_index


def test_session_turns_each_change_into_keystrokes_and_ranks_both_sides(demo, teacher):
    model, tokenizer, _, _, texts, student_index, teacher_index = demo
    session = SearchSession(model, tokenizer, teacher, student_index, teacher_index)
    for text in ["s", "se", "sea", "sea ", "sea s", "sea", "se", "seas", "season of rain"]:
        results = session.update(text)
        fresh = StreamingEncoder(model, tokenizer)  # typed from scratch: a pop restores exactly that state
        for char in text:
            fresh.type(char)
        assert results.text == session.stream.text == text
        assert results.student == student_index.search(fresh.embedding)
        with torch.inference_mode():
            assert results.teacher == teacher_index.search(teacher.encode([text])[0])
        assert len(results.student) == 10 and 0 <= results.overlap <= 10
    assert session.keystrokes == 1 + 1 + 1 + 1 + 1 + 2 + 1 + 2 + 10  # a change of n characters is n keys
    assert len(texts) == 128


def test_indexes_are_built_once_and_cached(demo, teacher, monkeypatch):
    model, tokenizer, _, cache, texts, student_index, _ = demo
    monkeypatch.setattr("tf2rnn_hf.demo.search.encode_texts", lambda *a, **k: pytest.fail("re-encoded the index"))
    again, _ = build_indexes(model, tokenizer, teacher, texts, model_key(model), cache)
    assert (again.vectors == student_index.vectors).all()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@needs_chromium
def test_browser_shows_the_models_own_top10_after_every_key(demo, teacher, tmp_path):
    playwright = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    model, tokenizer, index, cache, texts, student_index, _ = demo
    app = build_app(model, tokenizer, teacher, index=index, cache_dir=cache)
    port = _free_port()
    app.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, share=False)
    keys = list("river baxy") + ["Backspace", "Backspace"] + list("nk flows")
    try:
        with playwright.sync_playwright() as p:
            browser = launch_chromium(p)
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(f"http://127.0.0.1:{port}/", wait_until="domcontentloaded")
            box = page.locator("#query textarea")
            box.wait_for(timeout=60_000)  # the app's scripts have rendered it (web fonts cannot load here)
            box.click()
            own = StreamingEncoder(model, tokenizer)
            for n, key in enumerate(keys, start=1):
                box.press(key)
                own.delete(1) if key == "Backspace" else own.type(key)
                status = page.locator(f'#status-line[data-keystrokes="{n}"]')
                status.wait_for(timeout=30_000)  # the page has shown the update for this key
                assert status.get_attribute("data-prefix") == own.text
                shown = [int(i) for i in page.locator("#student-results li").evaluate_all(
                    "items => items.map(li => li.dataset.id)")]
                assert shown == student_index.search(own.embedding), (n, own.text)
            assert own.text == "river bank flows"
            page.screenshot(path=str(tmp_path / "demo.png"), full_page=True)
            browser.close()
    finally:
        app.close()
    assert (tmp_path / "demo.png").stat().st_size > 10_000
