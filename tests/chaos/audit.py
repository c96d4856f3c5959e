"""The end-of-scenario audit: where every job added is now, checked against Redis and against
the executions counted outside it.

The source queue is read through its keys (one snapshot of every state); dead letters only
through the public dead letter API, so the audit holds whatever the store looks like.
"""

from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict
from collections.abc import Callable

import redis.asyncio as aioredis

from lazarus import Job, Queue
from lazarus._keys import QueueKeys

from .jobs import JobSpec
from .pool import RunLog
from .report import Findings

PAGE = 500
STATES = ("wait", "active", "completed", "failed", "delayed", "prioritized")


@dataclasses.dataclass
class Snapshot:
    """Every state of the source queue, the job hashes in it, and the dead letters by the id
    of the job they came from."""

    members: dict[str, set[str]]  # state -> ids
    entries: Counter[str]  # id -> entries over every state (more than one is a duplicate)
    hashes: set[str]
    stalled: dict[str, int]  # id -> stalledCounter
    dead: dict[str, list[Job]]

    def states(self, job_id: str) -> set[str]:
        return {s for s, ids in self.members.items() if job_id in ids}


async def all_dead_letters(dlq: Queue) -> list[Job]:
    """Every dead letter in ``dlq``, page by page until an empty page (a store may return
    fewer than ``limit`` per page)."""
    letters: list[Job] = []
    for _ in range(10_000):
        page = await dlq.find_dead_letters(limit=PAGE, offset=len(letters))
        if not page:
            return letters
        letters += page
    raise AssertionError("more dead letters than the audit can page through")


async def snapshot(client: aioredis.Redis, prefix: str, queue: str, dlq: Queue) -> Snapshot:
    keys = QueueKeys(prefix, queue)
    async with client.pipeline(transaction=False) as pipe:
        pipe.lrange(keys.wait, 0, -1)
        pipe.lrange(keys.active, 0, -1)
        for state in STATES[2:]:
            pipe.zrange(getattr(keys, state), 0, -1)
        replies = await pipe.execute()
    members = {state: set(ids) for state, ids in zip(STATES, replies)}
    entries = Counter(i for ids in replies for i in ids)
    hashes = {
        k[len(keys.job_prefix) :]
        async for k in client.scan_iter(match=keys.job_prefix + "*", count=1000)
    }
    ordered = sorted(hashes)
    async with client.pipeline(transaction=False) as pipe:
        for job_id in ordered:
            pipe.hget(keys.job(job_id), "stalledCounter")
        counters = await pipe.execute()
    dead: dict[str, list[Job]] = defaultdict(list)
    for letter in await all_dead_letters(dlq):
        assert letter.dead_letter is not None
        dead[letter.dead_letter.original_job_id].append(letter)
    stalled = {i: int(c or 0) for i, c in zip(ordered, counters)}
    return Snapshot(members, entries, hashes, stalled, dict(dead))


def _stalled(job_id: str, snap: Snapshot) -> bool:
    if snap.stalled.get(job_id, 0) > 0:
        return True
    for letter in snap.dead.get(job_id, ()):
        meta = letter.dead_letter
        assert meta is not None
        if meta.reason == "stalled" or any(a.outcome == "stalled" for a in meta.attempts):
            return True
    return False


def place(findings: Findings, job_id: str, snap: Snapshot) -> tuple[set[str], list[Job]]:
    """Count ``job_id`` lost, duplicated, stuck or undrained from where ``snap`` finds it (for
    scenarios whose jobs no worker of the pool runs); its states and dead letters."""
    states, letters = snap.states(job_id), snap.dead.get(job_id, [])
    if not states and not letters:
        findings.lost.append(job_id)
    elif len(letters) > 1 or (letters and states) or snap.entries[job_id] > 1:
        findings.duplicated.append(job_id)
    if "active" in states:
        findings.stuck.append(job_id)
    if states & {"wait", "delayed", "prioritized"}:
        findings.undrained.append(job_id)
    return states, letters


def judge(
    findings: Findings, specs: list[JobSpec], snap: Snapshot, runs: RunLog,
    healthy: Callable[[str], bool] | None, label: str = "",
) -> Findings:  # fmt: skip
    """Fill ``findings`` with the fate of every job in ``specs``; ``label`` opens its notes.

    ``healthy(job_id)`` tells which jobs no fault touched on purpose (their stalls are
    spurious); ``None`` where every job may have been hit.
    """
    spurious: list[str] = []
    findings.spurious_stalls = None if healthy is None else spurious
    outcomes: Counter[str] = Counter()
    misfiled = 0
    for spec in specs:
        job_id = spec.id
        states, letters = snap.states(job_id), snap.dead.get(job_id, [])
        present = bool(states) or job_id in snap.hashes
        told = runs.events.get(job_id, Counter())
        if not present and not letters:
            findings.lost.append(job_id)
        elif letters and states & {"completed", "failed"}:
            findings.duplicated.append(job_id)  # two terminal records
        elif (letters and present) or (job_id in snap.hashes) != bool(states):
            findings.half_moved.append(job_id)
        if job_id not in findings.duplicated and (
            len(letters) > 1 or snap.entries[job_id] > 1 or told["C"] > 1 or told["D"] > 1
            or (told["C"] and told["D"])
        ):  # fmt: skip
            findings.duplicated.append(job_id)
        if "active" in states:
            findings.stuck.append(job_id)
        if states & {"wait", "delayed", "prioritized"}:
            findings.undrained.append(job_id)
        if healthy is not None and healthy(job_id) and _stalled(job_id, snap):
            spurious.append(job_id)
        findings.exec_dups += max(0, runs.count(job_id) - spec.designed_runs)
        outcome = "dead_lettered" if letters else next(iter(states), "gone")
        outcomes[outcome] += 1
        misfiled += outcome in ("completed", "dead_lettered") and outcome != spec.designed_outcome
    stalls = sum(1 for s in specs if _stalled(s.id, snap))
    runs_total = sum(runs.count(s.id) for s in specs)
    findings.notes.append(
        f"{label}: outcomes " + ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items()))
        + f"; jobs that stalled {stalls}; runs {runs_total}; outcome other than designed "
        f"{misfiled}"
    )  # fmt: skip
    # A worker must ride out every fault but the ones that kill it: one whose run() raised
    # has stopped processing for good.
    findings.broken.setdefault("worker died by itself", []).extend(runs.deaths)
    if runs.errors:
        findings.notes.append(f"worker error events: {dict(runs.errors.most_common(4))}")
    return findings
