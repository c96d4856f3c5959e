"""The demos run end to end as real subprocesses: ``make demo`` (the message-forward
service) and ``make demo-payments`` (examples/demo.py), each accounting for every job."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "examples" / "demo.py"


def row(output: str, label: str) -> int:
    """The number in the summary table's row ``label``."""
    match = re.search(rf"^\W*{re.escape(label)}\W+(\d+)\W*$", output, re.MULTILINE)
    assert match, f"no {label!r} row in the demo's output:\n{output}"
    return int(match.group(1))


@pytest.mark.timeout(120)
def test_demo_processes_every_job_and_empties_the_dead_letter_queue() -> None:
    # Given 200 payments, of which 2 + 2 + 1 are designed to fail for good
    env = {**os.environ, "COLUMNS": "100", "NO_COLOR": "1"}
    # When the demo runs as the user runs it
    result = subprocess.run(
        [sys.executable, str(DEMO), "--jobs", "200"],
        capture_output=True,
        text=True,
        timeout=110,
        env=env,
        check=False,
    )
    # Then it succeeds and its summary names what happened
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert row(out, "Completed") == 195
    assert row(out, "Dead-lettered") == 5
    assert row(out, "Retried attempts") == 10 + 2 * 2
    assert "Replayed 2 dead letters; 2 completed." in out
    assert "Dead letters left: 0." in out
    assert "All 200 payments accounted for" in out


@pytest.mark.timeout(120)
def test_make_demo_runs_the_message_forward_service_and_stops_cleanly() -> None:
    # Given the command `make demo` runs
    env = {**os.environ, "COLUMNS": "100", "NO_COLOR": "1"}
    # When it runs as the user runs it
    result = subprocess.run(
        [sys.executable, "-m", "examples.message_forward.demo"],
        capture_output=True, text=True, timeout=110, env=env, cwd=ROOT, check=False,
    )  # fmt: skip
    # Then it printed the health report, the two dead letters and the dashboard, and stopped
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    health = json.loads(out[out.index("GET /health") + len("GET /health") : out.index("Job ")])
    assert health["queue"]["completed"] == 18
    assert health["deadLetterQueue"] == {"name": "message-forward-dlq", "depth": 2}
    assert out.count("unrecoverable  channel -1002 was deleted") == 2
    assert "completed on attempt 2 after the 5 s backoff" in out
    assert "A malformed message is refused: 422 messageId: Field required" in out
    assert re.search(r"Dashboard: http://127\.0\.0\.1:\d+/dashboard$", out, re.MULTILINE)
    assert out.rstrip().endswith("Stopped cleanly.")
