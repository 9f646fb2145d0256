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
# The data the tests read, fetched here once: the tests themselves never download.
.venv/bin/python scripts/fetch_test_data.py tests/.data
touch .venv/.installed
