"""Fixtures of the redrive tests: dead letters made by a real worker."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from lazarus import Job, Queue, UnrecoverableError, Worker
from lazarus.redrive import Redriver

from ..conftest import wait_until

MakeDeadLetters = Callable[..., Awaitable[list[str]]]


@pytest.fixture
def make_dead_letters(
    queue: Queue, dlq: Queue, make_worker: Callable[..., Worker]
) -> MakeDeadLetters:
    """Dead-letter ``count`` jobs named ``name`` of queue ``jobs`` into ``jobs-dlq``; returns
    the ids of all the dead letters there, oldest first."""

    async def make(count: int, name: str = "task", error: str = "bad input") -> list[str]:
        async def fail(job: Job) -> None:
            if error == "timeout":
                raise TimeoutError("upstream timed out")
            raise UnrecoverableError(error)

        before = await dlq.get_dead_letter_count()
        await queue.add_bulk([{"name": name, "data": {"n": n}} for n in range(count)])
        worker = make_worker(fail, concurrency=10, dead_letter_queue="jobs-dlq")

        async def arrived() -> bool:
            return await dlq.get_dead_letter_count() >= before + count

        await wait_until(arrived, message=f"{count} dead letters")
        await worker.close()
        return [j.id for j in reversed(await dlq.get_dead_letter_jobs())]

    return make


@pytest.fixture
async def make_redriver(redis_url: str, prefix: str) -> AsyncIterator[Callable[..., Redriver]]:
    """Build redrivers of ``jobs-dlq`` on this test's prefix; all are closed at the end."""
    made: list[Redriver] = []

    def build(rules: object = (), **options: object) -> Redriver:
        options.setdefault("connection", redis_url)
        options.setdefault("prefix", prefix)
        options.setdefault("poll_interval", 0.02)
        redriver = Redriver("jobs-dlq", rules, **options)  # type: ignore[arg-type]
        made.append(redriver)
        return redriver

    yield build
    for redriver in made:
        await redriver.close()
