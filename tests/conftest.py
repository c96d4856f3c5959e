"""Fixtures: one real redis-server per test session, a unique key prefix per test.

With ``LAZARUS_TEST_CLUSTER=1`` (``make test-cluster``) ``redis_url`` and ``raw`` point at a
real local Redis Cluster instead (three masters, three replicas: ``tests/cluster.py``), so
the same tests run there. ``redis_cluster`` starts that cluster for the tests written for it.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import pytest
import redis.asyncio as aioredis

from lazarus import Job, Queue, Worker
from lazarus._connection import connect
from lazarus.embedded import EmbeddedRedis

from .cluster import LocalCluster

ON_CLUSTER = os.environ.get("LAZARUS_TEST_CLUSTER", "") not in ("", "0")


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[LocalCluster]:
    """A real local Redis Cluster, started once per session."""
    executable = os.environ.get("LAZARUS_TEST_REDIS_SERVER") or None
    with LocalCluster(executable=executable) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def redis_server() -> Iterator[EmbeddedRedis]:
    executable = os.environ.get("LAZARUS_TEST_REDIS_SERVER") or None
    with EmbeddedRedis(executable=executable) as server:
        yield server


@pytest.fixture(scope="session")
def redis_url(request: pytest.FixtureRequest) -> str:
    if ON_CLUSTER:
        cluster: LocalCluster = request.getfixturevalue("redis_cluster")
        return cluster.url
    server: EmbeddedRedis = request.getfixturevalue("redis_server")
    return server.url


@pytest.fixture
async def raw(redis_url: str) -> AsyncIterator[Any]:
    """A plain client for assertions on the keys themselves (a cluster client on a cluster:
    its SCAN and key commands reach every master)."""
    if ON_CLUSTER:
        client: Any = connect(redis_url)
    else:
        client = aioredis.Redis.from_url(redis_url, decode_responses=True)
    yield client
    await client.aclose()


@pytest.fixture
async def prefix(raw: aioredis.Redis) -> AsyncIterator[str]:
    """A key prefix of this test's own; its keys are deleted afterwards."""
    value = f"t{uuid.uuid4().hex[:12]}"
    yield value
    keys = [k async for k in raw.scan_iter(match=f"{value}:*", count=1000)]
    if keys:
        await raw.unlink(*keys)


@pytest.fixture
async def queue(redis_url: str, prefix: str) -> AsyncIterator[Queue]:
    q = Queue("jobs", connection=redis_url, prefix=prefix)
    yield q
    await q.close()


@pytest.fixture
async def dlq(redis_url: str, prefix: str) -> AsyncIterator[Queue]:
    q = Queue("jobs-dlq", connection=redis_url, prefix=prefix)
    yield q
    await q.close()


@pytest.fixture
async def make_worker(redis_url: str, prefix: str) -> AsyncIterator[Callable[..., Worker]]:
    """Build workers on this test's prefix; every one is closed at the end."""
    workers: list[Worker] = []

    def build(processor: Callable[..., Any], queue_name: str = "jobs", **options: Any) -> Worker:
        options.setdefault("connection", redis_url)
        options.setdefault("prefix", prefix)
        options.setdefault("block_timeout", 0.5)
        worker = Worker(queue_name, processor, **options)
        workers.append(worker)
        return worker

    yield build
    await asyncio.gather(*(w.close(timeout=5) for w in workers))


async def wait_until(
    condition: Callable[[], Awaitable[bool]], timeout: float = 10.0, message: str = ""
) -> None:
    """Poll ``condition`` until it holds; fail the test after ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await condition():
        if loop.time() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {message or condition}")
        await asyncio.sleep(0.01)


async def wait_for_state(queue: Queue, job_id: str, state: str, timeout: float = 10.0) -> None:
    """Wait until job ``job_id`` of ``queue`` is in ``state``; fail the test after ``timeout``."""

    async def reached() -> bool:
        return await queue.get_job_state(job_id) == state

    await wait_until(reached, timeout, f"job {job_id} of {queue.name} {state}")


async def dead_letter_of(dlq: Queue, job_id: str) -> Job:
    """The dead letter in ``dlq`` of job ``job_id``, once it is there."""

    async def arrived() -> bool:
        return await dlq.find_dead_letter_by_original_id(job_id) is not None

    await wait_until(arrived, message=f"a dead letter of {job_id} in {dlq.name}")
    letter = await dlq.find_dead_letter_by_original_id(job_id)
    assert letter is not None
    return letter


async def run_until_stopped(
    queue: Queue, make_worker: Callable[..., Worker], **options: Any
) -> tuple[Job, asyncio.Event]:
    """A job that a real worker (one slot, a lease of 1 s: ``options`` for the rest) runs
    until its processor is cancelled; the job once running, and an event set on the cancel."""
    started, stopped = asyncio.Event(), asyncio.Event()

    async def forever(_: Job) -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            stopped.set()
            raise

    make_worker(forever, concurrency=1, lock_duration=1000, **options)
    added = await queue.add("forever", None, attempts=3)
    await asyncio.wait_for(started.wait(), 10)
    return added, stopped


async def keys_of(raw: aioredis.Redis, prefix: str) -> set[str]:
    return {k async for k in raw.scan_iter(match=f"{prefix}:*", count=1000)}


async def job_snapshot(raw: aioredis.Redis, queue: Queue, job_id: str) -> tuple[Any, ...]:
    """What a change of job ``job_id`` would write: its hash, where it is, and the events
    stream's length (a test compares it before and after a refused change)."""
    k = queue.keys
    return (
        await raw.hgetall(k.job(job_id)),
        await raw.zscore(k.delayed, job_id),
        await raw.zscore(k.prioritized, job_id),
        await raw.lrange(k.wait, 0, -1),
        await raw.xlen(k.events),
    )
