"""Retrying failed jobs by hand: Queue.retry_job and Queue.retry_jobs (retry_failed_jobs.lua)."""

from __future__ import annotations

from typing import Any

import pytest
import redis.asyncio as aioredis

from lazarus import Job, JobNotFoundError, JobStateError, Queue
from lazarus._scripts import load
from tests.conftest import wait_until


async def fail_jobs(queue: Queue, make_worker: Any, count: int, **options: Any) -> list[str]:
    """``count`` jobs failed for good (no dead letter queue); the worker is closed after."""
    jobs = await queue.add_bulk(
        [{"name": "n", "data": {"i": i}, "attempts": 2, **options} for i in range(count)]
    )

    async def boom(job: Job) -> None:
        raise RuntimeError(f"boom {job.data['i']}")

    worker = make_worker(boom)

    async def all_failed() -> bool:
        return await queue.get_failed_count() == count

    await wait_until(all_failed)
    await worker.close()
    return [job.id for job in jobs]


async def test_retry_job_moves_a_failed_job_to_waiting_with_its_attempts_afresh(
    queue: Queue, make_worker: Any, raw: aioredis.Redis
) -> None:
    # Given a job that failed both its attempts
    (job_id,) = await fail_jobs(queue, make_worker, 1)
    # When it is retried
    await queue.retry_job(job_id)
    # Then it waits again, with no attempts made and its failure history kept
    assert await queue.get_job_state(job_id) == "waiting"
    assert await raw.zscore(queue.keys.failed, job_id) is None
    fields = await raw.hgetall(queue.keys.job(job_id))
    assert fields["attemptsMade"] == "0"
    assert "failedReason" not in fields and "finishedOn" not in fields
    job = await queue.get_job(job_id)
    assert job is not None and [a.error for a in job.attempts] == ["boom 0", "boom 0"]
    events = [e["event"] for _, e in await raw.xrange(queue.keys.events)]
    assert events[-2:] == ["retried", "waiting"]


async def test_a_retried_job_runs_its_attempts_again(queue: Queue, make_worker: Any) -> None:
    (job_id,) = await fail_jobs(queue, make_worker, 1)
    await queue.retry_job(job_id)
    runs: list[int] = []

    async def count_then_succeed(job: Job) -> str:
        runs.append(job.attempts_made)
        if len(runs) == 1:
            raise RuntimeError("once more")
        return "ok"

    make_worker(count_then_succeed)

    async def completed() -> bool:
        return await queue.get_job_state(job_id) == "completed"

    await wait_until(completed)
    assert runs == [0, 1]


async def test_retry_job_keeps_a_prioritized_job_prioritized(
    queue: Queue, make_worker: Any
) -> None:
    (job_id,) = await fail_jobs(queue, make_worker, 1, priority=3)
    await queue.retry_job(job_id)
    assert await queue.get_job_state(job_id) == "prioritized"


async def test_retry_job_of_a_missing_job_raises_job_not_found(queue: Queue) -> None:
    with pytest.raises(JobNotFoundError, match="nope"):
        await queue.retry_job("nope")


async def test_retry_job_of_a_job_that_is_not_failed_raises_job_state(queue: Queue) -> None:
    job = await queue.add("n", {})
    with pytest.raises(JobStateError):
        await queue.retry_job(job.id)
    assert await queue.get_job_state(job.id) == "waiting"


async def test_retry_job_checks_the_id_before_anything_is_written(queue: Queue) -> None:
    with pytest.raises(ValueError, match="job_id"):
        await queue.retry_job("")


async def test_retry_jobs_retries_every_failed_job_batch_by_batch(
    queue: Queue, make_worker: Any
) -> None:
    # Given 7 failed jobs
    ids = await fail_jobs(queue, make_worker, 7)
    progress: list[int] = []
    # When a dry run counts them, then a bulk retry in batches of 3 retries them
    assert await queue.retry_jobs(dry_run=True) == 7
    assert await queue.get_failed_count() == 7
    retried = await queue.retry_jobs(batch_size=3, on_progress=progress.append)
    # Then all 7 wait again
    assert retried == 7
    assert progress == [3, 6, 7]
    assert await queue.get_failed_count() == 0
    assert sorted(j.id for j in await queue.get_waiting()) == sorted(ids)


async def test_retry_jobs_skips_ids_whose_job_is_gone(
    queue: Queue, make_worker: Any, raw: aioredis.Redis
) -> None:
    ids = await fail_jobs(queue, make_worker, 3)
    await raw.delete(queue.keys.job(ids[0]))  # deleted by hand: its id stays in failed
    assert await queue.retry_jobs(batch_size=1) == 2
    assert await raw.zcard(queue.keys.failed) == 0


async def test_retry_jobs_leaves_jobs_that_failed_after_it_began(
    queue: Queue, raw: aioredis.Redis
) -> None:
    # Given a failed entry dated in the future (a job that fails while the bulk runs)
    job = await queue.add("n", {})
    await raw.lrem(queue.keys.wait, 0, job.id)
    await raw.zadd(queue.keys.failed, {job.id: 2**50})
    # When a bulk retry runs, then it is not taken
    assert await queue.retry_jobs() == 0
    assert await raw.zscore(queue.keys.failed, job.id) == 2**50


async def test_a_batch_larger_than_a_call_can_retry_goes_over_several_calls(
    queue: Queue, raw: aioredis.Redis
) -> None:
    # Given 5,000 failed jobs (written as a worker leaves them)
    jobs = await queue.add_bulk([{"name": "n", "data": {"i": i}} for i in range(5000)])
    await raw.delete(queue.keys.wait)
    await raw.zadd(queue.keys.failed, {job.id: 1000 + i for i, job in enumerate(jobs)})

    # When they are retried in one batch of 5,000
    progress: list[int] = []
    retried = await queue.retry_jobs(batch_size=5000, on_progress=progress.append)

    # Then every one waits again, retried once, over several calls each within its budget
    assert retried == 5000 and progress[-1] == 5000
    assert progress[0] < 5000 and progress == sorted(set(progress))
    assert await raw.zcard(queue.keys.failed) == 0
    assert sorted(await raw.lrange(queue.keys.wait, 0, -1)) == sorted(j.id for j in jobs)


async def test_retry_jobs_refuses_other_states_and_bad_batches(queue: Queue) -> None:
    with pytest.raises(ValueError, match="state"):
        await queue.retry_jobs("completed")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="batch_size"):
        await queue.retry_jobs(batch_size=0)


def test_the_script_is_listed_with_its_header() -> None:
    script = load("retry_failed_jobs")
    assert script.header_keys[11] == "failed"


async def test_retry_jobs_refuses_a_progress_callback_that_is_not_callable_before_a_write(
    queue: Queue, make_worker: Any
) -> None:
    # Given three failed jobs
    await fail_jobs(queue, make_worker, 3)

    # When they are retried with a progress callback that cannot be called
    with pytest.raises(TypeError, match="on_progress"):
        await queue.retry_jobs(batch_size=1, on_progress=5)  # type: ignore[arg-type]

    # Then none of them moved
    assert await queue.get_failed_count() == 3
    assert await queue.get_waiting_count() == 0
