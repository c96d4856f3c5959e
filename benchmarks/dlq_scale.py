"""The dead letter store at scale: one dead letter queue holding 10k, 100k and 1M dead letters.

Usage::

    python benchmarks/dlq_scale.py [--sizes 10000,100000,1000000] [--runs N]
                                   [--out benchmarks/results/dlq_scale.md]

For each size, against a private redis-server (``--save ""``, no AOF, no maxmemory): writes
the dead letters in lazarus 0.1's layout and migrates them (``dlq_data``, ``dlq_store``);
measures memory per dead letter; first pages, counts, deep pages, substring searches and
statistics through the library (``dlq_queries``) and the list route through HTTP
(``dlq_http``); then replays the whole store, fills it again and purges it. A separate process
records Redis's worst pause during each phase (``dlq_probe``). See ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import random
import shlex
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import dlq_http
import dlq_queries
import dlq_report
import dlq_store
from dlq_data import DLQ, PREFIX
from dlq_probe import PROBE_NICE, Pause, PauseProbe
from dlq_report import Row
from redis.asyncio import Redis
from report import git_state, machine_facts

from lazarus import Queue
from lazarus.cli._startup import freeze_start_up
from lazarus.embedded import EmbeddedRedis

ROOT = Path(__file__).resolve().parent.parent


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes",
        default="10000,100000,1000000",
        help="store sizes, comma-separated (default 10000,100000,1000000)",
    )
    parser.add_argument(
        "--runs",
        type=int,
        default=1,
        help="repetitions per size; figures are medians, pauses the worst",
    )
    parser.add_argument(
        "--reps", type=int, default=200, help="queries per filter kind (default 200)"
    )
    parser.add_argument("--pages", type=int, default=200, help="cursor pages walked deep")
    parser.add_argument(
        "--out",
        type=Path,
        default=ROOT / "benchmarks/results/dlq_scale.md",
        help="the markdown file; the JSON goes beside it",
    )
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="drop the sizes an earlier results file holds (default: keep them)",
    )
    parser.add_argument("--redis-server", default=None, help="redis-server executable")
    args = parser.parse_args(argv)
    try:
        args.sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s]
    except ValueError:
        parser.error("--sizes must be integers separated by commas")
    if not args.sizes or min(args.sizes) < 100 or min(args.runs, args.reps, args.pages) < 1:
        parser.error("sizes must be at least 100; --runs, --reps and --pages at least 1")
    return args


async def one_run(server: EmbeddedRedis, n: int, args: argparse.Namespace,
                  seed: int) -> tuple[list[Row], list[Pause], list[str]]:  # fmt: skip
    """Every measurement of one run at size ``n``, on an empty server."""
    # FLUSHALL of a million replayed jobs takes longer than redis-py's default 5 s timeout.
    client = Redis.from_url(server.url, socket_timeout=600)
    probe = PauseProbe(server.url, client, label=f"N={n:,}")
    queue = Queue(DLQ, connection=server.url, prefix=PREFIX)
    rng = random.Random(seed)
    await probe.start()
    try:
        rows, memory = await dlq_store.fill(server.url, client, queue, probe, n)
        mem_rows, notes = await dlq_store.memory_rows(client, queue, probe, n, memory)
        rows += mem_rows
        freeze_start_up()  # as `lazarus worker` and `lazarus serve` do: set-up outlives no phase
        now = int(time.time() * 1000)
        rows += await dlq_queries.first_pages(queue, probe, rng, now, args.reps)
        rows += await dlq_queries.deep_pages(queue, probe, args.pages)
        rows += await dlq_queries.substring(queue, probe, max(3, args.reps // 10))
        rows += await dlq_queries.stats(queue, probe, rng, max(3, args.reps // 4))
        http_rows, http_notes = await dlq_http.list_route(
            server.url, PREFIX, probe, rng, args.reps, args.pages
        )
        rows += http_rows
        notes += http_notes
        notes.append(
            f"the PING prober ran at niceness {probe.niceness}"
            f"{'' if probe.niceness == PROBE_NICE else ' (raising it was refused)'}"
        )
        rows.append(await dlq_store.replay_all(client, queue, probe, n))
        await dlq_store.flush(client, probe)
        refill, _ = await dlq_store.fill(server.url, client, queue, probe, n, " (again)")
        rows += refill
        rows.append(await dlq_store.purge_all(client, queue, probe, n))
        await dlq_store.flush(client, probe)
    finally:
        probe.stop()
        await queue.close()
        await client.aclose()
    return rows, probe.pauses, notes


def combine(runs: list[list[Row]]) -> list[dict[str, Any]]:
    """One row per key: the median value (and p50) over the runs, with each run's value, and
    the mean cost."""
    out = []
    for row in runs[0]:
        same = [r for rows in runs for r in rows if r.key == row.key]
        values = [r.value for r in same]
        p50s = [r.p50 for r in same if r.p50 is not None]
        costs = [r.cost for r in same if r.cost]
        cost = None
        if costs:
            cost = {**costs[0], **{k: statistics.mean(c[k] for c in costs)
                                   for k in ("wall", "cpu", "redis")}}  # fmt: skip
        merged = dataclasses.replace(
            row, value=statistics.median(values), p50=statistics.median(p50s) if p50s else None,
            cost=cost,
        )  # fmt: skip
        out.append({**merged.to_json(), "runs": values})
    return out


def worst(runs: list[list[Pause]]) -> list[dict[str, Any]]:
    """One pause per phase: the worst over the runs."""
    out: dict[str, Pause] = {}
    for pauses in runs:
        for pause in pauses:
            kept = out.get(pause.phase)
            if kept is None or pause.ping_ms > kept.ping_ms:
                out[pause.phase] = pause
    return [p.to_json() for p in out.values()]


def load_average() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


async def measure_size(n: int, args: argparse.Namespace, commit: str) -> dict[str, Any]:
    started, before = time.perf_counter(), load_average()
    all_rows, all_pauses, notes = [], [], []
    for run in range(args.runs):
        async with EmbeddedRedis(executable=args.redis_server) as server:
            rows, pauses, run_notes = await one_run(server, n, args, seed=run)
        all_rows.append(rows)
        all_pauses.append(pauses)
        notes += [note for note in run_notes if note not in notes]
    return {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": commit,
        "runs": args.runs, "reps": args.reps, "elapsed_s": time.perf_counter() - started,
        "load_before": before, "load_after": load_average(),
        "rows": combine(all_rows), "pauses": worst(all_pauses), "notes": notes,
    }  # fmt: skip


async def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    commit = git_state(ROOT)
    version = EmbeddedRedis(executable=args.redis_server)
    result: dict[str, Any] = {
        "command": shlex.join(["python", "benchmarks/dlq_scale.py", *(argv or sys.argv[1:])]),
        "machine": machine_facts(
            f"{'.'.join(map(str, version.version))} ({version.executable})", commit
        ),
        "sizes": {},
    }
    for n in args.sizes:
        result["sizes"][str(n)] = await measure_size(n, args, commit)
    written = dlq_report.write(args.out, result, keep_earlier=not args.fresh)
    print(dlq_report.markdown(written))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
