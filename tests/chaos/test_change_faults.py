"""Jobs changed where they are (queue.change_job: data, priority, delay) while the workers that
run them are SIGKILLed."""

from __future__ import annotations

import asyncio
import dataclasses
import random
import time
from collections import Counter
from typing import Any

import pytest

from lazarus import JobNotFoundError, JobStateError, Queue

from .harness import Scenario
from .jobs import JobSpec, job_mix, produce
from .pool import RunLog
from .report import Findings

pytestmark = pytest.mark.chaos

HOUR = 3_600_000


class Changer:
    """A client that keeps changing the jobs it sees waiting, prioritized or delayed: a new
    priority for a ready job, a delay of at most 200 ms for a delayed one, and with either new
    data (the job's own, with a count of its changes: what the processor reads is kept)."""

    def __init__(self, queue: Queue, specs: list[JobSpec], seed: int) -> None:
        self.queue, self.rng = queue, random.Random(seed)
        self.data = {s.id: s.data for s in specs}
        self.changed: Counter[str] = Counter()  # job id -> changes Redis took
        self.written: dict[str, dict[str, Any]] = {}  # job id -> the data of its last change
        self.shortened: set[str] = set()  # jobs delayed an hour whose delay was changed
        self.refused = 0
        self.stop = asyncio.Event()

    async def run(self) -> None:
        while not self.stop.is_set():
            ready = await self.queue.get_waiting(0, 49) + await self.queue.get_prioritized(0, 49)
            delayed = await self.queue.get_delayed(0, 49)
            for job in ready:
                await self._change(job.id, priority=self.rng.randint(0, 5))
            for job in delayed:
                if await self._change(job.id, delay=self.rng.randint(0, 200)):
                    self.shortened.add(job.id)
            if not ready and not delayed:
                await asyncio.sleep(0.05)  # the changer's own pace

    async def _change(self, job_id: str, **change: int) -> bool:
        data = {**self.data[job_id], "changes": self.changed[job_id] + 1}
        try:
            await self.queue.change_job(job_id, data=data, **change)
        except (JobStateError, JobNotFoundError):  # running, finished or moved on meanwhile
            self.refused += 1
            return False
        self.changed[job_id] += 1
        self.written[job_id] = data
        return True


@pytest.mark.timeout(240)
async def test_changes_race_a_sigkill_storm(scenario: Scenario) -> None:
    # Given 2,000 jobs of 5-30 ms: one in three delayed by an hour (and backed off by an hour
    # after a failed attempt), which only a change of its delay makes run; the others with
    # priorities 0-5; and four worker processes
    server = scenario.redis()
    name = "changes"
    queue = scenario.queue(server, name)
    rng = random.Random(13)
    specs = []
    for spec in job_mix(2000, seed=13, ms=(5, 30)):
        if rng.random() < 1 / 3:
            later = {"delay": HOUR, "backoff": {"type": "fixed", "delay": HOUR}}
        else:
            later = {"priority": rng.randint(0, 5)}
        specs.append(dataclasses.replace(spec, options=later))
    only_by_change = {s.id for s in specs if s.options.get("delay") == HOUR}
    await produce(queue, specs, chunk=500)
    pool = scenario.workers(server, name, concurrency=8, lock_duration=2000, stalled_interval=1000)
    for _ in range(4):
        pool.spawn()

    # When a client keeps changing every job it sees (priority, delay and data in one call),
    # racing the workers' claims, outcomes and sweeps, while a worker is SIGKILLed and
    # replaced every 250 ms for 8 s
    changer = Changer(queue, specs, seed=13)
    changing = asyncio.create_task(changer.run())
    deadline = time.monotonic() + 8
    while time.monotonic() < deadline:
        await asyncio.sleep(0.25)  # the storm's own pace
        pool.kill(rng.choice(pool.live))
        pool.spawn()

    # Then every job ran as without faults (none lost, run twice, stuck or in two places), no
    # job delayed an hour ran without its delay changed, and every completed job holds the
    # data of the last change Redis took
    drained = await scenario.settle(queue, timeout=60)
    changer.stop.set()
    await changing
    findings = Findings(
        "job changes racing a worker SIGKILL storm", len(specs),
        f"change_job (data with priority or delay) by a client; {pool.killed} SIGKILLs of 4 "
        "workers, 1 per 250 ms",
    )  # fmt: skip
    await scenario.audit(findings, server, name, specs, healthy=None)
    runs = RunLog.read(scenario.tmp / f"runs-{name}")
    findings.broken["delayed an hour, ran, delay never changed"] = [
        i for i in runs.runs if i in only_by_change and i not in changer.shortened
    ]
    stale = []
    for job_id, data in changer.written.items():
        job = await queue.get_job(job_id)
        if job is not None and job.finished_on is not None and job.dead_letter is None \
                and job.original_data != data:  # fmt: skip
            stale.append(job_id)
    findings.broken["completed with other data than its last change"] = stale
    findings.notes.append(
        f"{sum(changer.changed.values())} changes of {len(changer.changed)} jobs "
        f"({len(changer.shortened)} delays cut short), {changer.refused} refused "
        f"(running or moved on); drained: {drained}"
    )
    await scenario.finish(findings)
