"""Retry waits: jittered fixed and exponential backoff, and the worker's custom strategy."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
import redis.asyncio as aioredis

from lazarus import Backoff, Job, Queue, Worker

from .test_worker import on_count

MakeWorker = Callable[..., Worker]


async def always_fails(job: Job) -> None:
    raise ConnectionError("down")


async def retry_delays(raw: aioredis.Redis, queue: Queue) -> list[int]:
    """The delay of every 'retrying' event of the queue, in order."""
    entries = await raw.xrange(queue.keys.events)
    return [int(f["delay"]) for _, f in entries if f["event"] == "retrying"]


def test_jitter_draws_the_wait_between_its_bounds() -> None:
    backoff = Backoff("exponential", 1000, jitter=0.5)

    assert backoff.wait_ms(3, rand=lambda: 0.0) == 2000
    assert backoff.wait_ms(3, rand=lambda: 0.999999) == 3999
    assert Backoff("fixed", 1000, jitter=1).wait_ms(9, rand=lambda: 0.25) == 250
    assert Backoff("fixed", 1000).wait_ms(9, rand=lambda: 0.25) == 1000


@pytest.mark.parametrize(("jitter", "error"), [(-0.1, ValueError), (2, ValueError),
                                               (True, TypeError), ("0.5", TypeError)])  # fmt: skip
def test_jitter_outside_zero_to_one_is_refused_naming_the_field(
    jitter: object, error: type[Exception]
) -> None:
    with pytest.raises(error, match=r"backoff\.jitter"):
        Backoff.parse({"type": "fixed", "delay": 5, "jitter": jitter})


async def test_jitter_is_stored_with_the_job(queue: Queue) -> None:
    job = await queue.add("n", attempts=2, backoff={"type": "exponential", "delay": 5,
                                                    "jitter": 0.25})  # fmt: skip

    stored = await queue.get_job(job.id)

    assert stored is not None and stored.opts.backoff == Backoff("exponential", 5, 0.25)


async def test_jittered_retries_spread_their_waits_within_the_bounds(
    queue: Queue, raw: aioredis.Redis, make_worker: MakeWorker
) -> None:
    backoff = {"type": "exponential", "delay": 100_000, "jitter": 1}
    await queue.add_bulk([{"name": "n", "attempts": 2, "backoff": backoff}] * 8)
    worker = make_worker(always_fails, concurrency=8)

    await asyncio.wait_for(on_count(worker, "retrying", 8).wait(), 10)

    delays = await retry_delays(raw, queue)
    assert len(delays) == 8
    assert all(0 <= d <= 100_000 for d in delays)
    assert len(set(delays)) > 1


async def test_custom_backoff_type_asks_the_worker_strategy(
    queue: Queue, raw: aioredis.Redis, make_worker: MakeWorker
) -> None:
    seen: list[tuple[Any, ...]] = []

    def strategy(attempts: int, kind: str, error: BaseException, job: Job) -> int:
        seen.append((attempts, kind, str(error), job.name))
        return 1234 * attempts

    await queue.add("n", attempts=2, backoff={"type": "linear", "delay": 5})
    worker = make_worker(always_fails, backoff_strategy=strategy)

    await asyncio.wait_for(on_count(worker, "retrying", 1).wait(), 10)

    assert seen == [(1, "linear", "down", "n")]
    assert await retry_delays(raw, queue) == [1234]


@pytest.mark.parametrize("answer", [ValueError("bug"), -5, "soon", None])
async def test_a_strategy_that_fails_or_answers_nonsense_waits_the_job_delay(
    queue: Queue, raw: aioredis.Redis, make_worker: MakeWorker, answer: object
) -> None:
    def strategy(*_: Any) -> Any:
        if isinstance(answer, Exception):
            raise answer
        return answer

    await queue.add("n", attempts=2, backoff={"type": "linear", "delay": 60_000})
    worker = make_worker(always_fails, backoff_strategy=strategy)

    await asyncio.wait_for(on_count(worker, "retrying", 1).wait(), 10)

    assert await retry_delays(raw, queue) == [60_000]


async def test_builtin_backoff_types_ignore_the_strategy(
    queue: Queue, raw: aioredis.Redis, make_worker: MakeWorker
) -> None:
    await queue.add("n", attempts=2, backoff={"type": "fixed", "delay": 70_000})
    worker = make_worker(always_fails, backoff_strategy=lambda *_: 1)

    await asyncio.wait_for(on_count(worker, "retrying", 1).wait(), 10)

    assert await retry_delays(raw, queue) == [70_000]


def test_a_strategy_that_is_not_callable_is_refused(redis_url: str) -> None:
    with pytest.raises(TypeError, match="backoff_strategy"):
        Worker("jobs", always_fails, connection=redis_url, autorun=False,
               backoff_strategy=5)  # type: ignore[arg-type]  # fmt: skip
