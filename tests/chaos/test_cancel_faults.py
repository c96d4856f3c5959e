"""Jobs cancelled (queue.cancel_job) while they wait and while they run, as the workers that
run them are SIGKILLed."""

from __future__ import annotations

import asyncio
import random
import time

import pytest

from lazarus import JobNotFoundError, JobStateError, Queue

from .audit import all_dead_letters
from .harness import Scenario
from .jobs import JobSpec, job_mix, produce
from .pool import RunLog
from .report import Findings

pytestmark = pytest.mark.chaos


class Canceller:
    """A client that cancels jobs at random, running ones (from the active list) and waiting
    ones alike, and remembers what Redis answered and when."""

    def __init__(self, queue: Queue, specs: list[JobSpec], seed: int) -> None:
        self.queue, self.rng = queue, random.Random(seed)
        self.left = [s.id for s in specs]
        self.rng.shuffle(self.left)
        self.answers: dict[str, tuple[str, float]] = {}  # job id -> (state told, when)
        self.ended = 0  # refused: the job had ended
        self.stop = asyncio.Event()

    async def run(self) -> None:
        while not self.stop.is_set() and self.left:
            active = await self.queue.get_active(0, 20)
            targets = [self.rng.choice(active).id] if active and self.rng.random() < 0.5 else []
            targets.append(self.left.pop())
            for job_id in targets:
                if job_id in self.answers:
                    continue
                when = time.time()
                try:
                    state = await self.queue.cancel_job(job_id, "cancelled by the storm")
                except (JobStateError, JobNotFoundError):  # ended already
                    self.ended += 1
                    continue
                self.answers[job_id] = (state, when)
            await asyncio.sleep(0.01)  # the canceller's own pace


@pytest.mark.timeout(240)
async def test_cancels_race_a_sigkill_storm(scenario: Scenario) -> None:
    # Given 2,000 jobs of 20-600 ms (some failing once or for good) and four worker processes
    # with leases of 1 s, renewed (and cancel requests read) every 0.5 s
    server = scenario.redis()
    name = "cancels"
    queue = scenario.queue(server, name)
    specs = job_mix(2000, seed=17, ms=(20, 600))
    await produce(queue, specs, chunk=500)
    pool = scenario.workers(server, name, concurrency=8, lock_duration=1000, stalled_interval=500)
    for _ in range(4):
        pool.spawn()

    # When a client cancels jobs at random, running and waiting ones, while a worker is
    # SIGKILLed and replaced every 250 ms for 8 s
    canceller = Canceller(queue, specs, seed=17)
    cancelling = asyncio.create_task(canceller.run())
    rng = random.Random(17)
    killed: set[int] = set()
    deadline = time.monotonic() + 8
    while time.monotonic() < deadline:
        await asyncio.sleep(0.25)  # the storm's own pace
        victim = rng.choice(pool.live)
        pool.kill(victim)
        killed.add(victim)
        pool.spawn()
    canceller.stop.set()
    await cancelling

    # Then nothing is lost, run twice, stuck or in two places; a job cancelled while it
    # waited never ran after, and is a dead letter of JobCancelledError; a job cancelled while
    # it ran ended once, completed (it finished first), or a dead letter
    drained = await scenario.settle(queue, timeout=60)
    findings = Findings(
        "cancels racing a worker SIGKILL storm", len(specs),
        f"cancel_job of running and waiting jobs by a client; {pool.killed} SIGKILLs of 4 "
        "workers, 1 per 250 ms",
    )  # fmt: skip
    await scenario.audit(findings, server, name, specs, healthy=None)
    runs = RunLog.read(scenario.tmp / f"runs-{name}")
    letters = {
        d.dead_letter.original_job_id: d
        for d in await all_dead_letters(scenario.queue(server, "dlq"))
        if d.dead_letter is not None
    }
    ran_after, not_cancelled = [], []
    active_ends = {"completed": 0, "cancelled": 0, "own": 0, "stopped by a live worker": 0}
    for job_id, (state, when) in canceller.answers.items():
        letter = letters.get(job_id)
        cancelled = letter is not None and letter.dead_letter is not None and (
            letter.dead_letter.error_type == "JobCancelledError"
        )  # fmt: skip
        if state == "active":
            completed = await queue.get_job_state(job_id) == "completed"
            kind = "completed" if completed else "cancelled" if cancelled else "own"
            active_ends[kind] += 1
            if cancelled and letter is not None and letter.dead_letter is not None:
                # Stopped mid-run: the cancelled attempt is one the processor began, in a
                # worker that no SIGKILL took
                attempt = letter.dead_letter.attempts[-1].attempt
                active_ends["stopped by a live worker"] += any(
                    run_attempt == attempt and pid not in killed
                    for pid, run_attempt, _ in runs.runs.get(job_id, ())
                )
            continue
        if any(started > when for _, _, started in runs.runs.get(job_id, ())):
            ran_after.append(job_id)
        if not cancelled:
            not_cancelled.append(job_id)
    told_active = sum(1 for state, _ in canceller.answers.values() if state == "active")
    findings.broken["cancelled while waiting, ran after"] = ran_after
    # A job that runs for up to 600 ms is stopped within about a lease renewal (0.5 s): of
    # many cancelled while they ran, some must be stopped by the worker running them (one no
    # SIGKILL took, which would leave the job to be failed by the worker claiming it again)
    stopped = active_ends["stopped by a live worker"] > 0 or told_active < 20
    findings.broken["cancelled while running, none stopped"] = [] if stopped else [name]
    findings.broken["cancelled while waiting, not a JobCancelledError dead letter"] = not_cancelled
    told = [state for state, _ in canceller.answers.values()]
    findings.notes.append(
        f"cancelled {len(told)} ({told.count('active')} running, "
        f"{len(told) - told.count('active')} waiting), {canceller.ended} refused (ended); "
        f"the running ones ended: {active_ends}; drained: {drained}"
    )
    await scenario.finish(findings)
