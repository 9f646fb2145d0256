#!/usr/bin/env python
"""A screenshot of `tf2rnn demo` for the README: start the app on a student, type a query key by key in
Debian's headless Chromium (Playwright), and save the page.

    python scripts/demo_screenshot.py outputs/tf2rnn-quick docs/demo.png [--query "river bank"]
"""

import argparse
import socket

from tf2rnn_hf.data.teacher import Teacher, teacher_name_of
from tf2rnn_hf.demo.app import build_app
from tf2rnn_hf.demo.browser import launch_chromium
from tf2rnn_hf.models import TF2RNNModel


def main():
    """Start the app, type the query, save the screenshot."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("output")
    parser.add_argument("--query", default="how do I search a file for a word")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright
    from transformers import AutoTokenizer

    model = TF2RNNModel.from_pretrained(args.model).eval()
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    app = build_app(model, tokenizer, Teacher(teacher_name_of(model.config.teacher_name_or_path)))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True)
    try:
        with sync_playwright() as p:
            browser = launch_chromium(p)
            page = browser.new_page(viewport={"width": 1280, "height": 820})
            page.goto(f"http://127.0.0.1:{port}/", wait_until="domcontentloaded")
            box = page.locator("#query textarea")
            box.wait_for(timeout=60_000)
            box.click()
            for n, key in enumerate(args.query, start=1):
                box.press(key)
                page.locator(f'#status-line[data-keystrokes="{n}"]').wait_for(timeout=60_000)
            page.screenshot(path=args.output, full_page=True)
            browser.close()
    finally:
        app.close()
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
