"""Fixtures of the HTTP API tests: an app on this test's prefix (with a token), clients with
and without the token, and dead letters made by a real worker whose processor raises."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from lazarus import Job, Queue, Worker
from lazarus.http import create_app

from ..procs import fail_as_told

TOKEN = "s3cret-token-for-tests"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
DLQ = "jobs-dlq"
MakeWorker = Callable[..., Worker]


async def dead_letter(
    make_worker: MakeWorker, queue: Queue, jobs: Iterable[Mapping[str, Any]], dlq: str = DLQ
) -> list[str]:
    """Add ``jobs`` to ``queue``, run a failing worker until every one of them is a dead
    letter in ``dlq`` (waiting on its ``deadLettered`` events); the dead letters' ids."""
    specs = list(jobs)
    ids: list[str] = []
    done = asyncio.Event()

    def arrived(_job: Job, dead_letter_id: str) -> None:
        ids.append(dead_letter_id)
        if len(ids) == len(specs):
            done.set()

    worker = make_worker(fail_as_told, queue.name, dead_letter_queue=dlq)
    worker.on("deadLettered", arrived)
    await queue.add_bulk(specs)
    await asyncio.wait_for(done.wait(), 10)
    await worker.close()
    return ids


def job(name: str, label: str, error: str = "RuntimeError", **data: Any) -> dict[str, Any]:
    """A job spec whose processor raises ``error``; ``label`` identifies it in assertions."""
    return {"name": name, "data": {"label": label, "error": error, **data}}


async def _app(redis_url: str, prefix: str) -> AsyncIterator[FastAPI]:
    application = create_app(connection=redis_url, prefix=prefix, token=TOKEN)
    yield application
    await application.state.bulk.close()
    await application.state.ops.close()


@pytest.fixture
async def app(redis_url: str, prefix: str) -> AsyncIterator[FastAPI]:
    """The app on this test's prefix, requiring :data:`TOKEN` on state-changing routes."""
    async for application in _app(redis_url, prefix):
        yield application


@pytest.fixture
async def second_app(redis_url: str, prefix: str) -> AsyncIterator[FastAPI]:
    """Another app on the same Redis and prefix: a second server process."""
    async for application in _app(redis_url, prefix):
        yield application


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """A client that sends the token."""
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(
        transport=transport, base_url="http://localhost", headers=AUTH
    ) as c:
        yield c


@pytest.fixture
async def anonymous(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """A client without the token."""
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://localhost"
    ) as c:
        yield c


@pytest.fixture
async def other(redis_url: str, prefix: str) -> AsyncIterator[Queue]:
    """A second source queue, ``other``."""
    q = Queue("other", connection=redis_url, prefix=prefix)
    yield q
    await q.close()


@pytest.fixture
async def seeded(make_worker: MakeWorker, queue: Queue, other: Queue) -> dict[str, str]:
    """Four dead letters in ``jobs-dlq``, dead-lettered in the order a, b, c (from ``jobs``)
    then d (from ``other``); maps each label to its dead letter id."""
    ids: dict[str, str] = {}
    for label, spec, source in [
        ("a", job("email.send", "a", "TimeoutError", message="smtp timeout", to="ada@x.io"), queue),
        ("b", job("email.bounce", "b", "ConnectionError", message="refused"), queue),
        ("c", job("report.generate", "c", "DeadLetterError", message="needs a human"), queue),
        ("d", job("email.send", "d", "ValueError", message="bad address", to="bob@y.io"), other),
    ]:
        (ids[label],) = await dead_letter(make_worker, source, [spec])
    return ids
