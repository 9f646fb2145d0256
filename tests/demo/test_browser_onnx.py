"""In the browser itself: examples/browser runs the exported step graph in onnxruntime-web with its own
WordPiece and streaming encoder, in Debian's headless Chromium; after every key of a typed text, a
backspace included, its embedding is within 1e-4 of the Python stream's. For a GRU student and for the fast
tier's shape (one inherited `tova_attention` layer), whose four slots the typed text overflows into evictions."""

import shutil
from pathlib import Path

import pytest
import torch
from conftest import lively_gru_student, needs_chromium

from tf2rnn_hf.distill import build_student
from tf2rnn_hf.inference.streaming import StreamingEncoder

pytest.importorskip("onnxruntime", reason="the onnx extra is not installed")
from tf2rnn_hf.demo.browser import launch_chromium, serve_folder  # noqa: E402
from tf2rnn_hf.inference.onnx import export_onnx  # noqa: E402

PAGE = Path(__file__).parent.parent.parent / "examples" / "browser"
pytestmark = [
    needs_chromium,
    pytest.mark.skipif(not (PAGE / "ort" / "ort.min.js").is_file(),
                       reason="onnxruntime-web is not installed (scripts/setup.sh runs npm install in "
                              "examples/browser where npm exists)"),
]


@pytest.fixture(scope="module", params=["gru", "tova_attention"])
def site(request, teacher, tmp_path_factory):
    if request.param == "gru":
        model, tokenizer = lively_gru_student(teacher)
    else:
        model, tokenizer = build_student(teacher, cell_type="tova_attention", num_hidden_layers=1, num_slots=4,
                                         pooling_position_exponent=1.0)
    root = tmp_path_factory.mktemp("site")
    for name in ("index.html", "tf2rnn.js"):
        shutil.copy(PAGE / name, root / name)
    (root / "ort").symlink_to((PAGE / "ort").resolve())
    export_onnx(model, tokenizer, root / "model", int8=True, sequence=False)
    server = serve_folder(root)
    yield model.eval(), tokenizer, f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


KEYS = list("Naïve café-goers typo") + ["Backspace"] * 4 + list("types, twice!")


@pytest.mark.parametrize("int8", [False, True])
def test_page_embeddings_follow_the_python_stream_key_by_key(site, int8):
    playwright = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    model, tokenizer, url = site
    own = StreamingEncoder(model, tokenizer)
    with playwright.sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_page()
        errors = []
        page.on("pageerror", lambda err: errors.append(str(err)))
        page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
        page.goto(url + ("?int8=1" if int8 else ""), wait_until="domcontentloaded")
        box = page.locator("#query:enabled")
        try:
            box.wait_for(timeout=60_000)  # the model has loaded
        except playwright.Error as err:
            raise AssertionError(f"the page did not load the model: {errors}") from err
        times = []
        for n, key in enumerate(KEYS, start=1):
            page.keyboard.press(key) if key == "Backspace" else page.keyboard.type(key)  # "ï" is no key name
            own.delete(1) if key == "Backspace" else own.type(key)
            page.locator(f'#status[data-keystrokes="{n}"]').wait_for(timeout=30_000)
            last = page.evaluate("window.tf2rnnLast")
            assert last["text"] == own.text
            shown = torch.tensor(last["embedding"])
            if int8:  # onnxruntime's int8 against fp32 PyTorch: close, not equal
                assert torch.dot(shown, own.embedding) >= 0.99, own.text
            else:
                assert (shown - own.embedding).abs().max() <= 1e-4, own.text
            times.append(last["ms"])
        assert own.text == "Naïve café-goers types, twice!" and not errors
        assert "ms" in page.locator("#status").inner_text()
        browser.close()
