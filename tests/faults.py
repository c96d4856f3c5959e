"""Helpers for tests that put Redis in trouble: a private server, memory pressure, a pause."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
from collections.abc import AsyncIterator, Iterator
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import ResponseError

from lazarus import Worker
from lazarus.embedded import EmbeddedRedis


def private_redis(**options: Any) -> EmbeddedRedis:
    """A redis-server of the test's own (the session's one must stay healthy), the same
    binary the session uses."""
    executable = os.environ.get("LAZARUS_TEST_REDIS_SERVER") or None
    return EmbeddedRedis(executable=executable, **options)


def free_port() -> int:
    """A loopback port where nothing listens (for now)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.asynccontextmanager
async def out_of_memory(client: aioredis.Redis) -> AsyncIterator[None]:
    """Every write is refused with OOM inside the block; the old settings come back after."""
    # One name per CONFIG GET: Redis 6.2 takes no more.
    old = {**await client.config_get("maxmemory"), **await client.config_get("maxmemory-policy")}
    await client.config_set("maxmemory-policy", "noeviction")
    await client.config_set("maxmemory", "1")
    try:
        yield
    finally:
        await client.config_set("maxmemory", old["maxmemory"])
        await client.config_set("maxmemory-policy", old["maxmemory-policy"])


@contextlib.asynccontextmanager
async def busy(server: EmbeddedRedis, admin: aioredis.Redis) -> AsyncIterator[None]:
    """Redis runs a long script inside the block, answering BUSY to every other call."""
    await admin.config_set("lua-time-limit", 10)
    spin = "local s = redis.call('TIME')[1] while redis.call('TIME')[1] - s < 10 do end"
    running = asyncio.create_task(admin.eval(spin, 0))
    probe = aioredis.Redis.from_url(server.url, decode_responses=True)

    async def refused() -> bool:
        try:
            await probe.get("probe")
        except ResponseError as exc:
            return str(exc).startswith("BUSY")
        return False

    try:
        while not await refused():  # noqa: ASYNC110 - Redis offers nothing to await
            await asyncio.sleep(0.01)
        yield
    finally:
        with contextlib.suppress(ResponseError):  # unless it ended on its own
            await probe.script_kill()
        await asyncio.gather(running, return_exceptions=True)
        await probe.aclose()


@contextlib.contextmanager
def paused(server: EmbeddedRedis) -> Iterator[None]:
    """The server stopped with SIGSTOP: connections open, but nothing answers."""
    assert server.pid is not None
    os.kill(server.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(server.pid, signal.SIGCONT)


def on_count(worker: Worker, event: str, target: int) -> asyncio.Event:
    """An event set once the worker has emitted ``event`` ``target`` times."""
    done, seen = asyncio.Event(), [0]

    def count(*_: Any) -> None:
        seen[0] += 1
        if seen[0] >= target:
            done.set()

    worker.on(event, count)  # type: ignore[arg-type]
    return done


def collect(worker: Worker, event: str) -> list[tuple[Any, ...]]:
    """Every emission of ``event``, with its arguments, as it happens."""
    seen: list[tuple[Any, ...]] = []
    worker.on(event, lambda *args: seen.append(args))  # type: ignore[arg-type]
    return seen
