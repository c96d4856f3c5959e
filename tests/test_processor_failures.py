"""Whatever a processor raises, and whatever is stored, a job ends its attempt properly."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest
import redis.asyncio as aioredis

from lazarus import Job, Queue, Worker

from .conftest import wait_until
from .faults import collect, on_count

MakeWorker = Callable[..., Worker]


class Custom(BaseException):
    """A BaseException that is not an Exception, as some libraries define."""


async def raise_custom(job: Job) -> None:
    raise Custom("custom base exception")


async def raise_generator_exit(job: Job) -> None:
    raise GeneratorExit("generator exit")


async def raise_cancelled(job: Job) -> None:
    # A CancelledError of the processor's own (from a task it awaited, say): not shutdown.
    raise asyncio.CancelledError("cancelled inside the processor")


def exit_in_thread(job: Job) -> None:
    raise SystemExit(3)


def interrupt_in_thread(job: Job) -> None:
    raise KeyboardInterrupt


@pytest.mark.parametrize(
    ("processor", "error_type"),
    [
        (raise_custom, "Custom"),
        (raise_generator_exit, "GeneratorExit"),
        (raise_cancelled, "CancelledError"),
        (exit_in_thread, "SystemExit"),
        (interrupt_in_thread, "KeyboardInterrupt"),
    ],
)
async def test_base_exception_from_a_processor_fails_the_attempt_and_retries_per_policy(
    queue: Queue,
    dlq: Queue,
    make_worker: MakeWorker,
    processor: Callable[[Job], Any],
    error_type: str,
) -> None:
    # Given a job with two attempts whose processor raises a BaseException
    job = await queue.add("n", {"x": 1}, attempts=2)
    worker = make_worker(processor, dead_letter_queue="jobs-dlq")
    retried = collect(worker, "retrying")
    dead = on_count(worker, "deadLettered", 1)

    # When the worker runs it
    await asyncio.wait_for(dead.wait(), 10)

    # Then each attempt failed (one retry), and the job was dead-lettered with the error
    [letter] = await dlq.get_dead_letter_jobs()
    assert letter.dead_letter is not None
    assert letter.dead_letter.original_job_id == job.id
    assert letter.dead_letter.reason == "attempts_exhausted"
    assert letter.dead_letter.error_type == error_type
    assert [a.error_type for a in letter.dead_letter.attempts] == [error_type, error_type]
    assert len(retried) == 1
    assert await queue.get_active_count() == 0


async def test_async_job_cut_short_by_close_is_back_in_waiting_at_once(
    queue: Queue, make_worker: MakeWorker
) -> None:
    # Given a job whose processor never finishes
    started = asyncio.Event()

    async def forever(job: Job) -> None:
        started.set()
        await asyncio.Event().wait()

    job = await queue.add("n", None, attempts=3)
    worker = make_worker(forever)
    await asyncio.wait_for(started.wait(), 10)

    # When the worker is closed with a short timeout
    await worker.close(timeout=0.1)

    # Then the job is waiting again, at once, with no attempt counted
    assert await queue.get_job_state(job.id) == "waiting"
    stored = await queue.get_job(job.id)
    assert stored is not None and stored.attempts_made == 0 and stored.attempts == []
    assert await queue.client.zscore(queue.keys.leases, job.id) is None


async def test_thread_job_cut_short_by_close_is_back_in_waiting_at_once(
    queue: Queue, make_worker: MakeWorker
) -> None:
    # Given a plain-function job blocked in its thread
    started, release = threading.Event(), threading.Event()

    def blocked(job: Job) -> None:
        started.set()
        release.wait(30)

    job = await queue.add("n", None)
    worker = make_worker(blocked)
    try:
        await asyncio.to_thread(started.wait, 10)

        # When the worker is closed with a short timeout
        await worker.close(timeout=0.1)

        # Then the job is waiting again at once (the thread itself cannot be stopped)
        assert await queue.get_job_state(job.id) == "waiting"
    finally:
        release.set()


async def _dead_letter_fields(raw: aioredis.Redis, dlq: Queue, dead_letter_id: str) -> Any:
    return await raw.hgetall(dlq.keys.job(dead_letter_id))


@pytest.mark.parametrize(("field", "value"), [("data", '{"to": "ada@'), ("opts", "{attempts")])
async def test_job_that_cannot_be_decoded_is_dead_lettered_and_the_worker_goes_on(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, raw: aioredis.Redis, field: str, value: str
) -> None:
    # Given a job whose stored payload (or options) is not JSON, and a good job behind it
    bad = await queue.add("bad", {"to": "ada@example.com"}, attempts=3)
    await raw.hset(queue.keys.job(bad.id), field, value)
    good = await queue.add("good", {"n": 1})
    ran: list[str] = []

    # When a worker runs
    worker = make_worker(lambda job: ran.append(job.name), dead_letter_queue="jobs-dlq")
    dead = collect(worker, "deadLettered")
    await wait_until(lambda: _state(queue, good.id, "completed"), message="the good job")
    await wait_until(lambda: _has(dead), message="the dead letter")

    # Then the bad job was dead-lettered as undecodable without running, bytes kept
    assert ran == ["good"]
    assert worker.running
    [(job, dead_letter_id)] = dead
    assert job.id == bad.id
    fields = await _dead_letter_fields(raw, dlq, dead_letter_id)
    assert fields["dlq:reason"] == "undecodable"
    assert fields["dlq:attemptsMade"] == "1"
    assert fields["dlq:errorType"] == "ValueError"
    assert "cannot be decoded" in fields["dlq:failedReason"]
    assert (fields["data"] if field == "data" else fields["dlq:originalOpts"]) == value
    assert await queue.get_job(bad.id) is None
    # and it can be read like any dead letter, its bytes as they were
    [listed] = (await dlq.search_dead_letters()).jobs
    assert listed.id == dead_letter_id
    assert listed.dead_letter is not None and listed.dead_letter.reason == "undecodable"
    if field == "data":
        assert listed.raw_data == value
        assert listed.original_data is None


async def test_job_that_cannot_be_decoded_fails_for_good_without_a_dead_letter_queue(
    queue: Queue, make_worker: MakeWorker, raw: aioredis.Redis
) -> None:
    bad = await queue.add("bad", None, attempts=5)
    await raw.hset(queue.keys.job(bad.id), "data", "not json")
    worker = make_worker(lambda job: None)
    failed = on_count(worker, "failed", 1)

    await asyncio.wait_for(failed.wait(), 10)

    assert await queue.get_job_state(bad.id) == "failed"
    assert await raw.hget(queue.keys.job(bad.id), "data") == "not json"
    assert await raw.hget(queue.keys.job(bad.id), "attemptsMade") == "1"


async def _state(queue: Queue, job_id: str, state: str) -> bool:
    return await queue.get_job_state(job_id) == state


async def _has(items: list[Any]) -> bool:
    return bool(items)
