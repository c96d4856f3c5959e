"""Helpers for tests that put Redis in trouble: a private server, memory pressure, a pause."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, TypeVar

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


async def flush_scripts(client: aioredis.Redis) -> bool:
    """Forget every script and function the server holds, as a restart without persistence
    would; whether it holds functions at all (Redis 7.0 and later)."""
    await client.script_flush()
    try:
        await client.function_flush()
    except ResponseError:  # Redis 6.2: no functions
        return False
    return True


async def has_functions(client: Any) -> bool:
    """Whether the server has functions (Redis 7.0 and later)."""
    try:
        await client.function_list()
    except ResponseError as error:
        if "unknown command" not in str(error):
            raise
        return False
    return True


async def script_ready(client: aioredis.Redis, script: Any) -> bytes:
    """Load ``script`` (a ``lazarus._scripts.Script``) beforehand, as a script and, where the
    server has functions, as a function: a call refused for want of it did not run, and its
    second send would be no re-send. The bytes that name it in its calls: its function's name,
    or its SHA1 (Redis 6.2)."""
    await client.script_load(script.source)
    try:
        await client.function_load(script.library, replace=True)
    except ResponseError as error:
        if "unknown command" not in str(error):
            raise
        return str(script.sha).encode()
    return str(script.function).encode()


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


P = TypeVar("P", bound="Proxy")


class Proxy:
    """A TCP proxy on a loopback port in front of the real Redis at ``redis_url``, for the
    clients under test (:attr:`url`); a subclass serves each connection (``_serve``)."""

    def __init__(self, redis_url: str) -> None:
        parts = urllib.parse.urlsplit(redis_url)
        assert parts.scheme == "redis" and parts.hostname and parts.port, redis_url
        self._upstream = (parts.hostname, parts.port)
        self._path = parts.path
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        """The proxy's URL, for the client under test."""
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"redis://127.0.0.1:{port}{self._path}"

    async def __aenter__(self: P) -> P:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._end_connections()
        await self._server.wait_closed()

    async def _end_connections(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raise NotImplementedError


class ReplyDropper(Proxy):
    """A TCP proxy in front of a real Redis that, once armed, forwards the next command holding
    ``marker`` (say, a script's SHA1) and then drops the connection instead of passing its
    reply on: Redis ran the command, the client never hears of it and sends it again.
    ``meanwhile``, if given, is awaited between the command's run and the drop: what happens
    elsewhere while the client waits for its reply."""

    def __init__(
        self,
        redis_url: str,
        marker: bytes,
        meanwhile: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        super().__init__(redis_url)
        self.marker = marker
        self.meanwhile = meanwhile
        self.armed = False
        self.dropped = 0

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        up_reader, up_writer = await asyncio.open_connection(*self._upstream)
        drop = asyncio.Event()

        async def to_redis() -> None:
            while data := await reader.read(65536):
                if self.armed and self.marker in data:
                    self.armed = False
                    drop.set()
                up_writer.write(data)
                await up_writer.drain()

        async def to_client() -> None:
            while data := await up_reader.read(65536):
                if drop.is_set():  # the command ran: its reply is lost with the connection
                    self.dropped += 1
                    if self.meanwhile is not None:
                        await self.meanwhile()
                    return
                writer.write(data)
                await writer.drain()

        pipes = [asyncio.create_task(to_redis()), asyncio.create_task(to_client())]
        try:  # either side closing (or a drop) ends both
            await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pipe in pipes:
                pipe.cancel()
            await asyncio.gather(*pipes, return_exceptions=True)
            for stream in (writer, up_writer):
                stream.close()
            self._tasks.discard(task)
