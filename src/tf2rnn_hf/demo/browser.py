"""Headless Chromium for the demo's pages: Debian's `chromium` (Playwright's own browser download cannot
work offline) with the flags that keep it quiet on a closed network, and a loopback static server that
serves WebAssembly and ES modules with their MIME types. Used by the browser tests, the README screenshot
and `benchmarks/browser.py`."""

import functools
import http.server
import shutil
import threading
from pathlib import Path
from typing import Optional, Union

# Without the background-networking flags Chromium keeps dialling out, and fails, at every start.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


def chromium_path() -> Optional[str]:
    """Debian's chromium on PATH, or None."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


def launch_chromium(playwright):
    """A headless Chromium from a started `sync_playwright()`."""
    return playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS, headless=True)


class _StaticHandler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map, ".wasm": "application/wasm",
                      ".mjs": "text/javascript"}

    def log_message(self, *args):
        pass


def serve_folder(root: Union[str, Path]) -> http.server.ThreadingHTTPServer:
    """Serve `root` on a free loopback port in a daemon thread; `server.server_address[1]` is the port and
    `server.shutdown()` stops it."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                             functools.partial(_StaticHandler, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
