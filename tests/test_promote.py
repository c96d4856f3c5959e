"""Running delayed jobs now by hand: Queue.promote_job (promote_job.lua) and
Queue.promote_jobs (promote_jobs.lua)."""

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
        queue.add("n", None, delay=60_000)
        assert queue.promote_jobs() == 1
        assert queue.get_job_counts()["delayed"] == 0


# -- every delayed job at once --------------------------------------------------------------


async def test_promote_jobs_readies_every_delayed_job_soonest_due_first(
    queue: Queue, make_worker: Any, raw: aioredis.Redis
) -> None:
    # Given five jobs delayed by one to five hours, added latest first, one with a priority
    delays = {"e": 5, "d": 4, "c": 3, "b": 2, "a": 1}
    for job_id, hours in delays.items():
        await queue.add("n", None, job_id=job_id, delay=hours * 3_600_000,
                        priority=3 if job_id == "c" else 0)  # fmt: skip
    progress: list[int] = []

    # When they are promoted, two per call
    promoted = await queue.promote_jobs(batch_size=2, on_progress=progress.append)

    # Then all five are ready, with no delay left, after three calls; the jobs without a
    # priority wait in the order their delays would have ended, and run in it
    assert promoted == 5
    assert progress == [2, 4, 5]
    assert await raw.zcard(queue.keys.delayed) == 0
    assert await raw.lrange(queue.keys.wait, 0, -1) == ["e", "d", "b", "a"]  # the tail runs first
    assert await queue.get_job_state("c") == "prioritized"
    assert {await raw.hget(queue.keys.job(i), "delay") for i in delays} == {"0"}
    promotions = [e["jobId"] for e in await events(raw, queue) if e["event"] == "promoted"]
    assert promotions == ["a", "b", "c", "d", "e"]
    ran: list[str] = []

    async def record(j: Job) -> None:
        ran.append(j.id)

    make_worker(record)

    async def all_ran() -> bool:
        return len(ran) == 5

    await wait_until(all_ran)
    assert ran == ["a", "b", "d", "e", "c"]  # jobs without a priority run before the others


async def test_promote_jobs_takes_no_more_than_were_delayed_when_it_began(
    queue: Queue, raw: aioredis.Redis
) -> None:
    # Given three jobs delayed by an hour, and more jobs due sooner becoming delayed while
    # the promotion runs (as a rate limit's postponements would, over and over)
    for job_id in "abc":
        await queue.add("n", None, job_id=job_id, delay=3_600_000)
    added: list[str] = []

    async def more_delayed(done: int) -> None:
        job = await queue.add("n", None, job_id=f"new{done}", delay=60_000)
        added.append(job.id)

    # When every delayed job is promoted, one per call
    promoted = await queue.promote_jobs(batch_size=1, on_progress=more_delayed)

    # Then three were promoted, the promotion ended, and what it did not take stays delayed
    assert promoted == 3
    delayed = await raw.zrange(queue.keys.delayed, 0, -1)
    waiting = await raw.lrange(queue.keys.wait, 0, -1)
    assert len(delayed) == 3 and len(waiting) == 3
    assert set(delayed) | set(waiting) == {"a", "b", "c", *added}


async def test_promote_jobs_drops_the_ids_of_jobs_gone_and_counts_only_jobs(
    queue: Queue, raw: aioredis.Redis
) -> None:
    # Given a delayed job, and a delayed id whose job is gone
    await queue.add("n", None, job_id="real", delay=60_000)
    await raw.zadd(queue.keys.delayed, {"ghost": 1})

    # When every delayed job is promoted
    promoted = await queue.promote_jobs()

    # Then the job was promoted, and the id of the one gone dropped without a trace
    assert promoted == 1
    assert await raw.lrange(queue.keys.wait, 0, -1) == ["real"]
    assert await raw.zcard(queue.keys.delayed) == 0
    assert await raw.exists(queue.keys.job("ghost")) == 0


async def test_promote_jobs_dry_run_counts_and_bad_options_write_nothing(
    queue: Queue, raw: aioredis.Redis
) -> None:
    for _ in range(3):
        await queue.add("n", None, delay=60_000)
    before = await raw.xlen(queue.keys.events)

    assert await queue.promote_jobs(dry_run=True) == 3
    with pytest.raises(ValueError, match="batch_size"):
        await queue.promote_jobs(batch_size=0)
    with pytest.raises(TypeError, match="on_progress"):
        await queue.promote_jobs(on_progress="no")  # type: ignore[arg-type]

    assert await raw.zcard(queue.keys.delayed) == 3
    assert await raw.xlen(queue.keys.events) == before
