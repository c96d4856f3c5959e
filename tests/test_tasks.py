"""Typed tasks: @tasks.task, enqueue with checked arguments, one worker for every task."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from lazarus import JobFailedError, Worker
from lazarus.tasks import Tasks, current_job

from .conftest import keys_of


@pytest.fixture
async def tasks(redis_url: str, prefix: str) -> AsyncIterator[Tasks]:
    made = Tasks("jobs", connection=redis_url, prefix=prefix)
    yield made
    await made.queue.close()


async def test_an_enqueued_task_runs_with_its_arguments_and_returns_its_value(
    tasks: Tasks,
) -> None:
    @tasks.task(attempts=2)
    async def greet(name: str, punctuation: str = "!") -> str:
        return f"hello {name}{punctuation}"

    job = await greet.enqueue("ada", punctuation="?")
    worker = tasks.worker(block_timeout=0.5)
    try:
        assert await job.wait_until_finished(timeout=10) == "hello ada?"
    finally:
        await worker.close()

    assert job.name.endswith("greet") and job.opts.attempts == 2
    assert job.data == {"args": ["ada"], "kwargs": {"punctuation": "?"}}
    assert await greet("bob") == "hello bob!"  # still the function when called directly


async def test_a_plain_function_task_runs_in_a_thread_and_sees_its_job(tasks: Tasks) -> None:
    @tasks.task(name="sum")
    def add(a: int, b: int) -> dict[str, object]:
        time.sleep(0.01)
        return {"sum": a + b, "job": current_job().id}

    job = await add.enqueue(2, 3)
    worker = tasks.worker(block_timeout=0.5)
    try:
        assert await job.wait_until_finished(timeout=10) == {"sum": 5, "job": job.id}
    finally:
        await worker.close()


@pytest.mark.parametrize(
    ("args", "kwargs", "fragment"),
    [
        ((), {}, "missing a required argument: 'count'"),
        ((1, 2.0, None, 4), {}, "too many positional arguments"),
        (("3",), {}, "argument 'count' must be int, not str"),
        ((True,), {}, "argument 'count' must be int, not bool"),
        ((3,), {"ratio": "x"}, "argument 'ratio' must be float"),
        ((3,), {"colour": "red"}, "unexpected keyword argument 'colour'"),
    ],
)
async def test_a_bad_call_raises_at_the_caller_and_writes_nothing(
    tasks: Tasks, raw: aioredis.Redis, prefix: str, args: tuple[object, ...],
    kwargs: dict[str, object], fragment: str,
) -> None:  # fmt: skip
    @tasks.task(name="resize")
    async def resize(count: int, ratio: float = 1.0, tags: list[str] | None = None) -> None:
        return None

    with pytest.raises(TypeError, match=fragment):
        await resize.enqueue(*args, **kwargs)  # type: ignore[arg-type]

    assert await keys_of(raw, prefix) == set()


async def test_options_of_one_call_override_the_task_defaults(tasks: Tasks) -> None:
    @tasks.task(name="ping", priority=5)
    async def ping() -> str:
        return "pong"

    job = await ping.enqueue_with({"job_id": "ping-1", "delay": 60_000})

    assert job.id == "ping-1" and job.opts.priority == 5 and job.opts.delay == 60_000


async def test_a_job_naming_no_task_fails_for_good(tasks: Tasks) -> None:
    job = await tasks.queue.add("nobody.registered.this", {"args": [], "kwargs": {}},
                                attempts=5)  # fmt: skip
    worker: Worker = tasks.worker(block_timeout=0.5)
    try:
        with pytest.raises(JobFailedError, match="no task named"):
            await job.wait_until_finished(timeout=10)
    finally:
        await worker.close()
    stored = await tasks.queue.get_job(job.id)
    assert stored is not None and stored.attempts_made == 1


def test_a_name_cannot_be_registered_twice(tasks: Tasks) -> None:
    tasks.task(name="x")(lambda: None)

    with pytest.raises(ValueError, match="registered already"):
        tasks.task(name="x")(lambda: None)


def test_current_job_outside_a_task_raises() -> None:
    with pytest.raises(LookupError):
        current_job()
