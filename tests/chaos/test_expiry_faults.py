"""Jobs with an expiry (add(..., expires=)) claimed, run and reclaimed while the workers that
hold them are SIGKILLed: none starts after its expiry, and none is lost."""

from __future__ import annotations

import asyncio
import random
import time

import pytest

from .audit import all_dead_letters
from .harness import Scenario
from .jobs import JobSpec, job_mix, produce
from .pool import RunLog
from .report import Findings

pytestmark = pytest.mark.chaos

# A run logged later than this after its expiry started past it: the worker checks the expiry
# just before the processor starts, and the processor logs its start first thing.
SLACK = 0.05


@pytest.mark.timeout(240)
async def test_expiring_jobs_ride_a_sigkill_storm(scenario: Scenario) -> None:
    # Given 1,500 jobs of 20-200 ms (some failing once or for good), each with an expiry of
    # 1-6 s from its add, more work than four workers of eight slots finish in that time
    server = scenario.redis()
    name = "expiring"
    queue = scenario.queue(server, name)
    rng = random.Random(23)
    specs = [
        JobSpec(s.id, s.kind, s.data, s.attempts, {"expires": rng.randint(1_000, 6_000)})
        for s in job_mix(1500, seed=23, ms=(20, 200))
    ]
    await produce(queue, specs, chunk=500)
    added = time.time()  # every job's add time is at most this
    pool = scenario.workers(server, name, concurrency=8, lock_duration=1000, stalled_interval=500)
    for _ in range(4):
        pool.spawn()

    # When a worker is SIGKILLed and replaced every 250 ms for 6 s
    kills = random.Random(23)
    deadline = time.monotonic() + 6
    while time.monotonic() < deadline:
        await asyncio.sleep(0.25)  # the storm's own pace
        pool.kill(kills.choice(pool.live))
        pool.spawn()

    # Then nothing is lost, run twice, stuck or in two places; no job starts after its
    # expiry; a job that expired before it ran, or before a retry, is a dead letter of
    # JobExpiredError (reason expired)
    drained = await scenario.settle(queue, timeout=60)
    findings = Findings(
        "expiring jobs in a worker SIGKILL storm", len(specs),
        f"expiries of 1-6 s; {pool.killed} SIGKILLs of 4 workers, 1 per 250 ms",
    )  # fmt: skip
    await scenario.audit(findings, server, name, specs, healthy=None)
    runs = RunLog.read(scenario.tmp / f"runs-{name}")
    letters = {
        d.dead_letter.original_job_id: d.dead_letter
        for d in await all_dead_letters(scenario.queue(server, "dlq"))
        if d.dead_letter is not None
    }
    late, not_expired = [], []
    expired = never_ran = 0
    for spec in specs:
        expires_at = added + spec.options["expires"] / 1000
        starts = [started for _, _, started in runs.runs.get(spec.id, ())]
        if any(started > expires_at + SLACK for started in starts):
            late.append(spec.id)
        letter = letters.get(spec.id)
        if letter is not None and letter.reason == "expired":
            expired += 1
            never_ran += not starts
            if letter.error_type != "JobExpiredError":
                not_expired.append(spec.id)
    findings.broken["started after its expiry"] = late
    findings.broken["dead-lettered as expired, not by JobExpiredError"] = not_expired
    # The storm must have let some jobs expire, or the scenario proves nothing
    findings.broken["no job expired"] = [] if expired else [name]
    findings.notes.append(
        f"expired {expired} ({never_ran} before any run, {expired - never_ran} before a "
        f"retry or a reclaim); drained: {drained}"
    )
    await scenario.finish(findings)
