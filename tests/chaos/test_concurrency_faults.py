"""A queue's global concurrency while the workers that share it are SIGKILLed."""

from __future__ import annotations

import asyncio
import random
import time

import pytest

from .harness import Scenario
from .jobs import job_mix, produce
from .report import Findings

pytestmark = pytest.mark.chaos

CAP = 6


@pytest.mark.timeout(240)
async def test_a_global_concurrency_holds_through_a_sigkill_storm(scenario: Scenario) -> None:
    # Given 1,500 jobs of 5-30 ms, a cap of 6 active jobs, and four worker processes of 8
    # slots each (32 slots, so the cap is what bounds them)
    server = scenario.redis()
    name = "capped"
    queue = scenario.queue(server, name)
    await queue.set_global_concurrency(CAP)
    specs = job_mix(1500, seed=17, ms=(5, 30))
    await produce(queue, specs, chunk=500)
    pool = scenario.workers(server, name, concurrency=8, lock_duration=2000, stalled_interval=1000)
    for _ in range(4):
        pool.spawn()

    # When a worker is SIGKILLed and replaced every 250 ms for 8 s (the jobs a killed worker
    # held stay active, and count against the cap, until their leases run out), while a
    # client samples how many jobs are active
    raw = scenario.raw(server)
    seen: list[int] = []
    stop = asyncio.Event()

    async def sample() -> None:
        while not stop.is_set():
            seen.append(int(await raw.llen(queue.keys.active)))
            await asyncio.sleep(0.005)  # the sampler's own pace

    sampling = asyncio.create_task(sample())
    rng = random.Random(17)
    deadline = time.monotonic() + 8
    while time.monotonic() < deadline:
        await asyncio.sleep(0.25)  # the storm's own pace
        pool.kill(rng.choice(pool.live))
        pool.spawn()

    # Then every job ran as without faults, and never more than the cap were active
    drained = await scenario.settle(queue, timeout=90)
    stop.set()
    await sampling
    findings = Findings(
        f"global concurrency {CAP}, worker SIGKILL storm", len(specs),
        f"{pool.killed} SIGKILLs of 4 workers of 8 slots, 1 per 250 ms",
    )  # fmt: skip
    await scenario.audit(findings, server, name, specs, healthy=None)
    findings.broken[f"more than {CAP} active"] = [str(n) for n in seen if n > CAP]
    findings.notes.append(
        f"{len(seen)} samples of the active list, most {max(seen)}; drained: {drained}"
    )
    await scenario.finish(findings)
