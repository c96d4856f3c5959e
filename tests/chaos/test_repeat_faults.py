"""A schedule with ``overlap="skip"`` (every 100 ms, occurrences of 300 ms) worked by
workers that are SIGKILLed: no two occurrences run side by side, and every occurrence added
either ended (completed, or a dead letter after stalling too often) or was skipped."""

from __future__ import annotations

import asyncio
import random
import time

import pytest

from .audit import all_dead_letters
from .harness import Scenario
from .pool import RunLog
from .report import Findings

pytestmark = pytest.mark.chaos


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


WORK = 0.3  # seconds each occurrence runs
SLACK = 0.02  # a start logged this much early is clock noise, not an overlap


@pytest.mark.timeout(240)
async def test_a_schedule_that_skips_overlaps_rides_a_sigkill_storm(scenario: Scenario) -> None:
    # Given a schedule due every 100 ms whose occurrences run 300 ms, with overlap="skip", and
    # three worker processes of four slots (1 s leases)
    server = scenario.redis()
    name = "ticks"
    queue = scenario.queue(server, name)
    await queue.add("tick", {"ms": int(WORK * 1000)}, repeat={"every": 100, "overlap": "skip"})
    pool = scenario.workers(server, name, concurrency=4, lock_duration=1000, stalled_interval=500)
    for _ in range(3):
        pool.spawn()

    # When a worker is SIGKILLed and replaced every 400 ms for 6 s, then the schedule removed
    rng = random.Random(29)
    kills: list[tuple[int, float]] = []
    deadline = time.monotonic() + 6
    while time.monotonic() < deadline:
        await asyncio.sleep(0.4)  # the storm's own pace
        victim = rng.choice(pool.live)
        pool.kill(victim)
        kills.append((victim, time.time()))
        pool.spawn()
    (schedule,) = await queue.get_repeatable_jobs()
    assert await queue.remove_repeatable_by_key(schedule.key)
    drained = await scenario.settle(queue, timeout=60)

    # Then no run of one occurrence starts while a run of another has not ended (unless a
    # SIGKILL ended it early); every occurrence added ended, was skipped, or was the pending
    # one the removal took; none is stuck
    findings = Findings(
        "a schedule skipping overlaps in a worker SIGKILL storm", schedule.count,
        f"every 100 ms, 300 ms runs; {pool.killed} SIGKILLs of 3 workers, 1 per 400 ms",
    )  # fmt: skip
    runs = RunLog.read(scenario.tmp / f"runs-{name}")
    starts = sorted((started, job_id, pid) for job_id, rs in runs.runs.items()
                    for pid, _, started in rs)  # fmt: skip

    raw = scenario.raw(server)
    stream = await raw.xrange(queue.keys.events)
    events = [{_text(k): _text(v) for k, v in fields.items()} for _, fields in stream]
    stalled: dict[str, list[float]] = {}  # job id -> when the stall sweep took it back
    for (entry_id, _), event in zip(stream, events, strict=True):
        if event.get("event") == "stalled":
            at = int(_text(entry_id).partition("-")[0]) / 1000
            stalled.setdefault(event["jobId"], []).append(at)

    def cut(pid: int, job_id: str, started: float, before: float) -> bool:
        # The run no longer held its occurrence by then: its worker was killed, or its lease
        # lapsed (the stall sweep took the job back, or the worker found its lock gone), as
        # when a worker starves past its lease: the guarantee holds while a lease does
        return (
            (pid, job_id) in runs.lost
            or any(p == pid and started < at < before for p, at in kills)
            or any(started < at < before for at in stalled.get(job_id, ()))
        )

    first = starts[0][0] if starts else 0.0
    overlaps = [
        f"{a} (pid {pid_a}, +{start_a - first:.3f} s) and {b} "
        f"(pid {pid_b}, +{start_b - first:.3f} s)"
        for i, (start_a, a, pid_a) in enumerate(starts)
        for start_b, b, pid_b in starts[i + 1 :]
        if b != a and start_b < start_a + WORK - SLACK and not cut(pid_a, a, start_a, start_b)
    ]
    findings.broken["occurrences run side by side"] = overlaps
    skipped = {e["jobId"] for e in events if e["event"] == "skipped"}
    completed = {_text(c) for c in await raw.zrange(queue.keys.completed, 0, -1)}
    # An occurrence whose worker was killed in it more than max_stalled_count times is a dead
    # letter (reason stalled): ended, not lost
    letters = {
        d.dead_letter.original_job_id
        for d in await all_dead_letters(scenario.queue(server, "dlq"))
        if d.dead_letter is not None
    }
    ended = completed | letters
    findings.broken["skipped and run"] = sorted(skipped & set(runs.runs))
    findings.broken["ran, not ended"] = sorted(set(runs.runs) - ended)
    unaccounted = schedule.count - len(ended) - len(skipped)
    findings.broken["occurrences unaccounted for"] = [] if unaccounted in (0, 1) else [
        f"{schedule.count} added, {len(ended)} ended, {len(skipped)} skipped"
    ]  # fmt: skip
    findings.broken["nothing skipped"] = [] if skipped else [name]  # or the scenario proves nothing
    findings.broken["undrained"] = [] if drained else [name]
    findings.notes.append(
        f"{schedule.count} occurrences added: {len(completed)} completed, {len(letters)} "
        f"dead letters (stalled), {len(skipped)} skipped; {len(starts)} runs; drained: {drained}"
    )
    findings.notes.append(
        f"stalls swept: {sum(map(len, stalled.values()))}; runs that found their lock gone: "
        f"{len(runs.lost)}"
    )
    await scenario.finish(findings)
