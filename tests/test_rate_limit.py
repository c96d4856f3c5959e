"""Rate limits: a queue-wide window enforced where jobs are claimed, and RateLimitError."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable

import pytest
import redis.asyncio as aioredis

from lazarus import Job, Queue, RateLimitError, Worker, _scripts
from lazarus._keys import QueueKeys
from lazarus._limiter import RateLimit

from .conftest import wait_until
from .test_worker import on_count

MakeWorker = Callable[..., Worker]
NOW = 1_000_000


async def test_the_limit_holds_across_every_worker_of_the_queue(
    queue: Queue, make_worker: MakeWorker
) -> None:
    await queue.add_bulk([{"name": "n"}] * 10)
    limiter = {"max": 3, "duration": 60_000}
    make_worker(lambda job: None, limiter=limiter, concurrency=4)
    make_worker(lambda job: None, limiter=limiter, concurrency=4)

    await wait_until(lambda: _window_full(queue), message="the window to fill")
    await wait_until(lambda: _counts_settled(queue), message="the claimed jobs to finish")

    counts = await queue.get_job_counts()
    assert counts["completed"] == 3 and counts["waiting"] == 7
    assert await queue.get_global_rate_limit() == RateLimit(3, 60_000)


async def _window_full(queue: Queue) -> bool:
    return await queue.get_rate_limit_ttl() > 0


async def _counts_settled(queue: Queue) -> bool:
    return (await queue.get_job_counts())["active"] == 0


async def test_jobs_past_the_limit_run_in_the_next_windows(
    queue: Queue, make_worker: MakeWorker
) -> None:
    await queue.add_bulk([{"name": "n"}] * 6)
    make_worker(lambda job: None, limiter={"max": 2, "duration": 200}, concurrency=6)

    await wait_until(
        lambda: _completed(queue, 6), timeout=15, message="every job to run, two per window"
    )


async def _completed(queue: Queue, n: int) -> bool:
    return await queue.get_completed_count() == n


async def test_rate_limit_error_puts_the_job_back_without_spending_an_attempt(
    queue: Queue, raw: aioredis.Redis, make_worker: MakeWorker
) -> None:
    calls: list[int] = []

    async def limited(job: Job) -> str:
        calls.append(job.attempts_made)
        if len(calls) == 1:
            raise RateLimitError(50)
        return "ok"

    job = await queue.add("n", attempts=1)
    worker = make_worker(limited)
    limited_event = on_count(worker, "rateLimited", 1)

    assert await job.wait_until_finished(timeout=10) == "ok"

    assert limited_event.is_set()
    assert calls == [0, 0]
    stored = await queue.get_job(job.id)
    assert stored is not None and stored.attempts_made == 1 and stored.attempts == []
    [event] = [f for _, f in await raw.xrange(queue.keys.events) if f["event"] == "rateLimited"]
    assert event == {"event": "rateLimited", "jobId": job.id, "delay": "50"}


async def test_a_rate_limited_job_waits_its_delay(queue: Queue, make_worker: MakeWorker) -> None:
    async def limited(job: Job) -> None:
        raise RateLimitError(60_000, "quota exhausted")

    job = await queue.add("n")
    worker = make_worker(limited)
    await asyncio.wait_for(on_count(worker, "rateLimited", 1).wait(), 10)

    assert await queue.get_job_state(job.id) == "delayed"


@pytest.mark.parametrize(
    ("limiter", "error", "field"),
    [
        ({"max": 0, "duration": 10}, ValueError, "limiter.max"),
        ({"max": 1}, TypeError, "limiter.duration"),
        ({"max": 1, "duration": 10**14}, ValueError, "limiter.duration"),
        ({"max": 2**31, "duration": 10}, ValueError, "limiter.max"),
        ({"max": 1, "duration": 10, "per": 1}, ValueError, "unknown keys"),
        ([1, 10], TypeError, "limiter"),
    ],
)
def test_a_bad_limiter_is_refused_naming_the_field(
    redis_url: str, limiter: object, error: type[Exception], field: str
) -> None:
    with pytest.raises(error, match=field):
        Worker("jobs", lambda job: None, connection=redis_url, autorun=False,
               limiter=limiter)  # type: ignore[arg-type]  # fmt: skip


@pytest.mark.parametrize(("after", "error"), [(-1, ValueError), (1.5, TypeError)])
def test_rate_limit_error_needs_a_whole_number_of_ms(after: object, error: type) -> None:
    with pytest.raises(error, match="retry_after_ms"):
        RateLimitError(after)  # type: ignore[arg-type]


async def test_the_limit_can_be_set_and_removed_on_the_queue(queue: Queue) -> None:
    await queue.set_global_rate_limit(5, 1000)
    assert await queue.get_global_rate_limit() == RateLimit(5, 1000)

    await queue.remove_global_rate_limit()

    assert await queue.get_global_rate_limit() is None
    assert await queue.get_rate_limit_ttl() == 0
    with pytest.raises(ValueError, match="max"):
        await queue.set_global_rate_limit(0, 1000)
    # A window Redis could not set as a key's expiry would fail every claim of the queue.
    with pytest.raises(ValueError, match="duration must be between 1 and"):
        await queue.set_global_rate_limit(1, 10**20)
    assert await queue.get_global_rate_limit() is None


# -- the scripts ------------------------------------------------------------------------------


async def test_claims_stop_at_the_limit_and_report_the_window_end(
    raw: aioredis.Redis, prefix: str
) -> None:
    k = QueueKeys(prefix, "src")
    opts = json.dumps({"attempts": 1})
    for job_id in "abcd":
        args = [NOW, 100, 0, "", job_id, "n", "{}", opts, 0, 0, 1]
        await _scripts.load("add_jobs")(raw, [*k.group, k.job(job_id)], args)
    await raw.hset(k.meta, mapping={"limiter:max": 2, "limiter:duration": 5000})

    claim = [*k.group, k.reply("w1", "claim")]
    reply = await _scripts.load("claim_jobs")(
        raw, claim, [NOW, "w1", 30_000, 4, 100, uuid.uuid4().hex]
    )

    assert [job[0] for job in reply[1:]] == ["a", "b"]
    assert NOW < reply[0] <= NOW + 5000
    assert await raw.get(k.limiter) == "2"
    token = reply[1][1]
    done = await _scripts.load("complete_job")(
        raw, [*k.group, k.job("a"), k.completed, k.reply("w1", "0")],
        ["a", token, NOW, "null", -1, -1, 0, 100, 1, "w1", 30_000],
    )  # fmt: skip
    assert done[0] == 0 and done[2] is None  # no next job: the window is full
    assert NOW < done[1] <= NOW + 5000
