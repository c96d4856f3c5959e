"""Queue.get_metrics: jobs completed and failed for good, counted by the outcome scripts."""

from __future__ import annotations

from typing import Any

import pytest
import redis.asyncio as aioredis

from lazarus import Job, Queue, QueueMetrics
from lazarus.sync import Queue as SyncQueue
from tests.conftest import wait_until


async def test_every_ending_counts_once(queue: Queue, dlq: Queue, make_worker: Any) -> None:
    tries: dict[str, int] = {}

    async def process(job: Job) -> str:
        tries[job.id] = tries.get(job.id, 0) + 1
        if job.data["fail"] and not (job.data["fail"] == "once" and tries[job.id] > 1):
            raise RuntimeError("boom")
        return "ok"

    jobs = [
        *[await queue.add("ok", {"fail": False}) for _ in range(4)],
        await queue.add("flaky", {"fail": "once"}, attempts=2),  # a retry, then completes
        await queue.add("bad", {"fail": True}, on_exhaustion="fail"),  # into failed
        await queue.add("bad", {"fail": True}, attempts=2),  # into the dead letter queue
        await queue.add("bad", {"fail": True}, on_exhaustion="discard"),
    ]
    make_worker(process, dead_letter_queue=dlq.name)

    async def ended() -> bool:
        counts = await queue.get_job_counts()
        dead = await dlq.get_dead_letter_count()
        return counts["completed"] == 5 and counts["failed"] == 1 and dead == 1

    await wait_until(ended)
    assert sum(tries.values()) == len(jobs) + 2  # the retried and the dead-lettered ran twice

    metrics = await queue.get_metrics()
    assert (metrics.completed, metrics.failed) == (5, 3)
    assert len(metrics.completed_per_minute) == len(metrics.failed_per_minute) == 60
    assert sum(c for _, c in metrics.completed_per_minute) == 5
    assert sum(c for _, c in metrics.failed_per_minute) == 3
    # A dead letter is not an outcome of the dead letter queue's own jobs.
    in_dlq = await dlq.get_metrics()
    assert (in_dlq.completed, in_dlq.failed) == (0, 0)


async def test_minutes_are_oldest_first_and_end_at_now(queue: Queue) -> None:
    now = 1_800_000_000_000 + 30_000  # half a minute into a minute

    metrics = await queue.get_metrics(3, now=now)

    assert metrics.completed_per_minute == [
        (1_800_000_000_000 - 120_000, 0), (1_800_000_000_000 - 60_000, 0),
        (1_800_000_000_000, 0),
    ]  # fmt: skip
    assert metrics == QueueMetrics(0, 0, metrics.completed_per_minute, metrics.failed_per_minute)


async def test_the_sync_queue_reads_them(redis_url: str, prefix: str, queue: Queue,
                                         make_worker: Any) -> None:  # fmt: skip
    await queue.add("ok", None)

    async def process(job: Job) -> None: ...

    make_worker(process)

    async def completed() -> bool:
        return (await queue.get_job_counts())["completed"] == 1

    await wait_until(completed)
    sync = SyncQueue(queue.name, connection=redis_url, prefix=prefix)
    try:
        assert sync.get_metrics(1).completed == 1
    finally:
        sync.close()


@pytest.mark.parametrize(
    ("minutes", "error", "words"),
    [(0, ValueError, "minutes must be from 1 to 120"), (121, ValueError, "minutes must be"),
     (True, TypeError, "minutes must be an int"), ("60", TypeError, "minutes must be an int")],
)  # fmt: skip
async def test_bad_minutes_name_the_field(
    queue: Queue, raw: aioredis.Redis, minutes: Any, error: type, words: str
) -> None:
    with pytest.raises(error, match=words):
        await queue.get_metrics(minutes)
    assert not await raw.exists(queue.keys.metrics)
