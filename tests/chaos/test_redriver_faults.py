"""A redriver SIGKILLed while it holds claims: another takes over once the claims expire, and
every dead letter is replayed exactly once."""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from pathlib import Path

import pytest

from lazarus import DeadLetterFilter, Queue

from .dead_letters import DLQ, SOURCE, make_dead_letters
from .harness import PREFIX, Scenario, wait_for
from .redriver import build
from .report import Findings

pytestmark = pytest.mark.chaos

LETTERS = 400
SCRIPT = Path(__file__).with_name("redriver.py")


@pytest.mark.timeout(180)
async def test_a_killed_redrivers_claims_expire_and_another_finishes(scenario: Scenario) -> None:
    # Given 400 dead letters and a redriver process replaying them, 10 a batch
    server = scenario.redis()
    await make_dead_letters(server, [(i, "redrive", "ValueError") for i in range(LETTERS)])
    raw = scenario.raw(server)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(SCRIPT), server.url, stderr=asyncio.subprocess.DEVNULL
    )
    source_wait = f"{PREFIX}:{{src}}:wait"
    claims_key = f"{PREFIX}:{{{DLQ}}}:dl:claims"

    # When it is SIGKILLed while it holds claims, part-way through
    async def part_way() -> bool:
        return await raw.llen(source_wait) >= LETTERS // 4 and await raw.zcard(claims_key) > 0

    assert await wait_for(part_way, 60), "the redriver never got part-way"
    proc.kill()
    await proc.wait()
    orphaned = await raw.zcard(claims_key)
    replayed_before = await raw.llen(source_wait)

    # And another redriver runs until the dead letter queue is drained
    successor = build(server.url)
    task = asyncio.create_task(successor.run())

    async def drained() -> bool:
        return await scenario.queue(server, DLQ).get_dead_letter_count() == 0

    done = await wait_for(drained, 60)
    await successor.close()
    await task

    # Then every dead letter was replayed exactly once (one job each; the dead letter is
    # processing, waiting for that job), none lost
    findings = Findings("redriver SIGKILLed holding claims", LETTERS,
                        "SIGKILL of a redriver mid-batch; a second one takes over")  # fmt: skip
    findings.spurious_stalls = None
    await judge(findings, scenario.queue(server, DLQ), scenario.queue(server, SOURCE))
    findings.broken["not drained in 60 s"] = [] if done else ["dlq"]
    findings.broken["claims left behind"] = [str(n) for n in [await raw.zcard(claims_key)] if n]
    findings.notes.append(
        f"replayed before the kill: {replayed_before}; claims orphaned: {orphaned}; "
        f"replayed by the successor: {successor.stats.replayed}"
    )
    await scenario.finish(findings)
    assert orphaned > 0


async def judge(findings: Findings, dlq: Queue, source: Queue) -> None:
    """Fill ``findings``: per tag, one job made in the source queue and its dead letter in
    ``processing``; a tag with no job is lost, with two or more duplicated, still ``pending``
    with a job half-moved, still ``pending`` without one undrained."""
    status: dict[int, str] = {}
    for name in ("pending", "processing"):
        flt = DeadLetterFilter(status=name)
        for job in await dlq.find_dead_letters(flt, limit=LETTERS + 1):
            status[job.original_data["i"]] = name
    made = Counter(j.data["i"] for j in await source.get_waiting())
    wrong = findings.broken.setdefault("dead letter not processing after its replay", [])
    for tag in range(LETTERS):
        name = str(tag)
        if made[tag] > 1:
            findings.duplicated.append(name)
        elif made[tag] == 0 and status.get(tag) == "pending":
            findings.undrained.append(name)
        elif made[tag] == 0:
            findings.lost.append(name)
        elif status.get(tag) == "pending":
            findings.half_moved.append(name)
        elif status.get(tag) != "processing":
            wrong.append(name)
    assert await dlq.count_dead_letters(DeadLetterFilter(status="pending")) == len(
        findings.undrained
    ) + len(findings.half_moved)
