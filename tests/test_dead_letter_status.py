"""A dead letter's status: set_dead_letter_status moves it between the store's status indexes,
keeps the counters, records every change in its timeline and guards rivals with ``expect``."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
import redis.asyncio as aioredis

from lazarus import (
    DeadLetterFilter,
    DeadLetterStatus,
    Job,
    JobNotFoundError,
    JobStateError,
    NotADeadLetterError,
    Queue,
    StatusChange,
    UnrecoverableError,
    Worker,
)

from .conftest import wait_until

MakeWorker = Callable[..., Worker]


async def reject(job: Job) -> None:
    raise UnrecoverableError("bad order")


async def fill(queue: Queue, dlq: Queue, make_worker: MakeWorker, count: int) -> list[str]:
    """``count`` dead letters in ``dlq``, dead-lettered by a real worker; their ids, oldest
    first."""
    await queue.add_bulk([{"name": "charge", "data": {"n": i}} for i in range(count)])
    worker = make_worker(reject, dead_letter_queue=dlq.name)

    async def all_there() -> bool:
        return await dlq.get_dead_letter_count() == count

    await wait_until(all_there, message=f"{count} dead letters")
    await worker.close()
    return [job.id for job in reversed(await dlq.get_dead_letter_jobs())]


async def test_a_status_change_moves_indexes_counts_and_records_the_timeline(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, raw: aioredis.Redis
) -> None:
    # Given three pending dead letters
    first, second, third = await fill(queue, dlq, make_worker, 3)

    # When an operator flags the second for a human
    changed = await dlq.set_dead_letter_status(
        second, DeadLetterStatus.MANUAL, actor="operator:ada", note="needs billing"
    )

    # Then it is manual, still live, counted under its new status, in arrival order
    assert changed is True
    assert await dlq.get_dead_letter_count() == 3
    assert await dlq.count_dead_letters(DeadLetterFilter(status="manual")) == 1
    assert await dlq.count_dead_letters(DeadLetterFilter(status="pending")) == 2
    stats = await dlq.get_dead_letter_stats()
    assert stats.by_status == {"pending": 2, "manual": 1}
    assert [j.id for j in await dlq.get_dead_letter_jobs()] == [third, second, first]
    page = await dlq.search_dead_letters(DeadLetterFilter(status="manual"))
    assert [j.id for j in page.jobs] == [second] and page.total == 1
    letter = await dlq.peek_dead_letter(second)
    assert letter is not None and letter.dead_letter is not None
    meta = letter.dead_letter
    assert meta.status == DeadLetterStatus.MANUAL
    [change] = meta.timeline
    assert isinstance(change, StatusChange)
    assert (change.from_, change.to, change.actor, change.note) == (
        "pending", "manual", "operator:ada", "needs billing",
    )  # fmt: skip
    assert change.at == meta.status_at and change.at >= meta.dead_lettered_at
    assert letter.data["_dlqMeta"]["timeline"][0]["to"] == "manual"
    # ... and the arrival score is kept: the manual index sorts it where it arrived
    pending_scores = dict(await raw.zrange(dlq.keys.dl_index("s", "pending"), 0, -1,
                                           withscores=True))  # fmt: skip
    manual_scores = dict(await raw.zrange(dlq.keys.dl_index("s", "manual"), 0, -1,
                                          withscores=True))  # fmt: skip
    assert pending_scores[first] < manual_scores[second] < pending_scores[third]


async def test_leaving_the_last_of_a_status_drops_it_from_the_distinct_statuses(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, raw: aioredis.Redis
) -> None:
    [only] = await fill(queue, dlq, make_worker, 1)

    await dlq.set_dead_letter_status(only, "archived", actor="policy", note="too old")

    assert await raw.zrange(dlq.keys.dl_values("s"), 0, -1) == ["archived"]
    assert await raw.hkeys(dlq.keys.dl_counts) == [
        "q4:jobsn6:chargee18:UnrecoverableErrorr13:unrecoverables8:archived"
    ]
    assert await dlq.get_dead_letter_count() == 0  # archived is not live
    assert await dlq.count_dead_letters() == 0  # nor counted without asking for it
    assert await dlq.count_dead_letters(DeadLetterFilter(status="archived")) == 1


async def test_expect_guards_the_change_and_only_one_of_many_rivals_wins(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    [dl_id] = await fill(queue, dlq, make_worker, 1)

    # When eight rivals move it out of pending at once
    results = await asyncio.gather(*(
        dlq.set_dead_letter_status(dl_id, "manual", actor=f"operator:o{i}", expect=["pending"])
        for i in range(8)
    ))  # fmt: skip

    # Then exactly one did, and the timeline says who
    assert sorted(results) == [False] * 7 + [True]
    winner = f"operator:o{results.index(True)}"
    letter = await dlq.peek_dead_letter(dl_id)
    assert letter is not None and letter.dead_letter is not None
    assert [(c.from_, c.to, c.actor) for c in letter.dead_letter.timeline] == [
        ("pending", "manual", winner)
    ]


async def test_the_same_status_again_records_a_note_without_moving(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    [dl_id] = await fill(queue, dlq, make_worker, 1)
    await dlq.set_dead_letter_status(dl_id, "archived", actor="operator:ada", note="spam")

    assert await dlq.set_dead_letter_status(dl_id, "archived", actor="operator:bob", note="yes")

    letter = await dlq.peek_dead_letter(dl_id)
    assert letter is not None and letter.dead_letter is not None
    assert [(c.from_, c.to, c.note) for c in letter.dead_letter.timeline] == [
        ("pending", "archived", "spam"), ("archived", "archived", "yes"),
    ]  # fmt: skip
    assert await dlq.count_dead_letters(DeadLetterFilter(status="archived")) == 1


async def test_a_status_change_emits_status_changed(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, raw: aioredis.Redis
) -> None:
    [dl_id] = await fill(queue, dlq, make_worker, 1)

    await dlq.set_dead_letter_status(dl_id, "manual", actor="redriver")

    entries = await raw.xrange(dlq.keys.events)
    changes = [fields for _, fields in entries if fields["event"] == "statusChanged"]
    assert changes == [{
        "event": "statusChanged", "jobId": dl_id, "from": "pending", "to": "manual",
        "actor": "redriver", "note": "",
    }]  # fmt: skip


async def test_missing_and_non_dead_letters_raise(dlq: Queue, raw: aioredis.Redis) -> None:
    with pytest.raises(JobNotFoundError):
        await dlq.set_dead_letter_status("nope", "manual", actor="policy")
    plain = await dlq.add("plain", {"x": 1})
    with pytest.raises(NotADeadLetterError):
        await dlq.set_dead_letter_status(plain.id, "manual", actor="policy")
    assert await raw.hget(dlq.keys.job(plain.id), "dlq:timeline") is None


async def test_a_dead_letter_a_worker_of_the_dlq_holds_cannot_change_status(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    [dl_id] = await fill(queue, dlq, make_worker, 1)
    holding, release = asyncio.Event(), asyncio.Event()

    async def hold(job: Job) -> None:
        holding.set()
        await release.wait()

    make_worker(hold, dlq.name)
    await asyncio.wait_for(holding.wait(), 10)
    try:
        with pytest.raises(JobStateError):
            await dlq.set_dead_letter_status(dl_id, "manual", actor="policy")
    finally:
        release.set()


@pytest.mark.parametrize(
    ("arguments", "error", "field"),
    [
        ({"status": "lost"}, ValueError, "status"),
        ({"status": 3}, TypeError, "status"),
        ({"actor": "ada"}, ValueError, "actor"),
        ({"actor": "operator:"}, ValueError, "actor"),
        ({"actor": "operator:a b"}, ValueError, "actor"),
        ({"actor": None}, TypeError, "actor"),
        ({"note": ""}, ValueError, "note"),
        ({"note": "x" * 2001}, ValueError, "note"),
        ({"note": 5}, TypeError, "note"),
        ({"expect": "pending"}, TypeError, "expect"),
        ({"expect": []}, ValueError, "expect"),
        ({"expect": ["gone"]}, ValueError, "expect"),
        ({"dead_letter_id": "a b"}, ValueError, "dead_letter_id"),
    ],
)
async def test_bad_arguments_raise_naming_the_field_before_writing(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, arguments: dict[str, Any],
    error: type[Exception], field: str,
) -> None:  # fmt: skip
    [dl_id] = await fill(queue, dlq, make_worker, 1)
    call: dict[str, Any] = {"dead_letter_id": dl_id, "status": "manual", "actor": "policy"}
    call.update(arguments)

    with pytest.raises(error, match=field):
        await dlq.set_dead_letter_status(**call)

    letter = await dlq.peek_dead_letter(dl_id)
    assert letter is not None and letter.dead_letter is not None
    assert (letter.dead_letter.status, letter.dead_letter.timeline) == ("pending", [])
