"""Workers that end on their own — ``burst`` once nothing is ready, ``max_jobs`` after so many
jobs — SIGKILLed mid-burst: the jobs they held, ran or handed back unrun are all accounted
for."""

from __future__ import annotations

import asyncio
import random
import time

import pytest

from .harness import Scenario
from .jobs import job_mix, produce
from .report import Findings

pytestmark = pytest.mark.chaos

WORKERS = 4
MAX_JOBS = 50


@pytest.mark.timeout(240)
async def test_burst_and_max_jobs_workers_in_a_sigkill_storm(scenario: Scenario) -> None:
    # Given 3,000 jobs of 5-30 ms (each slot runs them with its next job claimed ahead) and
    # four burst workers that each end after starting 50 jobs, with 2 s leases
    server = scenario.redis()
    queue = scenario.queue(server, "recycled")
    specs = job_mix(3000, seed=11, ms=(5, 30))
    await produce(queue, specs, chunk=500)
    pool = scenario.workers(server, "recycled", concurrency=8, lock_duration=2000,
                            stalled_interval=1000, burst=True, max_jobs=MAX_JOBS)  # fmt: skip
    for _ in range(WORKERS):
        pool.spawn()

    # When, every 250 ms for up to 12 s, the workers that ended are replaced (each ends with
    # the jobs it claimed beyond its 50 handed back) and one worker is SIGKILLed and replaced
    rng = random.Random(11)
    ended = 0
    deadline = time.monotonic() + 12
    while time.monotonic() < deadline and pool.killed < 48:
        await asyncio.sleep(0.25)  # the storm's own pace
        ended += pool.reap()
        while len(pool.live) < WORKERS:
            pool.spawn()
        pool.kill(rng.choice(pool.live))
        pool.spawn()
        if pool.killed % 8 == 0 and await scenario.settle(queue, timeout=0):
            break

    # Then burst workers started one after another, as cron would start them, each running
    # until nothing is ready (a killed worker's jobs come back once their leases lapse and a
    # live worker sweeps them), finish the queue: nothing lost, duplicated, stuck, half-moved
    # or undrained
    crons = 0
    cron_deadline = time.monotonic() + 45
    while not await scenario.settle(queue, timeout=0) and time.monotonic() < cron_deadline:
        ended += pool.reap()
        if not pool.live:
            pool.spawn()
            crons += 1
        await asyncio.sleep(0.1)  # a cron's own pace
    drained = await scenario.settle(queue, timeout=0)
    findings = Findings(
        "burst workers ending after 50 jobs, worker SIGKILL storm", len(specs),
        f"{pool.killed} SIGKILLs of {WORKERS} workers, 1 per 250 ms; {ended} workers ended "
        f"on their own",
    )  # fmt: skip
    await scenario.audit(findings, server, "recycled", specs, healthy=None)
    findings.notes.append(f"burst workers started after the storm: {crons}; drained: {drained}")
    await scenario.finish(findings)
