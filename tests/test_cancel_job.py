"""Queue.cancel_job: a running job's worker stops its processor; a waiting one is put first
in line and failed without running; either way the job fails with JobCancelledError, not
retried, where the job's failures go."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis.asyncio as aioredis

from lazarus import Job, JobCancelledError, JobNotFoundError, JobStateError, Queue
from lazarus.sync import Queue as SyncQueue
from tests.conftest import dead_letter_of, job_snapshot, wait_for_state, wait_until


async def test_a_running_job_is_stopped_and_dead_lettered_as_cancelled(
    queue: Queue, dlq: Queue, make_worker: Any
) -> None:
    started, stopped = asyncio.Event(), asyncio.Event()
    ran: list[str] = []

    async def process(job: Job) -> str:
        ran.append(job.id)
        if job.name == "forever":
            started.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                stopped.set()
                raise
        return "done"

    # The default lease of 30 s, renewed every 15 s: the worker looks for cancelled running
    # jobs every 0.5 s and renews at once when there are some
    make_worker(process, concurrency=1, dead_letter_queue=dlq.name)
    job = await queue.add("forever", {"n": 1}, attempts=5)
    await asyncio.wait_for(started.wait(), 10)

    assert await queue.cancel_job(job.id, "the customer withdrew") == "active"

    await asyncio.wait_for(stopped.wait(), 5)
    letter = await dead_letter_of(dlq, job.id)
    assert letter.dead_letter is not None
    assert letter.dead_letter.reason == "cancelled"
    assert letter.dead_letter.error_type == "JobCancelledError"
    assert letter.dead_letter.failed_reason == "the customer withdrew"
    assert len(letter.dead_letter.attempts) == 1  # not retried, whatever its attempts
    # The slot is free again: the next job runs
    after = await queue.add("quick", None)
    await wait_for_state(queue, after.id, "completed")
    assert ran == [job.id, after.id]


async def test_a_waiting_job_goes_first_and_fails_without_running(
    queue: Queue, make_worker: Any, raw: aioredis.Redis
) -> None:
    jobs = [await queue.add("n", {"i": i}) for i in range(3)]
    later = await queue.add("n", {"i": 9}, delay=3_600_000)
    top = await queue.add("n", {"i": 8}, priority=1)

    assert await queue.cancel_job(jobs[2].id, "duplicate order") == "waiting"
    assert await queue.cancel_job(later.id) == "waiting"
    assert await queue.cancel_job(top.id) == "waiting"
    # First in line (the tail, where claims take from), the last cancelled first
    assert await raw.lrange(queue.keys.wait, -3, -1) == [jobs[2].id, later.id, top.id]
    assert await raw.zcard(queue.keys.delayed) == await raw.zcard(queue.keys.prioritized) == 0

    ran: list[str] = []

    async def process(job: Job) -> None:
        ran.append(job.id)

    make_worker(process, concurrency=1)
    for cancelled in (jobs[2], later, top):
        await wait_for_state(queue, cancelled.id, "failed")
    for kept in jobs[:2]:
        await wait_for_state(queue, kept.id, "completed")
    assert ran == [jobs[0].id, jobs[1].id]
    failed = await queue.get_job(later.id)
    assert failed is not None
    assert (failed.error_type, failed.failed_reason) == ("JobCancelledError", "cancelled")
    assert failed.attempts_made == 1


async def test_a_retried_cancelled_job_runs(queue: Queue, make_worker: Any) -> None:
    job = await queue.add("n", None)
    await queue.cancel_job(job.id)
    ran: list[str] = []

    async def process(j: Job) -> None:
        ran.append(j.id)

    make_worker(process)
    await wait_for_state(queue, job.id, "failed")

    await queue.retry_job(job.id)

    await wait_for_state(queue, job.id, "completed")
    assert ran == [job.id]


async def test_a_cancelled_replay_goes_back_to_its_dead_letter(
    queue: Queue, dlq: Queue, make_worker: Any
) -> None:
    job = await queue.add("n", {"fail": True})

    async def process(j: Job) -> None:
        if j.data["fail"]:
            raise RuntimeError("boom")

    worker = make_worker(process, dead_letter_queue=dlq.name)
    letter = await dead_letter_of(dlq, job.id)
    await worker.close()
    replay_id = await dlq.replay_dead_letter(letter.id, data={"fail": False})

    await queue.cancel_job(replay_id, "not now")
    make_worker(process, dead_letter_queue=dlq.name)

    async def back() -> bool:
        again = await dlq.get_job(letter.id)
        return (
            again is not None
            and again.dead_letter is not None
            and (again.dead_letter.status == "pending" and again.dead_letter.replay_count == 1)
        )

    await wait_until(back)
    again = await dlq.get_job(letter.id)
    assert again is not None and again.dead_letter is not None
    assert [a.error_type for a in again.dead_letter.attempts] == [
        "RuntimeError", "JobCancelledError",
    ]  # fmt: skip
    assert await dlq.get_dead_letter_count() == 1


async def test_a_job_deep_inside_a_long_wait_list_is_found(
    queue: Queue, raw: aioredis.Redis
) -> None:
    await queue.add_bulk({"name": "n", "job_id": f"j{i}"} for i in range(25_000))

    assert await queue.cancel_job("j12000") == "waiting"

    assert await raw.lindex(queue.keys.wait, -1) == "j12000"
    assert (await queue.get_job_counts())["waiting"] == 25_000


async def test_a_paused_queue_s_job_is_told_paused(queue: Queue) -> None:
    job = await queue.add("n", None)
    await queue.pause()

    assert await queue.cancel_job(job.id) == "paused"


async def test_ended_missing_or_bad_requests_write_nothing(
    queue: Queue, dlq: Queue, make_worker: Any, raw: aioredis.Redis
) -> None:
    done = await queue.add("ok", None)
    bad = await queue.add("bad", None, on_exhaustion="fail")
    letter_source = await queue.add("dead", None)

    async def process(job: Job) -> None:
        if job.name != "ok":
            raise RuntimeError("no")

    make_worker(process, dead_letter_queue=dlq.name)
    await wait_for_state(queue, done.id, "completed")
    await wait_for_state(queue, bad.id, "failed")
    letter = await dead_letter_of(dlq, letter_source.id)

    for target, job_id in ((queue, done.id), (queue, bad.id), (dlq, letter.id)):
        before = await job_snapshot(raw, target, job_id)
        with pytest.raises(JobStateError, match="it has ended"):
            await target.cancel_job(job_id)
        assert await job_snapshot(raw, target, job_id) == before
    with pytest.raises(JobNotFoundError):
        await queue.cancel_job("nope")
    assert not await raw.exists(queue.keys.job("nope"))

    waiting = await queue.add("n", None, delay=60_000)
    before = await job_snapshot(raw, queue, waiting.id)
    bad = [("", ValueError), (None, TypeError), ("x" * 5000, ValueError), ("é" * 2100, ValueError)]
    for reason, kind in bad:  # "é" * 2100: 2,102 characters, 4,202 bytes of JSON
        with pytest.raises(kind, match="reason"):
            await queue.cancel_job(waiting.id, reason)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="job_id"):
        await queue.cancel_job("")
    assert await job_snapshot(raw, queue, waiting.id) == before


async def test_the_sync_queue_cancels(redis_url: str, prefix: str, queue: Queue) -> None:
    job = await queue.add("n", None, delay=60_000)
    sync = SyncQueue(queue.name, connection=redis_url, prefix=prefix)
    try:
        assert await asyncio.to_thread(sync.cancel_job, job.id, "by hand") == "waiting"
    finally:
        await asyncio.to_thread(sync.close)
    assert await queue.get_job_state(job.id) == "waiting"


def test_the_error_is_unrecoverable() -> None:
    from lazarus import UnrecoverableError

    assert issubclass(JobCancelledError, UnrecoverableError)
