"""The benchmark harness runs end to end at a tiny size and reports every workload.

No figure is judged here (speed belongs in ``benchmarks/``); the test only proves the harness
works, so that ``make bench`` does not rot.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RUN = ROOT / "benchmarks" / "run.py"
EXPECTED_ROWS = {
    "add",
    "add_client_cpu_us",
    "round_trips",
    "round_trip_cpu_us",
    "add_50",
    "add_bulk",
    "drain_noop_10",
    "drain_noop_10_share",
    "drain_noop_50",
    "drain_noop_50_share",
    "drain_noop_200",
    "drain_sleep_50",
    "drain_sleep_200",
    "drain_sleep_200_share",
    "fail",
    "fail_dlq",
    "dlq_ratio",
    "replay",
    "purge",
    "memory",
    "latency_p50",
    "latency_p99",
}


def on_test_server() -> list[str]:
    """The arguments that start a benchmark's private Redis from the suite's redis-server."""
    server = os.environ.get("LAZARUS_TEST_REDIS_SERVER")
    return ["--redis-server", server] if server else []


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
    command += on_test_server()

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


DLQ_SCALE = ROOT / "benchmarks" / "dlq_scale.py"
DLQ_KINDS = ("none", "source_queue", "name", "error_type", "reason", "status", "rare", "time",
             "time_error", "prefix")  # fmt: skip
DLQ_ROWS = {
    "load", "migrate", "mem.legacy", "mem.store", "mem.hash", "mem.index", "mem.ratio",
    *(f"{api}.{kind}" for api in ("find", "search", "count") for kind in DLQ_KINDS),
    "deep.none", "offset.none", "offset.error_type",
    "substring.reason_common", "substring.reason_none", "substring.payload_common",
    "substring.payload_none", "substring.walk", "stats.none", "stats.error_type",
    "http.none", "http.error_type", "http.rare", "http.prefix", "http.page3", "http.substring",
    "replay", "load (again)", "migrate (again)", "purge",
}  # fmt: skip


@pytest.mark.timeout(180)
def test_dlq_scale_measures_every_row_and_phase_at_a_tiny_size(tmp_path: Path) -> None:
    # Given a tiny store (300 dead letters), few queries and a 3-page walk, on the script's
    # own private Redis
    out = tmp_path / "dlq_scale.md"
    command = [sys.executable, str(DLQ_SCALE), "--sizes", "300", "--reps", "3", "--pages", "3",
               "--out", str(out)]  # fmt: skip
    command += on_test_server()

    # When the script runs
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=170)

    # Then it succeeds (it checks the store held 300, then none after replay and purge) and
    # writes every row with a positive figure, and a pause for every phase
    assert done.returncode == 0, done.stderr
    results = json.loads(out.with_suffix(".json").read_text())
    sized = results["sizes"]["300"]
    rows = {row["key"]: row for row in sized["rows"]}
    assert set(rows) >= DLQ_ROWS, DLQ_ROWS - set(rows)
    for key, row in rows.items():
        assert row["value"] > 0, f"{key}: {row}"
    assert rows["mem.index"]["met"] is not None
    phases = {pause["phase"]: pause for pause in sized["pauses"]}
    assert "migrate_dead_letters" in phases
    assert "purge_dead_letters, whole store" in phases
    assert all(pause["pings"] > 0 for pause in phases.values())
    table = out.read_text()
    assert all(row["label"] in table for row in rows.values())


@pytest.mark.timeout(90)
def test_pauses_benchmark_reports_removals_state_reads_and_purge_calls(tmp_path: Path) -> None:
    # Given a tiny run of the benchmark of how long single calls hold Redis
    command = [
        sys.executable, str(ROOT / "benchmarks" / "pauses.py"),
        "--waiting", "3000", "--dead-letters", "2000", "--burst", "500", "--out", str(tmp_path),
    ]  # fmt: skip
    # When it runs
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=80)
    # Then its table has a time for each of the four removals, both state reads, the
    # purge's calls and the five bursts
    assert done.returncode == 0, done.stderr
    table = (tmp_path / "pauses.md").read_text(encoding="utf-8")
    removals = [line for line in table.splitlines() if line.startswith("| the ")]
    assert [line.split("|")[1].strip() for line in removals] == [
        "the newest", "the oldest", "the middle", "the completed",
    ]  # fmt: skip
    assert all(float(line.split("|")[2].split()[0]) > 0 for line in removals)
    states = [line for line in table.splitlines() if line.startswith("| of ")]
    assert [line.split("|")[1].strip() for line in states] == [
        "of the job in the middle", "of an id that is nowhere",
    ]  # fmt: skip
    assert all(float(line.split("|")[2].split()[0]) > 0 for line in states)
    (purge,) = [line for line in table.splitlines() if line.startswith("| `purge_dead_letters`")]
    assert all(float(cell.split()[0]) > 0 for cell in purge.split("|")[2:5])
    burst = table[table.index("Bursts of 500 jobs") :].splitlines()[4:9]
    assert [line.split("|")[1].split()[0] for line in burst] == [
        "`add_bulk()`", "`clean(0,", "500", "20", "`retry_jobs(batch_size=5000)`",
    ]  # fmt: skip
    assert all(float(cell.split()[0]) >= 0 for line in burst for cell in line.split("|")[2:4])


@pytest.mark.timeout(90)
def test_message_forward_benchmark_reports_every_row(tmp_path: Path) -> None:
    # Given a tiny run of the service's throughput benchmark
    command = [
        sys.executable, str(ROOT / "benchmarks" / "message_forward.py"),
        "--n", "100", "--rate", "100", "--seconds", "0.5", "--out", str(tmp_path),
    ]  # fmt: skip
    # When it runs
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=80)
    # Then it writes its table with a positive figure in each of its three rows
    assert done.returncode == 0, done.stderr
    table = (tmp_path / "message_forward.md").read_text(encoding="utf-8")
    rows = [
        line for line in table.splitlines() if line.startswith(("| steady", "| drain", "| http"))
    ]
    assert len(rows) == 3
    for row in rows:
        assert float(row.split("|")[3].replace(",", "")) > 0


@pytest.mark.timeout(180)
def test_cluster_benchmark_reports_every_target_workload_and_process_count(
    tmp_path: Path,
) -> None:
    # Given a tiny run of the cluster benchmark (its own Redis and its own local cluster)
    command = [sys.executable, str(ROOT / "benchmarks" / "cluster.py"), "--n", "30",
               "--queues", "3", "--processes", "1", "--runs", "1",
               "--out", str(tmp_path)]  # fmt: skip

    # When it runs
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=170)

    # Then every target, workload and process count has a positive figure
    assert done.returncode == 0, done.stderr
    rows = json.loads((tmp_path / "cluster.json").read_text())["rows"]
    assert {(r["target"], r["workload"]) for r in rows} == {
        (t, w) for t in ("single Redis", "cluster, 3 masters")
        for w in ("drain", "dead-letter same slot", "dead-letter across slots")
    }  # fmt: skip
    assert all(r["median"] > 0 for r in rows)


REDIS_COST = ROOT / "benchmarks" / "redis_cost.py"
COST_PHASES = {"add", "add_bulk", "complete", "fail", "dead_letter", "replay", "purge"}


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind (.ci/run installs it)")
@pytest.mark.timeout(240)
def test_redis_cost_counts_redis_work_in_every_phase(tmp_path: Path) -> None:
    # Given a tiny run (20 operations a phase) on the script's own redis-server under callgrind
    command = [sys.executable, str(REDIS_COST), "--n", "20", "--out", str(tmp_path)]
    command += on_test_server()

    # When it runs
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=230)

    # Then every phase counted instructions and commands, and the page shows them
    assert done.returncode == 0, done.stderr
    results = json.loads((tmp_path / "redis_cost.json").read_text())
    (side,) = results["sides"].values()
    assert set(side) == COST_PHASES
    for phase, row in side.items():
        assert row["instructions"] > 0 and row["commands"] > 0, f"{phase}: {row}"
    assert "| dead_letter (per job) |" in (tmp_path / "redis_cost.md").read_text()
