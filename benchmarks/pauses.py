"""How long single lazarus calls hold a shared Redis on large data, read from its SLOWLOG.

A script holds Redis for as long as it runs: every other client waits. lazarus bounds each
call's work whatever the data's size, and this measures it where the data is largest:

- ``remove()`` of one waiting job in a queue of ``--waiting`` jobs: the newest, the oldest and
  the one in the middle; and of a completed job of that queue;
- ``get_job_state()`` in that queue, of the job in the middle and of an id that is nowhere;
- the script calls of a bulk purge filtered by error type (about 10 % of ``--dead-letters``
  dead letters), against each call's budget (``dead_letter.bulk.ACT_BUDGET_US``): the
  median, the 99th percentile and the longest of the calls over 0.2 ms;
- the 99th percentile and the longest call while lazarus works through ``--burst`` jobs at
  once: ``add_bulk()`` of them; ``clean()`` of that many waiting jobs in one call of the
  library; as many delayed jobs falling due together, drained by a worker; retention of the
  newest 10 meeting as many completed jobs; and ``retry_jobs(batch_size=5000)`` of as many
  failed jobs.

Writes ``results/pauses.md`` (or ``--out``)::

    .venv/bin/python benchmarks/pauses.py
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
from pathlib import Path
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import ResponseError

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import dlq_data  # noqa: E402
import report  # noqa: E402

from lazarus import DeadLetterFilter, Job, Queue, Worker, _scripts  # noqa: E402
from lazarus.dead_letter.bulk import ACT_BUDGET_US  # noqa: E402
from lazarus.embedded import EmbeddedRedis  # noqa: E402

FILL_CHUNK = 5_000
PURGE_LOGGED_US = 200  # SLOWLOG keeps the calls over this (the commands inside scripts are less)


async def _logged_us(client: Redis, script: str | None = None) -> list[int]:
    """The logged commands' durations (µs), sorted, and the log emptied: only the calls of
    ``script``, if named. The benchmark's own ``SLOWLOG RESET`` (freeing a long log takes a
    while) does not count."""
    entries = await client.slowlog_get(100_000)
    await client.slowlog_reset()
    if script is not None:
        named = _scripts.load(script)
        marks = (named.sha.encode(), named.function.encode())  # EVALSHA or FCALL
        return sorted(e["duration"] for e in entries if any(m in e["command"][:80] for m in marks))
    ours = (b"SLOWLOG", "SLOWLOG")
    return sorted(e["duration"] for e in entries if e["command"].split()[0] not in ours)


async def _longest_us(client: Redis) -> int:
    """The longest logged command's duration (µs), and the log emptied."""
    return max(await _logged_us(client), default=0)


async def _spread_ms(client: Redis) -> tuple[float, float]:
    """The 99th percentile and the longest of the logged commands (ms), and the log emptied."""
    logged = await _logged_us(client) or [0]
    return logged[len(logged) * 99 // 100] / 1000, logged[-1] / 1000


async def _fill(queue: Queue, n: int, **options: Any) -> list[str]:
    ids = []
    for start in range(0, n, FILL_CHUNK):
        count = min(FILL_CHUNK, n - start)
        specs = [{"name": "n", "data": {"i": start + i}, **options} for i in range(count)]
        ids += [job.id for job in await queue.add_bulk(specs)]
    return ids


async def _drain(url: str, name: str, n: int, *, fail: bool = False) -> None:
    """Run ``n`` jobs of queue ``name`` with a worker (concurrency 50) that does nothing, or
    with ``fail`` raises (the jobs, of one attempt, fail for good)."""
    done, count = asyncio.Event(), 0

    def counted(*_: Any) -> None:
        nonlocal count
        count += 1
        if count >= n:
            done.set()

    async def run(job: Job) -> None:
        if fail:
            raise RuntimeError("fails as told")

    worker = Worker(name, run, connection=url, concurrency=50)
    worker.on("failed" if fail else "completed", counted)
    try:
        await asyncio.wait_for(done.wait(), timeout=max(60.0, n / 500))
    finally:
        await worker.close()


async def bursts(url: str, n: int) -> dict[str, tuple[float, float]]:
    """The 99th percentile and the longest of the calls over 0.2 ms (ms) while lazarus works
    through ``n`` jobs at once."""
    client = Redis.from_url(url)
    queue = Queue("bursts", connection=client)
    await client.config_set("slowlog-log-slower-than", PURGE_LOGGED_US)
    await client.config_set("slowlog-max-len", 100_000)
    longest: dict[str, tuple[float, float]] = {}
    await client.slowlog_reset()
    started = time.perf_counter()
    await _fill(queue, n)
    rate = n / (time.perf_counter() - started)
    longest[
        f"`add_bulk()` of {n:,} jobs, {FILL_CHUNK:,} a call ({rate:,.0f}/s)"
    ] = await _spread_ms(client)
    started = time.perf_counter()
    if len(await queue.clean(0, limit=n, state="waiting")) != n:
        raise RuntimeError("the clean did not remove every waiting job")
    rate = n / (time.perf_counter() - started)
    longest[f"`clean(0, limit={n:,})` of {n:,} waiting jobs ({rate:,.0f}/s)"] = await _spread_ms(
        client
    )
    await _fill(queue, n, delay=1)  # all due by the time the worker starts
    await client.slowlog_reset()
    await _drain(url, queue.name, n)
    longest[f"{n:,} delayed jobs due at once, drained by a worker"] = await _spread_ms(client)
    await _fill(queue, 20, remove_on_complete=10)
    await client.slowlog_reset()
    await _drain(url, queue.name, 20)
    if await queue.get_completed_count() >= n + 20:
        raise RuntimeError("retention removed no completed job")
    longest[f"20 jobs keeping the newest 10 complete after {n:,}"] = await _spread_ms(client)
    await queue.obliterate()
    await _fill(queue, n)
    await _drain(url, queue.name, n, fail=True)
    await client.slowlog_reset()
    if await queue.retry_jobs(batch_size=5000) != n:
        raise RuntimeError("the retry did not retry every failed job")
    longest[f"`retry_jobs(batch_size=5000)` of {n:,} failed jobs"] = await _spread_ms(client)
    await queue.obliterate()
    await queue.close()
    await client.aclose()
    return longest


async def removals(url: str, waiting: int) -> tuple[dict[str, float], dict[str, float]]:
    """ms of Redis for ``remove()`` of the newest, the oldest and the middle waiting job and of a
    completed one, and
    for ``get_job_state()`` of the middle one and of an id that is nowhere (the longest
    command: a script or, in a pipeline, one command)."""
    client = Redis.from_url(url)
    queue = Queue("pauses", connection=client)
    picks: dict[str, str] = {"completed": (await queue.add("n", None)).id}
    await _drain(url, queue.name, 1)
    middle = waiting // 2
    for start in range(0, waiting, FILL_CHUNK):
        count = min(FILL_CHUNK, waiting - start)
        jobs = await queue.add_bulk([{"name": "n", "data": {"i": start + i}} for i in range(count)])
        if start == 0:
            picks["oldest"] = jobs[0].id
        if start <= middle < start + count:
            picks["middle"] = jobs[middle - start].id
        picks["newest"] = jobs[-1].id
    for name in ("remove_job", "job_state"):  # loaded first: a first call's load is no pause
        await client.script_load(_scripts.load(name).source)
        with contextlib.suppress(ResponseError):  # Redis 6.2: no functions
            await client.function_load(_scripts.load(name).library, replace=True)
    await client.config_set("slowlog-log-slower-than", 0)
    await client.config_set("slowlog-max-len", 1000)
    await client.slowlog_reset()
    states = {}
    for which, job_id in (
        ("of the job in the middle", picks["middle"]),
        ("of an id that is nowhere", "x"),
    ):
        await queue.get_job_state(job_id)
        states[which] = await _longest_us(client) / 1000
    held = {}
    for which in ("newest", "oldest", "middle", "completed"):
        await queue.remove(picks[which])
        held[which] = await _longest_us(client) / 1000  # a script call, or a read of the list
    if (await queue.get_job_counts())["waiting"] != waiting - 3:
        raise RuntimeError("the removals did not remove three waiting jobs")
    await queue.close()
    await client.aclose()
    return held, states


async def purge_calls(url: str, dead_letters: int) -> dict[str, float]:
    """The purge's rate and its calls' ms: median, p99 and longest."""
    dlq_data.write_legacy(url, dead_letters)
    client = Redis.from_url(url)
    dlq = Queue(dlq_data.DLQ, connection=client, prefix=dlq_data.PREFIX)
    await dlq.migrate_dead_letters()
    await client.config_set("slowlog-log-slower-than", PURGE_LOGGED_US)
    await client.config_set("slowlog-max-len", 100_000)
    await client.slowlog_reset()
    loop = asyncio.get_running_loop()
    started = loop.time()
    purged = await dlq.purge_dead_letters(DeadLetterFilter(error_type=dlq_data.ERROR_TYPES[0]))
    seconds = loop.time() - started
    calls = await _logged_us(client, "purge_dead_letters")
    await dlq.close()
    await client.aclose()
    if not purged or not calls:
        raise RuntimeError("the purge purged nothing")
    return {
        "purged": purged, "rate": purged / seconds, "calls": len(calls),
        "p50": calls[len(calls) // 2] / 1000, "p99": calls[len(calls) * 99 // 100] / 1000,
        "max": calls[-1] / 1000,
    }  # fmt: skip


def rows(
    held: dict[str, float], states: dict[str, float], purge: dict[str, Any],
    burst: dict[str, tuple[float, float]], args: argparse.Namespace,
) -> list[str]:  # fmt: skip
    budget = ACT_BUDGET_US / 1000
    return [
        f"`remove()` of one job, {args.waiting:,} waiting (ms of Redis, the longest command):",
        "",
        "| job | held Redis |",
        "|---|---:|",
        *(f"| the {which} | {ms:.2f} ms |" for which, ms in held.items()),
        "",
        "`get_job_state()` in that queue (ms of Redis, the longest command):",
        "",
        "| state | held Redis |",
        "|---|---:|",
        *(f"| {which} | {ms:.2f} ms |" for which, ms in states.items()),
        "",
        f"A bulk purge by error type over {args.dead_letters:,} dead letters: {purge['purged']:,}"
        f" purged at {purge['rate']:,.0f}/s, in {purge['calls']:,} script calls over"
        f" {PURGE_LOGGED_US / 1000:.1f} ms (budget {budget:.0f} ms a call):",
        "",
        "| calls | p50 | p99 | longest |",
        "|---|---:|---:|---:|",
        f"| `purge_dead_letters` | {purge['p50']:.2f} ms | {purge['p99']:.2f} ms |"
        f" {purge['max']:.2f} ms |",
        "",
        f"Bursts of {args.burst:,} jobs (ms of Redis, of the commands over"
        f" {PURGE_LOGGED_US / 1000:.1f} ms; on 2 cores shared with the worker, the OS pauses"
        " Redis now and then, which the longest can show):",
        "",
        "| burst | p99 | longest |",
        "|---|---:|---:|",
        *(f"| {which} | {p99:.2f} ms | {top:.2f} ms |" for which, (p99, top) in burst.items()),
    ]


async def measure(
    args: argparse.Namespace, url: str
) -> tuple[dict[str, float], dict[str, float], dict[str, Any], dict[str, tuple[float, float]]]:
    held, states = await removals(url, args.waiting)
    purge = await purge_calls(url, args.dead_letters)
    return held, states, purge, await bursts(url, args.burst)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--waiting", type=int, default=1_000_000)
    parser.add_argument("--dead-letters", type=int, default=1_000_000)
    parser.add_argument("--burst", type=int, default=100_000)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args()
    if args.waiting < 3 or args.dead_letters < 100 or args.burst < 100:
        parser.error("--waiting must be at least 3, --dead-letters and --burst at least 100")
    commit = report.git_state(ROOT)
    with EmbeddedRedis(extra_args=["--save", "", "--appendonly", "no"]) as server:
        version = ".".join(map(str, server.version))
        held, states, purge, burst = asyncio.run(measure(args, server.url))
    facts = report.machine_facts(version, commit)
    report.write_page(
        args.out,
        "pauses",
        "how long single calls hold Redis",
        facts,
        rows(held, states, purge, burst, args),
    )


if __name__ == "__main__":
    main()
