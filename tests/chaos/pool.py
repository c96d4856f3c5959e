"""Worker processes for a scenario: started through the fork server in ``worker.py``, signalled
by pid, and their run logs read back."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

WORKER_SCRIPT = Path(__file__).with_name("worker.py")


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not: the fork server reaps its children)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


class WorkerPool:
    """Worker processes of one queue; ``spawn`` starts one with the pool's configuration."""

    def __init__(self, log_dir: Path, **config: Any) -> None:
        self.log_dir = log_dir
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.config = {"log_dir": str(log_dir), **config}
        self.live: list[int] = []
        self.killed = 0
        self._err = (log_dir / "fork-server.err").open("ab")
        self._server = subprocess.Popen(
            [sys.executable, str(WORKER_SCRIPT), "serve"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err, text=True,
        )  # fmt: skip

    def spawn(self, **overrides: Any) -> int:
        """Start a worker process; returns its pid."""
        assert self._server.stdin is not None and self._server.stdout is not None
        self._server.stdin.write(json.dumps({**self.config, **overrides}) + "\n")
        self._server.stdin.flush()
        answer = self._server.stdout.readline()
        if not answer:
            raise RuntimeError(f"the fork server died: see {self.log_dir}/fork-server.err")
        pid = int(answer)
        self.live.append(pid)
        return pid

    def signal(self, pid: int, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)

    def kill(self, pid: int) -> None:
        """SIGKILL one worker."""
        self.signal(pid, signal.SIGKILL)
        self.live.remove(pid)
        self.killed += 1

    def reap(self) -> int:
        """Forget the workers that exited by themselves (``burst``, ``max_jobs``); how many."""
        gone = [pid for pid in self.live if not alive(pid)]
        for pid in gone:
            self.live.remove(pid)
        return len(gone)

    def stop(self, grace: float = 10.0) -> int:
        """SIGTERM every worker, SIGKILL those still running after ``grace`` seconds; returns
        how many had to be killed. Then the fork server goes."""
        for pid in self.live:
            self.signal(pid, signal.SIGCONT)  # a stopped process acts on SIGTERM only then
            self.signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while any(alive(p) for p in self.live) and time.monotonic() < deadline:
            time.sleep(0.05)  # polling other processes' exit: there is nothing to await
        stubborn = [p for p in self.live if alive(p)]
        for pid in stubborn:
            self.signal(pid, signal.SIGKILL)
        self.live = []
        if self._server.poll() is None:
            assert self._server.stdin is not None
            self._server.stdin.close()
            try:
                self._server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._server.kill()
                self._server.wait()
        self._err.close()
        return len(stubborn)

    def runs(self) -> RunLog:
        return RunLog.read(self.log_dir)


@dataclasses.dataclass
class RunLog:
    """What the worker processes wrote: every execution, and the outcomes they recorded."""

    runs: dict[str, list[tuple[int, int, float]]]  # job id -> (pid, attempt, start time)
    events: dict[str, Counter[str]]  # job id -> {"C": n, "D": n, ...}
    errors: Counter[str]  # error type -> count, from "E" lines
    deaths: list[str]  # "X" lines: workers whose run() raised
    # "L" lines: (pid, job id) of a run whose lease lapsed
    lost: set[tuple[int, str]] = dataclasses.field(default_factory=set)

    @classmethod
    def read(cls, log_dir: Path) -> RunLog:
        runs: dict[str, list[tuple[int, int, float]]] = defaultdict(list)
        events: dict[str, Counter[str]] = defaultdict(Counter)
        errors: Counter[str] = Counter()
        deaths: list[str] = []
        lost: set[tuple[int, str]] = set()
        for path in sorted(log_dir.glob("runs-*.log")):
            pid = int(path.stem.split("-")[1])
            for line in path.read_text().splitlines():
                kind, _, rest = line.partition(" ")
                fields = rest.split()
                if kind == "R" and len(fields) == 3:
                    runs[fields[0]].append((pid, int(fields[1]), float(fields[2])))
                elif kind == "E":
                    errors[rest] += 1
                elif kind == "X":
                    deaths.append(f"{pid}: {rest}")
                elif fields:
                    events[fields[0]][kind] += 1
                    if kind == "L":
                        lost.add((pid, fields[0]))
        return cls(dict(runs), dict(events), errors, deaths, lost)

    def count(self, job_id: str) -> int:
        return len(self.runs.get(job_id, ()))
