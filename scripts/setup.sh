#!/usr/bin/env bash
# Set up a fresh machine: a virtual environment in .venv with the CPU build of torch installed first
# (a bare `torch` requirement resolved first pulls a multi-GB CUDA build), then the package and extras
# at the versions tested together (constraints.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q "torch==2.13.0"
.venv/bin/python -m pip install -q -c constraints.txt -e ".[all]"
# Debian's Chromium for the demo's browser test (Playwright drives it; its own browser download cannot work
# offline). Only where apt runs as root; elsewhere that test skips and says why.
if ! command -v chromium >/dev/null && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
  { DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null; }; } \
    || echo "warning: could not install chromium; the demo's browser test will skip" >&2
fi
# onnxruntime-web for the in-browser page (examples/browser), from the npm registry, where npm exists.
if command -v npm >/dev/null; then
  (cd examples/browser && npm ci --no-audit --no-fund --silent) \
    || echo "warning: npm could not install onnxruntime-web; the in-browser test will skip" >&2
fi
# The data the tests read, fetched here once: the tests themselves never download.
.venv/bin/python scripts/fetch_test_data.py tests/.data
touch .venv/.installed
