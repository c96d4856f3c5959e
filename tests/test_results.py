"""job.wait_until_finished: a job's result (or failure) through the queue's events."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from lazarus import Job, JobFailedError, JobNotFoundError, Queue, QueueEvents, Worker

from .test_worker import on_count

MakeWorker = Callable[..., Worker]


async def double(job: Job) -> dict[str, int]:
    return {"n": job.data["n"] * 2}


async def refuse(job: Job) -> None:
    raise ValueError(f"refused {job.data['n']}")


async def test_waiting_returns_the_value_once_a_worker_completes_the_job(
    queue: Queue, make_worker: MakeWorker
) -> None:
    job = await queue.add("n", {"n": 21})
    waiting = asyncio.create_task(job.wait_until_finished(timeout=10))
    make_worker(double)

    assert await waiting == {"n": 42}


async def test_a_retried_job_is_waited_for_until_its_last_attempt(
    queue: Queue, make_worker: MakeWorker
) -> None:
    calls: list[int] = []

    async def flaky(job: Job) -> str:
        calls.append(1)
        if len(calls) < 2:
            raise ConnectionError("once")
        return "ok"

    job = await queue.add("n", attempts=2)
    waiting = asyncio.create_task(job.wait_until_finished(timeout=10))
    make_worker(flaky)

    assert await waiting == "ok"
    assert len(calls) == 2


@pytest.mark.parametrize("remove_on_complete", [False, True])
async def test_a_job_finished_before_the_wait_settles_at_once(
    queue: Queue, make_worker: MakeWorker, remove_on_complete: bool
) -> None:
    job = await queue.add("n", {"n": 2}, remove_on_complete=remove_on_complete)
    worker = make_worker(double)
    await asyncio.wait_for(on_count(worker, "completed", 1).wait(), 10)

    assert await job.wait_until_finished(timeout=10) == {"n": 4}


async def test_a_job_that_fails_for_good_raises_its_reason(
    queue: Queue, make_worker: MakeWorker
) -> None:
    job = await queue.add("n", {"n": 3})
    waiting = asyncio.create_task(job.wait_until_finished(timeout=10))
    make_worker(refuse)

    with pytest.raises(JobFailedError, match="refused 3") as caught:
        await waiting

    assert caught.value.failed_reason == "refused 3"
    assert caught.value.dead_letter_id is None


@pytest.mark.parametrize("wait_first", [True, False])
async def test_a_dead_lettered_job_raises_naming_its_dead_letter(
    queue: Queue, make_worker: MakeWorker, wait_first: bool
) -> None:
    job = await queue.add("n", {"n": 5})
    waiting = asyncio.create_task(job.wait_until_finished(timeout=10)) if wait_first else None
    worker = make_worker(refuse, dead_letter_queue="jobs-dlq")
    ids: list[str] = []
    worker.on("deadLettered", lambda j, dl_id: ids.append(dl_id))
    await asyncio.wait_for(on_count(worker, "deadLettered", 1).wait(), 10)

    with pytest.raises(JobFailedError) as caught:
        await (waiting or job.wait_until_finished(timeout=10))

    assert caught.value.failed_reason == "refused 5"
    assert caught.value.dead_letter_queue == "jobs-dlq"
    assert caught.value.dead_letter_id == ids[0]


async def test_waiting_past_the_timeout_raises_timeout_error(queue: Queue) -> None:
    job = await queue.add("n", {"n": 1})

    with pytest.raises(asyncio.TimeoutError):
        await job.wait_until_finished(timeout=0.2)


async def test_a_job_that_never_existed_raises_job_not_found(queue: Queue) -> None:
    job = await queue.add("n", {"n": 1})
    await queue.remove(job.id)

    with pytest.raises(JobNotFoundError):
        await job.wait_until_finished(timeout=5)


async def test_many_waiters_share_one_queue_events_reader(
    queue: Queue, make_worker: MakeWorker, redis_url: str, prefix: str
) -> None:
    jobs = await queue.add_bulk([{"name": "n", "data": {"n": i}} for i in range(20)])
    async with QueueEvents("jobs", connection=redis_url, prefix=prefix) as events:
        waiting = [asyncio.create_task(j.wait_until_finished(events, timeout=10)) for j in jobs]
        make_worker(double, concurrency=5)

        results = await asyncio.gather(*waiting)

        assert results == [{"n": 2 * i} for i in range(20)]
        assert not events._listeners.has("*")  # every waiter took its callback back
