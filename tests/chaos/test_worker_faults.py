"""Faults in the worker processes: SIGKILLed, SIGSTOPped, and processors that never return."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import random
import signal
import time
from collections import Counter

import pytest

from lazarus import JobNotFoundError, JobStateError, Queue

from .audit import all_dead_letters
from .harness import Scenario, Server
from .jobs import HUNG, JobSpec, job_mix, produce
from .pool import RunLog
from .report import Findings

pytestmark = pytest.mark.chaos


@pytest.mark.timeout(240)
@pytest.mark.parametrize("ms", [(40, 160), (5, 30)], ids=["long", "short"])
async def test_worker_sigkill_storm(scenario: Scenario, ms: tuple[int, int]) -> None:
    # Given 3,000 jobs of 40-160 ms (or 6,000 of 5-30 ms, which each slot runs with its next
    # job claimed ahead) and four worker processes with 2 s leases
    short = ms[1] < 50
    name = "storm-short" if short else "storm"
    server = scenario.redis()
    queue = scenario.queue(server, name)
    specs = job_mix(6000 if short else 3000, seed=1, ms=ms)
    await produce(queue, specs, chunk=500)
    pool = scenario.workers(server, name, concurrency=8, lock_duration=2000, stalled_interval=1000)
    for _ in range(4):
        pool.spawn()

    # When a worker is SIGKILLed and replaced every 250 ms for up to 12 s
    rng = random.Random(1)
    deadline = time.monotonic() + 12
    while time.monotonic() < deadline and pool.killed < 60:
        await asyncio.sleep(0.25)  # the storm's own pace
        pool.kill(rng.choice(pool.live))
        pool.spawn()
        if pool.killed % 8 == 0 and await scenario.settle(queue, timeout=0):
            break

    # Then, once the workers left standing have recovered every stalled job,
    # no job is lost, duplicated, stuck or half-moved
    drained = await scenario.settle(queue, timeout=45)
    title = "worker SIGKILL storm" + (", 5-30 ms jobs claimed ahead" if short else "")
    findings = Findings(title, len(specs), f"{pool.killed} SIGKILLs of 4 workers, 1 per 250 ms")
    await scenario.audit(findings, server, name, specs, healthy=None)
    findings.notes.append(f"drained within 45 s of the storm: {drained}")
    await check_throughput(scenario, findings, server, queue)
    await scenario.finish(findings)


async def check_throughput(scenario: Scenario, findings: Findings, server: Server,
                           queue: Queue) -> None:  # fmt: skip
    """The queue's throughput counts (``get_metrics``) against its jobs' ends: a job run
    again after its worker was killed must count once."""
    metrics = await queue.get_metrics(1)
    completed = await queue.get_completed_count()
    letters = await all_dead_letters(scenario.queue(server, "dlq"))
    dead = sum(1 for d in letters if d.dead_letter and d.dead_letter.source_queue == queue.name)
    findings.notes.append(
        f"throughput counts: completed {metrics.completed} (jobs {completed}), "
        f"failed {metrics.failed} (dead letters {dead})"
    )
    if (metrics.completed, metrics.failed) != (completed, dead):
        findings.broken["throughput miscounted"] = [queue.name]


@pytest.mark.timeout(240)
async def test_sigstopped_workers(scenario: Scenario) -> None:
    # Given 2,500 jobs and three worker processes with 2 s leases
    server = scenario.redis()
    queue = scenario.queue(server, "stopped")
    specs = job_mix(2500, seed=2, ms=(50, 170))
    await produce(queue, specs, chunk=500)
    pool = scenario.workers(
        server, "stopped", concurrency=6, lock_duration=2000, stalled_interval=500
    )
    pids = [pool.spawn() for _ in range(3)]

    # When each worker in turn is SIGSTOPped for 4 s (twice its lease), then SIGCONTinued
    stops: list[tuple[int, float, float]] = []
    for cycle in range(3):
        await asyncio.sleep(1.0)  # the fault's own pace
        if await scenario.settle(queue, timeout=0):
            break
        victim, since = pids[cycle], time.time()
        pool.signal(victim, signal.SIGSTOP)
        await asyncio.sleep(4.0)
        pool.signal(victim, signal.SIGCONT)
        stops.append((victim, since, time.time()))

    # Then the others recovered its jobs: nothing lost, duplicated (no second dead letter
    # when the stopped worker wakes up and reports an outcome), stuck or half-moved; and no
    # job the stopped workers did not hold stalled
    drained = await scenario.settle(queue, timeout=30)
    runs = pool.runs()

    def healthy(job_id: str) -> bool:
        # Held by a stopped worker: started by it just before (jobs last at most 170 ms),
        # during, or just after one of its stops (a claim Redis ran while it was stopped).
        return not any(
            pid == victim and since - 0.5 <= started <= until + 2
            for pid, _, started in runs.runs.get(job_id, ())
            for victim, since, until in stops
        )

    findings = Findings(
        "SIGSTOPped workers", len(specs), f"{len(stops)} SIGSTOPs of 4 s, leases of 2 s"
    )
    await scenario.audit(findings, server, "stopped", specs, healthy=healthy)
    touched = sum(not healthy(s.id) for s in specs)
    findings.notes.append(f"jobs held by a stopped worker: {touched}; drained: {drained}")
    await scenario.finish(findings)


@pytest.mark.timeout(180)
async def test_hung_processors_time_out(scenario: Scenario) -> None:
    # Given an async and a thread-pool worker, each with 300 quick jobs and 4 jobs whose
    # processor never returns, added with a 1 s timeout and 2 attempts
    findings = Findings("hung processors, job timeout", 0, "processors that never return")
    if "timeout" not in inspect.signature(Queue.add).parameters:
        findings.broken["Queue.add has no timeout option"] = ["timeout"]
        findings.ran = False
        await scenario.finish(findings)  # fails the scenario here
    server = scenario.redis()
    plans: dict[str, tuple[Queue, list[JobSpec]]] = {}
    for kind in ("async", "sync"):
        specs = job_mix(300, seed=3, ms=(10, 30), flaky=0, doomed=0, discarded=0,
                        id_prefix=f"{kind}-")  # fmt: skip
        for i in range(4):  # among the quick ones, which need the slots they free
            hung = JobSpec(f"{kind}-hung-{i}", HUNG, {"i": i, "hang": True}, 2, {"timeout": 1000})
            specs.insert(i * 60, hung)
        queue = scenario.queue(server, f"hung-{kind}")
        await produce(queue, specs, chunk=500)
        pool = scenario.workers(
            server, f"hung-{kind}", concurrency=4, lock_duration=2000, stalled_interval=1000
        )
        pool.spawn(sync=kind == "sync")
        plans[kind] = (queue, specs)

    # When their attempts pass the timeout
    drained = await asyncio.gather(*(scenario.settle(q, timeout=30) for q, _ in plans.values()))

    # Then each hung attempt failed as a timeout (retried, then dead-lettered), the quick
    # jobs all completed, and no job is stuck or stalled
    for kind, (_, specs) in plans.items():
        findings.jobs += len(specs)
        await scenario.audit(findings, server, f"hung-{kind}", specs, healthy=lambda _: True)
    letters = await all_dead_letters(scenario.queue(server, "dlq"))
    timed_out = {
        letter.dead_letter.original_job_id
        for letter in letters
        if letter.dead_letter and "timeout" in letter.dead_letter.error_type.lower()
    }
    hung = [s.id for _, specs in plans.values() for s in specs if s.kind == HUNG]
    findings.broken["hung job not dead-lettered as a timeout"] = [
        i for i in hung if i not in timed_out
    ]
    findings.notes.append(f"drained (async, sync): {drained}")
    # and a worker whose threads hang still exits after its shutdown_timeout on SIGTERM
    stubborn = await scenario.stop_workers()
    findings.broken["worker still running 10 s after SIGTERM"] = ["worker"] * stubborn
    await scenario.finish(findings)


@pytest.mark.timeout(240)
async def test_removals_deep_inside_a_long_queue_race_a_sigkill_storm(scenario: Scenario) -> None:
    # Given 24,000 short jobs, more than a removal searches whole, and three worker processes
    server = scenario.redis()
    name = "removals"
    queue = scenario.queue(server, name)
    specs = job_mix(24_000, seed=7, ms=(0, 2), flaky=0.0, doomed=0.0, discarded=0.0)
    await produce(queue, specs, chunk=2000)
    pool = scenario.workers(server, name, concurrency=8, lock_duration=2000, stalled_interval=1000)
    for _ in range(3):
        pool.spawn()

    # When a client removes 400 jobs picked from the whole middle of the list while the
    # workers drain it, and a worker is SIGKILLed and replaced every 500 ms
    rng = random.Random(7)
    picks = rng.sample(specs[1_500:22_500], 400)
    removed: dict[str, float] = {}  # job id -> when remove() returned
    refused: list[str] = []

    async def remove_picks() -> None:
        for spec in picks:
            try:
                await queue.remove(spec.id)
            except JobStateError:  # running by then
                refused.append(spec.id)
            else:
                removed[spec.id] = time.time()

    remover = asyncio.create_task(remove_picks())
    while not remover.done():
        await asyncio.wait({remover}, timeout=0.5)  # the storm's own pace
        pool.kill(rng.choice(pool.live))
        pool.spawn()
    await remover

    # Then every other job ran as without faults, and no removed job ran after its removal,
    # is anywhere, or left its place counted
    drained = await scenario.settle(queue, timeout=45)
    findings = Findings(
        "removals deep inside a long queue, worker SIGKILL storm", len(specs),
        f"400 removals racing 3 workers; {pool.killed} SIGKILLs, 1 per 500 ms",
    )  # fmt: skip
    kept = [s for s in specs if s.id not in removed]
    await scenario.audit(findings, server, name, kept, healthy=None)
    runs = RunLog.read(scenario.tmp / f"runs-{name}")
    findings.broken["removed, then ran"] = [
        i for i, at in removed.items() if any(start > at for _, _, start in runs.runs.get(i, ()))
    ]
    raw = scenario.raw(server)
    keys = queue.keys
    findings.broken["removed, yet still there"] = [
        i
        for i in removed
        if await raw.exists(keys.job(i)) or await queue.get_job_state(i) != "unknown"
    ]
    holes = await raw.hget(keys.meta, "holes")
    findings.broken["holes counted with the wait list empty"] = [] if not holes else [str(holes)]
    made = (await raw.info("commandstats")).get("cmdstat_lset", {}).get("calls", 0)
    findings.notes.append(
        f"removed {len(removed)} ({made} leaving a hole), refused (running) {len(refused)};"
        f" drained: {drained}"
    )
    await scenario.finish(findings)


class Promoter:
    """A client that promotes every delayed job it sees, one by one (``promote_job``) or in
    bulk (``promote_jobs``), until ``stop`` is set."""

    def __init__(self, queue: Queue, bulk: bool) -> None:
        self.queue, self.bulk = queue, bulk
        self.promoted: Counter[str] = Counter()
        self.refused = self.in_bulk = 0
        self.stop = asyncio.Event()

    async def run(self) -> None:
        while not self.stop.is_set():
            if not await (self._in_bulk() if self.bulk else self._one_by_one()):
                await asyncio.sleep(0.05)  # the promoter's own pace

    async def _in_bulk(self) -> int:
        done = await self.queue.promote_jobs(batch_size=50)
        self.in_bulk += done
        return done

    async def _one_by_one(self) -> int:
        due = await self.queue.get_delayed(0, 199)
        for job in due:
            try:
                await self.queue.promote_job(job.id)
            except (JobStateError, JobNotFoundError):  # taken on meanwhile
                self.refused += 1
            else:
                self.promoted[job.id] += 1
        return len(due)

    def summary(self) -> str:
        if self.bulk:
            return f"promoted {self.in_bulk} times in bulk"
        return (
            f"promoted {sum(self.promoted.values())} times ({len(self.promoted)} jobs, "
            f"{sum(n > 1 for n in self.promoted.values())} after a backoff), refused "
            f"{self.refused} (taken on by a worker's promotion first)"
        )


@pytest.mark.timeout(240)
@pytest.mark.parametrize("bulk", [False, True], ids=["one by one", "in bulk"])
async def test_promotions_race_a_sigkill_storm(scenario: Scenario, bulk: bool) -> None:
    # Given 2,000 jobs of 5-30 ms: two in three delayed by an hour and, when an attempt fails,
    # backed off by an hour, so that only promote_job (or promote_jobs) makes them run; the
    # others delayed and backed off by up to 200 ms, so that the workers promote them too; and
    # four workers
    server = scenario.redis()
    name = "promotions"
    queue = scenario.queue(server, name)
    rng = random.Random(11)
    hour = 3_600_000
    specs = []
    for spec in job_mix(2000, seed=11, ms=(5, 30)):
        wait = hour if rng.random() < 2 / 3 else rng.randint(1, 200)
        later = {"delay": wait, "backoff": {"type": "fixed", "delay": wait}}
        specs.append(dataclasses.replace(spec, options=later))
    only_by_hand = {s.id for s in specs if s.options["delay"] == hour}
    await produce(queue, specs, chunk=500)
    pool = scenario.workers(server, name, concurrency=8, lock_duration=2000, stalled_interval=1000)
    for _ in range(4):
        pool.spawn()

    # When a client promotes every delayed job it sees (again after each backoff), one by one
    # or in bulk, racing the workers' own promotions and sweeps, while a worker is SIGKILLed
    # and replaced every 250 ms for 8 s
    promoter = Promoter(queue, bulk)
    promoting = asyncio.create_task(promoter.run())
    deadline = time.monotonic() + 8
    while time.monotonic() < deadline:
        await asyncio.sleep(0.25)  # the storm's own pace
        pool.kill(rng.choice(pool.live))
        pool.spawn()

    # Then every job ran as without faults: none lost, run twice, stuck delayed or in two places
    drained = await scenario.settle(queue, timeout=60)
    promoter.stop.set()
    await promoting
    how = "promote_jobs in batches of 50" if bulk else "promote_job of every delayed job"
    findings = Findings(
        f"promotions racing a worker SIGKILL storm ({'in bulk' if bulk else 'one by one'})",
        len(specs), f"{how} by a client; {pool.killed} SIGKILLs of 4 workers, 1 per 250 ms",
    )  # fmt: skip
    await scenario.audit(findings, server, name, specs, healthy=None)
    if not bulk:  # in bulk the ids are not known; an hour's delay ends only by hand anyway
        runs = RunLog.read(scenario.tmp / f"runs-{name}")
        findings.broken["delayed an hour, ran, never promoted"] = [
            i for i in runs.runs if i in only_by_hand and not promoter.promoted[i]
        ]
    findings.notes.append(f"{promoter.summary()}; drained: {drained}")
    await scenario.finish(findings)
