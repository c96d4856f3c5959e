"""Jobs stalled out under a worker SIGKILL storm follow their own ``on_exhaustion``: with no
stall allowed, a job whose worker dies goes, at the next sweep, to the queue's ``failed`` set
(``fail``), nowhere (``discard``: deleted with its logs and its deduplication id, and a
``discarded`` event), or into the dead letter queue (``dead_letter``, and the default)."""

from __future__ import annotations

import asyncio
import dataclasses
import random
import time
from collections import Counter
from typing import Any

import pytest

from lazarus import Queue

from .audit import Snapshot, snapshot
from .harness import PREFIX, Scenario, sweep_when_lapsed
from .jobs import DOOMED, OK, JobSpec, produce
from .pool import RunLog
from .report import Findings

pytestmark = pytest.mark.chaos

QUEUE, DLQ = "exh", "dlq"
JOBS = 1000
# What a job stalled out (or failed for good) under each on_exhaustion comes to.
FATES = {None: "dead_lettered", "dead_letter": "dead_lettered", "fail": "failed",
         "discard": "discarded"}  # fmt: skip
STALLED_OUT = "job stalled more than allowable limit"


def exhaustion_mix(count: int, *, seed: int) -> list[JobSpec]:
    """``count`` jobs of 150-300 ms, one in ten failing every attempt (two attempts); each
    with an ``on_exhaustion`` drawn from the default, ``dead_letter``, ``fail`` and
    ``discard``, and a deduplication id of its own (no ttl: held until the job ends)."""
    rng = random.Random(seed)
    specs = []
    for i in range(count):
        data: dict[str, Any] = {"i": i, "ms": rng.randint(150, 300)}
        kind = OK
        if rng.random() < 0.1:
            kind, data["fail"] = DOOMED, 99
        options: dict[str, Any] = {"deduplication": {"id": f"dd{i}"}}
        exhaustion = rng.choice(list(FATES))
        if exhaustion is not None:
            options["on_exhaustion"] = exhaustion
        specs.append(JobSpec(f"x{i}", kind, data, 1 if kind == OK else 2, options))
    return specs


@dataclasses.dataclass
class Traces:
    """What the audit reads besides the snapshot: the discarded events (job id -> their
    failedReason), and per job whether its log list and its deduplication key still exist."""

    discarded: dict[str, str]
    logs: dict[str, bool]
    dedup: dict[str, bool]

    @classmethod
    async def read(cls, raw: Any, queue: Queue, specs: list[JobSpec]) -> Traces:
        discarded = {}
        for _entry_id, fields in await raw.xrange(queue.keys.events, "-", "+"):
            if fields.get("event") == "discarded":
                discarded[fields["jobId"]] = fields.get("failedReason", "")
        async with raw.pipeline(transaction=False) as pipe:
            for spec in specs:
                pipe.exists(queue.keys.logs(spec.id))
                pipe.exists(queue.keys.dedup(spec.options["deduplication"]["id"]))
            kept = await pipe.execute()
        ids = [s.id for s in specs]
        return cls(discarded, dict(zip(ids, map(bool, kept[::2]))),
                   dict(zip(ids, map(bool, kept[1::2]))))  # fmt: skip


def ends_of(job_id: str, snap: Snapshot, traces: Traces) -> list[str]:
    """Every end a job has: completed, failed, each dead letter of it, a discarded event."""
    states, letters = snap.states(job_id), snap.dead.get(job_id, [])
    return [*sorted(states & {"completed", "failed"}), *(["dead_lettered"] * len(letters)),
            *(["discarded"] if job_id in traces.discarded else [])]  # fmt: skip


def stalled_out(outcome: str, job_id: str, snap: Snapshot, traces: Traces) -> bool:
    """Whether the job came to ``outcome`` through the stall sweep (not a failure)."""
    if outcome == "failed":
        return snap.stalled.get(job_id, 0) > 0
    if outcome == "dead_lettered":
        meta = snap.dead[job_id][0].dead_letter
        return meta is not None and meta.reason == "stalled"
    return outcome == "discarded" and traces.discarded[job_id] == STALLED_OUT


def place(findings: Findings, spec: JobSpec, snap: Snapshot, runs: RunLog, ends: list[str]) -> None:
    """The columns of the table for one job with ``ends``: lost (no end, nowhere),
    duplicated, half-moved, stuck, undrained, and its runs beyond its design."""
    job_id = spec.id
    states, present = snap.states(job_id), job_id in snap.hashes
    told = runs.events.get(job_id, Counter())
    if not ends and not states and not present:
        findings.lost.append(job_id)
    if len(ends) > 1 or snap.entries[job_id] > 1 or told["C"] > 1 or told["D"] > 1:
        findings.duplicated.append(job_id)
    elif present != bool(states) or (present and job_id in snap.dead):
        findings.half_moved.append(job_id)
    if "active" in states:
        findings.stuck.append(job_id)
    if states & {"wait", "delayed", "prioritized"}:
        findings.undrained.append(job_id)
    findings.exec_dups += max(0, runs.count(job_id) - spec.designed_runs)


def judge_exhaustion(
    findings: Findings, specs: list[JobSpec], snap: Snapshot, runs: RunLog, traces: Traces
) -> tuple[Counter[str], Counter[str]]:
    """Fill ``findings``: every job in exactly one place its on_exhaustion allows, and a
    discarded one without its logs; every ended job's deduplication id free. Returns the
    outcomes, and those of them that the stall sweep decided."""
    wrong = findings.broken.setdefault("ended other than its on_exhaustion allows", [])
    doomed_completed = findings.broken.setdefault("failing job completed", [])
    logs_left = findings.broken.setdefault("discarded, yet its logs left", [])
    held = findings.broken.setdefault("ended, yet its deduplication id held", [])
    outcomes: Counter[str] = Counter()
    by_sweep: Counter[str] = Counter()
    for spec in specs:
        job_id = spec.id
        ends = ends_of(job_id, snap, traces)
        place(findings, spec, snap, runs, ends)
        if ends and traces.dedup[job_id]:
            held.append(job_id)
        if len(ends) != 1:
            continue
        outcome = ends[0]
        outcomes[outcome] += 1
        if outcome == "completed":
            if spec.kind == DOOMED:
                doomed_completed.append(job_id)
            continue
        if outcome != FATES[spec.options.get("on_exhaustion")]:
            wrong.append(job_id)
        by_sweep[outcome] += stalled_out(outcome, job_id, snap, traces)
        if outcome == "discarded" and traces.logs[job_id]:
            logs_left.append(job_id)
    return outcomes, by_sweep


@pytest.mark.timeout(180)
async def test_stalled_out_jobs_follow_their_on_exhaustion_under_a_sigkill_storm(
    scenario: Scenario,
) -> None:
    # Given 1,000 jobs of 150-300 ms (a tenth failing every attempt), each with its own
    # deduplication id, a log line, and an on_exhaustion of the default, dead_letter, fail or
    # discard; and four worker processes with 1 s leases and no stall allowed
    server = scenario.redis()
    queue = scenario.queue(server, QUEUE)
    specs = exhaustion_mix(JOBS, seed=21)
    await produce(queue, specs, chunk=250)
    await asyncio.gather(*(queue.add_job_log(s.id, f"log of {s.id}") for s in specs))
    pool = scenario.workers(server, QUEUE, dlq=DLQ, concurrency=8, lock_duration=1000,
                            stalled_interval=500, max_stalled_count=0,
                            shutdown_timeout=0.2)  # fmt: skip
    for _ in range(4):
        pool.spawn()

    # When, every 250 ms for up to 7 s, a worker is SIGKILLed (each job it ran stalls out at
    # the next sweep of a worker left standing) and replaced
    rng = random.Random(21)
    deadline = time.monotonic() + 7
    while time.monotonic() < deadline:
        await asyncio.sleep(0.25)  # the storm's own pace
        pool.kill(rng.choice(pool.live))
        pool.spawn()
        if await scenario.settle(queue, timeout=0):
            break

    # Then, once the survivors' sweeps (and the sweep that the leases of the last ones killed
    # call for) have run, every job is in exactly one place that its on_exhaustion allows:
    # completed; failed (fail only); a dead letter (the default or dead_letter only); or
    # discarded (discard only: no hash, no logs, a discarded event). None lost, none in two
    # places, none left active or waiting, and every ended job's deduplication id is free
    settled = await scenario.settle(queue, timeout=30)
    await scenario.stop_workers()
    raw = scenario.raw(server)
    dlq = scenario.queue(server, DLQ)
    last_sweep = await sweep_when_lapsed(raw, queue.keys, dlq.keys, max_stalled=0)
    snap = await snapshot(raw, PREFIX, QUEUE, dlq)
    runs = RunLog.read(scenario.tmp / f"runs-{QUEUE}")
    traces = await Traces.read(raw, queue, specs)
    findings = Findings("stalled-out jobs follow on_exhaustion, worker SIGKILL storm", JOBS,
                        f"{pool.killed} SIGKILLs of 4 workers, 1 per 250 ms; no stall "
                        "allowed")  # fmt: skip
    findings.spurious_stalls = None
    outcomes, by_sweep = judge_exhaustion(findings, specs, snap, runs, traces)

    # And a job added again with a discarded job's deduplication id is added, not turned away
    gone = [s for s in specs if s.id in traces.discarded]
    again = await queue.add_bulk(
        {"name": "again", "data": {"i": -1}, "job_id": f"again-{s.id}",
         "deduplication": s.options["deduplication"]} for s in gone
    )  # fmt: skip
    findings.broken["deduplication id of a discarded job turned a new job away"] = [
        s.id for s, job in zip(gone, again) if job.id != f"again-{s.id}"
    ]
    findings.notes.append(
        f"outcomes {dict(sorted(outcomes.items()))}; of them stalled out: "
        f"{dict(sorted(by_sweep.items()))}; swept after the workers stopped: {last_sweep}; "
        f"runs {sum(runs.count(s.id) for s in specs)}; settled within 30 s: {settled}"
    )
    await scenario.finish(findings)
    # The storm must have stalled out jobs to each end, or it tested nothing of the sweep
    assert all(by_sweep[o] for o in ("failed", "dead_lettered", "discarded")), by_sweep
