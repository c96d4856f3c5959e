"""Faults in Redis while jobs flow: the server SIGKILLed and restarted on its append only
file, every client connection dropped every 100 ms, and memory exhausted for a while."""

from __future__ import annotations

import asyncio
import time

import pytest

from .harness import Scenario
from .jobs import job_mix, produce
from .pool import RunLog
from .report import Findings

pytestmark = pytest.mark.chaos


@pytest.mark.timeout(240)
@pytest.mark.parametrize("fsync", ["always", "everysec"])
async def test_redis_sigkill_and_restart(scenario: Scenario, fsync: str) -> None:
    # Given three worker processes, and a producer adding 3,000 jobs over about 6 s to a
    # Redis that writes every change to its append only file (appendfsync always / everysec)
    server = scenario.redis(appendfsync=fsync)
    queue = scenario.queue(server, "crash")
    specs = job_mix(3000, seed=4, ms=(20, 80))
    pool = scenario.workers(
        server, "crash", concurrency=8, lock_duration=5000, stalled_interval=1000
    )
    for _ in range(3):
        pool.spawn()
    acked: list[tuple[float, int]] = []
    producer = asyncio.create_task(produce(queue, specs, chunk=50, pause=0.1, acked=acked))

    # When redis-server is SIGKILLed every 1.5 s and restarted 0.3 s later, five times
    kills: list[float] = []
    for _ in range(5):
        await asyncio.sleep(1.5)  # the fault's own pace
        kills.append(time.time())
        await asyncio.to_thread(server.kill)
        await asyncio.sleep(0.3)
        await asyncio.to_thread(server.start)
    add_failures = await producer

    # Then, with appendfsync always, no job the producer was told was added, nor any
    # transition a client was told happened, is lost, duplicated, stuck or half-moved, and no
    # job stalled (no worker died). With everysec a SIGKILL of the process loses nothing that
    # reached the kernel; what it risks (a machine crash) is reported, not asserted.
    drained = await scenario.settle(queue, timeout=45)
    findings = Findings(
        f"Redis SIGKILL + restart, AOF {fsync}", len(specs),
        f"{server.starts - 1} SIGKILLs of redis-server, down 0.3 s each",
        exempt=() if fsync == "always" else ("lost", "duplicated", "spurious_stalls"),
    )  # fmt: skip
    await scenario.audit(findings, server, "crash", specs, healthy=lambda _: True)
    findings.notes.append(f"add calls that failed and were retried: {add_failures}; "
                          f"drained: {drained}")  # fmt: skip
    if fsync != "always":
        findings.notes.append(exposure(kills, acked, pool.runs()))
    await scenario.finish(findings)


def exposure(kills: list[float], acked: list[tuple[float, int]], runs: RunLog) -> str:
    """What a machine crash could have cost with ``everysec``: the changes Redis acknowledged
    in the second before each kill (jobs added, jobs claimed), at most."""
    starts = [t for items in runs.runs.values() for _, _, t in items]
    worst_adds = max(sum(n for t, n in acked if k - 1 <= t <= k) for k in kills)
    worst_claims = max(sum(1 for t in starts if k - 1 <= t <= k) for k in kills)
    return (
        "a SIGKILL of redis-server loses nothing written to the kernel; a machine crash at "
        f"one of these moments could have lost up to {worst_adds} acknowledged adds and "
        f"{worst_claims} claims with their outcomes (the last second)"
    )


@pytest.mark.timeout(240)
@pytest.mark.parametrize("concurrency", [8, 64])
async def test_client_kill_storm(scenario: Scenario, concurrency: int) -> None:
    # Given three worker processes, and a producer adding 3,000 jobs over about 6 s. At
    # concurrency 64 a worker's outcome calls go in batches of up to 32: a dropped connection
    # loses a whole batch's replies, and every one must still be answered once.
    server = scenario.redis()
    name = "dropped" if concurrency == 8 else f"dropped-{concurrency}"
    queue = scenario.queue(server, name)
    specs = job_mix(3000, seed=5, ms=(10, 60))
    pool = scenario.workers(
        server, name, concurrency=concurrency, lock_duration=5000, stalled_interval=1000
    )
    for _ in range(3):
        pool.spawn()
    producer = asyncio.create_task(produce(queue, specs, chunk=50, pause=0.1))

    # When every client connection is dropped (CLIENT KILL TYPE normal) every 100 ms for 10 s
    killer = scenario.raw(server)
    rounds = dropped = 0
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and rounds < 200:
        await asyncio.sleep(0.1)  # the storm's own pace
        dropped += int(await killer.execute_command("CLIENT", "KILL", "TYPE", "normal"))
        rounds += 1
        if producer.done() and rounds % 10 == 0 and await scenario.settle(queue, timeout=0):
            break
    add_failures = await producer

    # Then no job is lost, duplicated, stuck or half-moved, and none stalled: every worker
    # stayed alive, so a stall means a state change was lost or applied twice
    drained = await scenario.settle(queue, timeout=45)
    title = (
        "CLIENT KILL storm" if concurrency == 8 else f"CLIENT KILL storm, concurrency {concurrency}"
    )
    findings = Findings(
        title, len(specs),
        f"{rounds} rounds of CLIENT KILL TYPE normal, 1 per 100 ms, {dropped} connections",
    )  # fmt: skip
    await scenario.audit(findings, server, name, specs, healthy=lambda _: True)
    findings.notes.append(f"add calls that failed and were retried: {add_failures}; "
                          f"drained: {drained}")  # fmt: skip
    await scenario.finish(findings)


@pytest.mark.timeout(240)
async def test_memory_pressure_then_relief(scenario: Scenario) -> None:
    # Given three worker processes with 2 s leases, 3,000 jobs of which one in 40 runs for
    # 3 s (so its lease must be renewed), added over about 6 s
    server = scenario.redis()
    queue = scenario.queue(server, "pressed")
    specs = job_mix(3000, seed=6, ms=(10, 40))
    for spec in specs[::40]:
        spec.data["ms"] = 3000
    pool = scenario.workers(
        server, "pressed", concurrency=8, lock_duration=2000, stalled_interval=1000
    )
    for _ in range(3):
        pool.spawn()
    producer = asyncio.create_task(produce(queue, specs, chunk=50, pause=0.1))

    # When, 1.5 s in, maxmemory drops to half what Redis uses (noeviction) for 4 s, then
    # lifts; a fourth worker starts during the pressure and a fifth after it (as a deploy or
    # an autoscaler would start them)
    control = scenario.raw(server)
    await asyncio.sleep(1.5)  # let jobs flow first
    used = int((await control.info("memory"))["used_memory"])
    await control.config_set("maxmemory", used // 2)
    await asyncio.sleep(1)
    pool.spawn()
    await asyncio.sleep(3)  # the rest of the pressure
    refused = (await control.info("errorstats")).get("errorstat_OOM", {}).get("count", 0)
    await control.config_set("maxmemory", 0)
    pool.spawn()
    add_failures = await producer

    # Then, once memory is back, no job is lost, duplicated, stuck or half-moved, no worker
    # died, and no job stalled: running jobs kept their leases through the refusals and after
    drained = await scenario.settle(queue, timeout=45)
    findings = Findings(
        "memory pressure, then relief", len(specs),
        "maxmemory at half the used memory (noeviction) for 4 s",
    )  # fmt: skip
    await scenario.audit(findings, server, "pressed", specs, healthy=lambda _: True)
    findings.notes.append(f"add calls that failed and were retried: {add_failures}; "
                          f"commands Redis refused: {refused}; drained: {drained}")  # fmt: skip
    await scenario.finish(findings)
