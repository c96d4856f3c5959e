"""A redriver SIGKILLed while it holds claims: another takes over once the claims expire, and
every dead letter is replayed exactly once."""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from pathlib import Path

import pytest

from .dead_letters import DLQ, Where, judge_letters, make_dead_letters
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

    # Then every dead letter was replayed exactly once, none lost
    findings = Findings("redriver SIGKILLed holding claims", LETTERS,
                        "SIGKILL of a redriver mid-batch; a second one takes over")  # fmt: skip
    findings.spurious_stalls = None
    where = await Where.look(server)
    replays = Counter(dict(where.jobs))
    judge_letters(findings, where, dict.fromkeys(range(LETTERS), "replay"), replays)
    findings.broken["not drained in 60 s"] = [] if done else ["dlq"]
    findings.broken["claims left behind"] = [str(n) for n in [await raw.zcard(claims_key)] if n]
    findings.notes.append(
        f"replayed before the kill: {replayed_before}; claims orphaned: {orphaned}; "
        f"replayed by the successor: {successor.stats.replayed}"
    )
    await scenario.finish(findings)
    assert orphaned > 0
