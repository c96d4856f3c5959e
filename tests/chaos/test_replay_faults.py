"""Replayed jobs under worker kills: whichever worker runs a replay, and whatever dead letter
queue that worker has (another one, or none), the replay ends in one place only: completed
(its dead letter resolved), or back in its own dead letter."""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter

import pytest

from lazarus import DeadLetterFilter, Queue

from .audit import all_dead_letters
from .dead_letters import dead_letter_each
from .harness import Scenario, wait_for
from .pool import RunLog
from .report import Findings

pytestmark = pytest.mark.chaos

HOME, OTHER = "home-dlq", "other-dlq"
LETTERS = 400


async def _settled(home: Queue) -> bool:
    """Whether no dead letter of ``home`` waits for its replay any more."""
    return await home.count_dead_letters(DeadLetterFilter(status="processing")) == 0


@pytest.mark.timeout(240)
async def test_replays_killed_under_workers_of_another_dlq_or_none_go_home(
    scenario: Scenario,
) -> None:
    # Given 400 dead letters in "home-dlq", each replayed into "src" (one in four still
    # failing for good, the others taking 100 ms), and four workers on "src" with no stall
    # allowed: half with "other-dlq" as their dead letter queue, half with none
    server = scenario.redis()
    source = scenario.queue(server, "src")
    letters = await dead_letter_each(server, source, [{"i": i} for i in range(LETTERS)], HOME)
    home = scenario.queue(server, HOME)
    pool = scenario.workers(server, "src", dlq=OTHER, concurrency=8, lock_duration=1000,
                            stalled_interval=500, max_stalled_count=0,
                            shutdown_timeout=0.2)  # fmt: skip
    for n in range(4):
        pool.spawn(dlq=OTHER if n % 2 else None)
    replayed = {}
    for dl_id, i in letters.items():
        data = {"i": i, "ms": 100, **({"fail": 99} if i % 4 == 0 else {})}
        replayed[await home.replay_dead_letter(dl_id, data=data)] = dl_id

    # When, every 250 ms for 8 s, a worker is SIGKILLed (the replays it runs stall, and the
    # sweep of a worker of the other dead letter queue, or of none, takes them) and replaced
    rng = random.Random(5)
    deadline = time.monotonic() + 8
    while time.monotonic() < deadline:
        await asyncio.sleep(0.25)  # the storm's own pace
        pool.kill(rng.choice(pool.live))
        pool.spawn(dlq=OTHER if rng.random() < 0.5 else None)

    # Then every replay ends in one place: completed with its dead letter resolved, or back
    # in its own dead letter (pending); none in "other-dlq", none failed in "src", none left
    # in "src" or half-moved
    settled = await wait_for(lambda: _settled(home), 45)
    await scenario.stop_workers()
    raw = scenario.raw(server)
    other = scenario.queue(server, OTHER)
    completed = {str(j) for j in await raw.zrange(source.keys.completed, 0, -1)}
    statuses: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    places: Counter[str] = Counter()
    for letter in await all_dead_letters(home):
        assert letter.dead_letter is not None
        statuses[letter.dead_letter.status] += 1
        if letter.dead_letter.status == "pending":
            places[letter.id] += 1
            reasons[letter.dead_letter.reason] += 1
    for job_id in completed:
        places[replayed[job_id]] += 1
    findings = Findings("replays killed under workers of another dead letter queue, or none",
                        LETTERS, f"{pool.killed} SIGKILLs of 4 workers on the replays' queue, "
                        "1 per 250 ms")  # fmt: skip
    findings.spurious_stalls = None
    findings.lost = sorted(dl for dl in letters if places[dl] == 0)
    findings.duplicated = sorted(dl for dl in letters if places[dl] > 1)
    runs = RunLog.read(scenario.tmp / "runs-src")
    findings.broken["completed twice"] = sorted(
        j for j in replayed if runs.events.get(j, Counter())["C"] > 1
    )
    findings.broken["dead letters of another dead letter queue"] = [
        letter.id for letter in await all_dead_letters(other)
    ]
    findings.broken["failed in the replays' queue"] = [
        str(j) for j in await raw.zrange(source.keys.failed, 0, -1)
    ]
    findings.broken["left in the replays' queue"] = [
        *await raw.lrange(source.keys.wait, 0, -1),
        *await raw.lrange(source.keys.active, 0, -1),
    ]
    findings.half_moved = [str(m) for m in await raw.hkeys(source.keys.moves)]
    findings.notes.append(
        f"completed {len(completed)}, back in their dead letter {statuses['pending']} "
        f"({reasons['stalled']} stalled, {reasons['attempts_exhausted']} failing for good); "
        f"statuses {dict(statuses)}; settled: {settled}"
    )
    await scenario.finish(findings)
