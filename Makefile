PY := .venv/bin/python
# Subprocesses (accelerate, the tf2rnn command) come from the project environment too.
export PATH := $(CURDIR)/.venv/bin:$(PATH)

.PHONY: setup test distill bench
setup: .venv/.installed
.venv/.installed: pyproject.toml constraints.txt scripts/setup.sh scripts/fetch_test_data.py
	bash scripts/setup.sh

# The tests (what .ci/run calls): the linter, then the suite.
test: setup
	.venv/bin/ruff check src tests examples benchmarks scripts
	$(PY) -m pytest -q

# The main job: distil the default student from the built-in teacher and text, evaluate, print results.
distill: setup
	$(PY) examples/distill.py --preset quick

bench: setup
	$(PY) benchmarks/run.py
