"""The benchmark harness runs end to end at a tiny size and reports every workload.

No figure is judged here (speed belongs in ``benchmarks/``); the test only proves the harness
works, so that ``make bench`` does not rot.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RUN = ROOT / "benchmarks" / "run.py"
EXPECTED_ROWS = {
    "add",
    "add_bulk",
    "drain_noop_10",
    "drain_noop_50",
    "drain_sleep_50",
    "fail",
    "fail_dlq",
    "dlq_ratio",
    "replay",
    "purge",
    "memory",
    "latency_p50",
    "latency_p99",
}


@pytest.mark.timeout(60)
def test_benchmark_harness_reports_a_positive_figure_for_every_workload(tmp_path: Path) -> None:
    # Given a tiny run with its own private Redis (block_timeout lowered so that worker
    # shutdowns never wait out an idle block)
    command = [
        sys.executable,
        str(RUN),
        "--n",
        "200",
        "--runs",
        "1",
        "--block-timeout",
        "0.2",
        "--out",
        str(tmp_path),
    ]
    server = os.environ.get("LAZARUS_TEST_REDIS_SERVER")
    if server:
        command += ["--redis-server", server]

    # When the harness runs
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=50)

    # Then it succeeds and writes both result files with every row and a positive figure
    assert done.returncode == 0, done.stderr
    results = json.loads((tmp_path / "results.json").read_text())
    rows = {row["key"]: row for row in results["rows"]}
    assert set(rows) == EXPECTED_ROWS
    for key, row in rows.items():
        assert row["runs"], key
        assert row["median"] > 0, f"{key}: {row}"
    assert {"cpu", "cores", "python", "redis_server", "date"} <= set(results["machine"])
    table = (tmp_path / "results.md").read_text()
    assert all(row["workload"] in table for row in rows.values())
