"""The side-by-side harness runs end to end for lazarus alone, at a tiny size.

Peers need their own virtualenvs (network, minutes), so only lazarus is run here; no figure is
judged, the test only proves that ``benchmarks/peers.py`` and the shared workload code work.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PEERS = ROOT / "benchmarks" / "peers.py"


@pytest.mark.timeout(120)
def test_peers_harness_reports_every_lazarus_row(tmp_path: Path) -> None:
    # Given a tiny lazarus-only run with its own private Redis
    command = [sys.executable, str(PEERS), "--quick", "--n", "100", "--runs", "1",
               "--peers", "lazarus", "--no-chart", "--out", str(tmp_path)]  # fmt: skip

    # When it runs
    done = subprocess.run(command, capture_output=True, text=True, timeout=110, check=False)

    # Then every workload has a positive lazarus figure, and the table was written
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads((tmp_path / "peers.json").read_text())
    for key, row in result["results"].items():
        assert row["lazarus"]["median"] > 0, (key, row)
    assert "| enqueue one by one (jobs/s) |" in (tmp_path / "peers.md").read_text()
