#!/usr/bin/env python
"""Per keystroke in the browser: a student's ONNX step graph in onnxruntime-web (examples/browser) against
the teacher re-encoding the prefix in onnxruntime-web, in the same page and the same headless Chromium.

    python benchmarks/browser.py [--model outputs/tf2rnn-quick] [--output benchmarks/results/browser.json]

Types a text of 64 tokens key by key, fp32 graphs then int8 graphs; each key's student update and teacher
forward are timed by the page (performance.now(), wasm, one thread). Needs Debian's chromium,
examples/browser's npm install, and the onnx and demo extras.
"""

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from run import onnx_teacher, text_of_tokens  # noqa: E402

PAGE = Path(__file__).parents[1] / "examples" / "browser"
BUCKETS = {"16": (14, 18), "64": (62, 66)}  # tokens the teacher read ([CLS] and [SEP] included)


def type_text(page, text: str):
    """Type `text` key by key; each key's {ms, teacherMs, tokens} as the page measured it."""
    rows = []
    for n, char in enumerate(text, start=1):
        page.keyboard.type(char)
        page.locator(f'#status[data-keystrokes="{n}"]').wait_for(timeout=60_000)
        rows.append(page.evaluate("({ms: window.tf2rnnLast.ms, teacherMs: window.tf2rnnLast.teacherMs, "
                                  "tokens: window.tf2rnnLast.tokens})"))
    return rows


def summarise(rows):
    """Medians per bucket of prefix length: the student's update, the teacher's forward, their ratio."""
    out = {"keys": len(rows), "student_median_ms_all_keys": statistics.median(r["ms"] for r in rows)}
    for name, (low, high) in BUCKETS.items():
        chosen = [r for r in rows if low <= r["tokens"] <= high]
        if chosen:
            s, t = statistics.median(r["ms"] for r in chosen), statistics.median(r["teacherMs"] for r in chosen)
            out[f"tokens_{name}"] = {"keys": len(chosen), "student_ms": s, "teacher_ms": t, "ratio": t / s}
    return out


def main():
    """Build the page's folder, serve it on loopback, type in Chromium, write the results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="outputs/tf2rnn-quick")
    parser.add_argument("--output", default="benchmarks/results/browser.json")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright
    from transformers import AutoTokenizer

    from tf2rnn_hf import TF2RNNModel
    from tf2rnn_hf.data.teacher import Teacher
    from tf2rnn_hf.demo.browser import launch_chromium, serve_folder
    from tf2rnn_hf.inference.onnx import export_onnx

    model = TF2RNNModel.from_pretrained(args.model).eval()
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    root = Path(tempfile.mkdtemp(prefix="tf2rnn-browser-"))
    for name in ("index.html", "tf2rnn.js"):
        shutil.copy(PAGE / name, root / name)
    (root / "ort").symlink_to((PAGE / "ort").resolve())
    export_onnx(model, tokenizer, root / "model", int8=True, sequence=False)
    onnx_teacher(Teacher("built-in"), root / "teacher")
    text = text_of_tokens(tokenizer, 64)
    server = serve_folder(root)
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    results = {"model": args.model, "text_characters": len(text), "settings": {}}
    with sync_playwright() as p:
        browser = launch_chromium(p)
        results["browser"] = browser.version
        for setting, query in (("fp32", "?teacher=teacher/teacher.onnx"),
                               ("int8", "?int8=1&teacher=teacher/teacher.int8.onnx")):
            page = browser.new_page()
            page.goto(url + query, wait_until="domcontentloaded")
            page.locator("#query:enabled").wait_for(timeout=120_000)
            page.locator("#query").click()
            results["settings"][setting] = summarise(type_text(page, text))
            page.close()
        browser.close()
    server.shutdown()
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(results, indent=1))
    print(json.dumps(results["settings"], indent=1))
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
