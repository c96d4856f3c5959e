"""Running a delayed job now by hand: Queue.promote_job (promote_job.lua)."""

from __future__ import annotations

from typing import Any

import pytest
import redis.asyncio as aioredis

from lazarus import Job, JobNotFoundError, JobStateError, Queue
from lazarus.sync import Queue as SyncQueue
from tests.conftest import wait_until


async def events(raw: aioredis.Redis, queue: Queue) -> list[dict[str, str]]:
    return [fields for _, fields in await raw.xrange(queue.keys.events)]


async def test_a_promoted_job_is_ready_at_once_and_runs(
    queue: Queue, make_worker: Any, raw: aioredis.Redis
) -> None:
    # Given a job delayed by an hour, and a worker
    job = await queue.add("n", {"x": 1}, delay=3_600_000)
    ran: list[str] = []

    async def record(j: Job) -> None:
        ran.append(j.id)

    make_worker(record)

    # When it is promoted
    state = await queue.promote_job(job.id)

    # Then it waited at once with no delay left, and the worker ran it
    assert state == "waiting"
    assert await raw.zscore(queue.keys.delayed, job.id) is None
    assert await raw.hget(queue.keys.job(job.id), "delay") == "0"
    assert [e["event"] for e in await events(raw, queue) if e.get("jobId") == job.id][1:3] == [
        "promoted",
        "waiting",
    ]

    async def completed() -> bool:
        return await queue.get_job_state(job.id) == "completed"

    await wait_until(completed)
    assert ran == [job.id]


async def test_a_promoted_job_with_a_priority_goes_by_its_priority(queue: Queue) -> None:
    job = await queue.add("n", None, delay=60_000, priority=3)

    assert await queue.promote_job(job.id) == "prioritized"
    assert await queue.get_job_state(job.id) == "prioritized"


async def test_a_job_waiting_out_a_retry_backoff_runs_its_next_attempt_now(
    queue: Queue, make_worker: Any
) -> None:
    # Given a job whose first attempt failed, with an hour's backoff before the next
    job = await queue.add("n", None, attempts=2, backoff={"type": "fixed", "delay": 3_600_000})
    attempts: list[int] = []

    async def fail_first(j: Job) -> str:
        attempts.append(j.attempts_made)
        if len(attempts) == 1:
            raise RuntimeError("first")
        return "second"

    make_worker(fail_first)

    async def delayed() -> bool:
        return await queue.get_job_state(job.id) == "delayed"

    await wait_until(delayed)

    # When it is promoted
    await queue.promote_job(job.id)

    # Then its second attempt runs and completes
    async def completed() -> bool:
        return await queue.get_job_state(job.id) == "completed"

    await wait_until(completed)
    assert attempts == [0, 1]


async def test_a_job_that_is_not_delayed_is_refused_and_nothing_is_written(
    queue: Queue, raw: aioredis.Redis
) -> None:
    await queue.pause()
    job = await queue.add("n")
    before = (await raw.xlen(queue.keys.events), await raw.hgetall(queue.keys.job(job.id)))

    with pytest.raises(JobStateError, match=job.id):
        await queue.promote_job(job.id)
    with pytest.raises(JobNotFoundError, match="nope"):
        await queue.promote_job("nope")
    with pytest.raises(ValueError, match="job_id"):
        await queue.promote_job("")

    assert (await raw.xlen(queue.keys.events), await raw.hgetall(queue.keys.job(job.id))) == before
    assert await queue.get_job_state(job.id) == "paused"


def test_the_sync_queue_promotes_too(redis_url: str, prefix: str) -> None:
    with SyncQueue("sync-promote", connection=redis_url, prefix=prefix) as queue:
        job = queue.add("n", None, delay=60_000)
        assert queue.promote_job(job.id) == "waiting"
        assert queue.get_job_state(job.id) == "waiting"
