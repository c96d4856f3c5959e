"""How failures enter the dead letter queue: a worker's ``non_retryable`` exceptions skip the
remaining attempts (reason ``unrecoverable``), and a job's ``on_exhaustion`` sends a terminal
failure to the dead letter queue, the ``failed`` set, or nowhere (``discard``, with an
event)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
import redis.asyncio as aioredis

from lazarus import Job, Queue, Worker

from .conftest import wait_until

MakeWorker = Callable[..., Worker]


class BillingTimeout(Exception):
    pass


class CardRejected(ValueError):
    pass


async def held(dlq: Queue, count: int) -> bool:
    return await dlq.get_dead_letter_count() == count


@pytest.mark.parametrize(
    ("rules", "error"),
    [
        ([CardRejected], CardRejected),
        ([ValueError], CardRejected),  # a subclass matches
        (["*Timeout"], BillingTimeout),
        ([f"{__name__}.Billing*"], BillingTimeout),
        (["ValueError"], CardRejected),  # an ancestor's name matches
    ],
)
async def test_a_non_retryable_error_is_dead_lettered_at_once_as_unrecoverable(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, rules: list[Any], error: type
) -> None:
    await queue.add("charge", {"n": 1}, attempts=5)

    async def fail(job: Job) -> None:
        raise error("no")

    make_worker(fail, dead_letter_queue=dlq.name, non_retryable=rules)
    await wait_until(lambda: held(dlq, 1), message="dead-lettered")

    [letter] = await dlq.get_dead_letter_jobs()
    assert letter.dead_letter is not None
    assert (letter.dead_letter.reason, letter.dead_letter.attempts_made) == ("unrecoverable", 1)


async def test_an_error_no_rule_matches_is_retried(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    await queue.add("charge", {"n": 1}, attempts=3)

    async def fail(job: Job) -> None:
        raise KeyError("no")

    make_worker(fail, dead_letter_queue=dlq.name, non_retryable=[ValueError, "*Timeout"])
    await wait_until(lambda: held(dlq, 1), message="dead-lettered")

    [letter] = await dlq.get_dead_letter_jobs()
    assert letter.dead_letter is not None
    assert (letter.dead_letter.reason, letter.dead_letter.attempts_made) == (
        "attempts_exhausted", 3,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("value", "error"),
    [("ValueError", TypeError), ([3], TypeError), ([""], ValueError), ([int], TypeError)],
)
def test_bad_non_retryable_is_refused_naming_the_field(value: Any, error: type) -> None:
    with pytest.raises(error, match="non_retryable"):
        Worker("jobs", lambda job: None, non_retryable=value, autorun=False)


async def always_fail(job: Job) -> None:
    raise RuntimeError("down")


async def test_on_exhaustion_fail_skips_the_dead_letter_queue(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    job = await queue.add("charge", {"n": 1}, on_exhaustion="fail")
    make_worker(always_fail, dead_letter_queue=dlq.name)

    async def failed() -> bool:
        return await queue.get_job_state(job.id) == "failed"

    await wait_until(failed, message="failed")
    assert await dlq.get_dead_letter_count() == 0


async def test_on_exhaustion_discard_removes_the_job_with_an_event(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, raw: aioredis.Redis
) -> None:
    job = await queue.add("charge", {"n": 1}, attempts=2, on_exhaustion="discard")
    worker = make_worker(always_fail, dead_letter_queue=dlq.name)
    discarded = asyncio.Event()
    worker.on("discarded", lambda j, error: discarded.set())

    await asyncio.wait_for(discarded.wait(), 10)

    assert await queue.get_job_state(job.id) == "unknown"
    assert await dlq.get_dead_letter_count() == 0 and await queue.get_failed_count() == 0
    events = [f for _, f in await raw.xrange(queue.keys.events) if f["event"] == "discarded"]
    assert events == [
        {"event": "discarded", "jobId": job.id, "failedReason": "down", "attemptsMade": "2"}
    ]


async def test_a_discarded_job_takes_its_logs_and_deduplication_id_with_it(
    queue: Queue, make_worker: MakeWorker, raw: aioredis.Redis
) -> None:
    # Given a job that logs, holds a deduplication id, and is discarded when it fails
    async def log_and_fail(job: Job) -> None:
        await job.log("calling the bank")
        raise RuntimeError("down")

    job = await queue.add("charge", on_exhaustion="discard", deduplication={"id": "order-7"})
    worker = make_worker(log_and_fail)
    discarded = asyncio.Event()
    worker.on("discarded", lambda j, error: discarded.set())

    # When it is discarded
    await asyncio.wait_for(discarded.wait(), 10)
    await worker.close()

    # Then nothing of it is left, and its deduplication id is free for a new job
    gone = [queue.keys.job(job.id), queue.keys.logs(job.id), queue.keys.dedup("order-7")]
    assert await raw.exists(*gone) == 0
    again = await queue.add("charge", deduplication={"id": "order-7"})
    assert again.id != job.id and await queue.get_job_state(again.id) == "waiting"


async def test_on_exhaustion_dead_letter_is_the_default_and_is_stored(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    job = await queue.add("charge", {"n": 1}, on_exhaustion="dead_letter")
    stored = await queue.get_job(job.id)
    assert stored is not None and stored.opts.on_exhaustion == "dead_letter"
    make_worker(always_fail, dead_letter_queue=dlq.name)
    await wait_until(lambda: held(dlq, 1), message="dead-lettered")


async def test_bad_on_exhaustion_is_refused_before_writing(queue: Queue) -> None:
    with pytest.raises(ValueError, match="on_exhaustion"):
        await queue.add("charge", {"n": 1}, on_exhaustion="drop")
    assert await queue.get_waiting_count() == 0
