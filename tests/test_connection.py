"""Connections: unix sockets, read timeouts, and servers that are hung or not Redis at all."""

from __future__ import annotations

import asyncio
import http.server
import threading
from collections.abc import AsyncIterator, Iterator

import pytest
from click.testing import CliRunner, Result
from redis.exceptions import TimeoutError as RedisTimeoutError

from lazarus import Queue, RedisUnavailableError, Worker, _connection
from lazarus._connection import blocking_ms, connect
from lazarus.cli import main
from lazarus.embedded import EmbeddedRedis

from .faults import collect, on_count, paused, private_redis


@pytest.fixture
async def server() -> AsyncIterator[EmbeddedRedis]:
    with private_redis() as instance:
        yield instance


@pytest.fixture
def short_read_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    """One second instead of the default, so that a hung server fails fast."""
    monkeypatch.setattr(_connection, "DEFAULT_SOCKET_TIMEOUT", 1.0, raising=False)


class _Quiet(http.server.BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        """Keep the server's log off stderr, where the CLI's output is read."""


@pytest.fixture
def http_url() -> Iterator[str]:
    """The URL of a plain HTTP server on loopback: a wrong port, as far as Redis goes."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Quiet)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"redis://127.0.0.1:{httpd.server_address[1]}/0"
    finally:
        httpd.shutdown()
        httpd.server_close()


async def _queues(url: str) -> Result:
    return await asyncio.to_thread(CliRunner().invoke, main, ["queues", "--redis-url", url])


async def test_unix_socket_urls_work_for_queues_and_workers() -> None:
    with private_redis(unix_socket=True) as server:
        async with Queue("jobs", connection=server.url) as queue:
            job = await queue.add("n", 2)
            worker = Worker("jobs", lambda j: j.data + 1, connection=server.url)
            await asyncio.wait_for(on_count(worker, "completed", 1).wait(), 10)
            await worker.close()

            stored = await queue.get_job(job.id)
            assert stored is not None and stored.return_value == 3


def test_connections_have_a_read_timeout_that_a_url_may_change() -> None:
    default = connect("redis://127.0.0.1:6379/0")
    chosen = connect("redis://127.0.0.1:6379/0?socket_timeout=3")

    assert default.connection_pool.connection_kwargs["socket_timeout"] == 10.0
    assert chosen.connection_pool.connection_kwargs["socket_timeout"] == 3.0
    assert blocking_ms(chosen, 60_000) == 2000  # a blocking read stays within it
    assert blocking_ms(chosen, 500) == 500


@pytest.mark.usefixtures("short_read_timeout")
async def test_a_call_to_a_hung_redis_ends_with_an_error_naming_it(server: EmbeddedRedis) -> None:
    async with Queue("jobs", connection=server.url) as queue:
        await queue.get_job_counts()  # a pooled connection, open before the server hangs
        pattern = f"no reply from Redis at 127.0.0.1:{server.port}"
        with paused(server), pytest.raises(RedisUnavailableError, match=pattern):
            await asyncio.wait_for(queue.get_job_counts(), 30)


@pytest.mark.usefixtures("short_read_timeout")
async def test_lazarus_queues_against_a_hung_redis_exits_with_one_line(
    server: EmbeddedRedis,
) -> None:
    with paused(server):
        result = await asyncio.wait_for(_queues(server.url), 30)

    assert result.exit_code == 1
    assert f"no reply from Redis at 127.0.0.1:{server.port}" in result.output
    assert result.output.count("\n") == 1


async def test_lazarus_queues_against_an_http_server_exits_with_one_line(http_url: str) -> None:
    result = await asyncio.wait_for(_queues(http_url), 30)

    assert result.exit_code == 1, result.exception
    assert "does not speak the Redis protocol" in result.output
    assert result.output.count("\n") == 1


async def test_worker_against_an_http_server_fails_fast(http_url: str) -> None:
    worker = Worker("jobs", lambda j: None, connection=http_url, autorun=False)

    with pytest.raises(RedisUnavailableError, match="does not speak the Redis protocol"):
        await asyncio.wait_for(worker.run(), 30)
    await worker.close()


@pytest.mark.usefixtures("short_read_timeout")
@pytest.mark.timeout(60)
async def test_worker_reports_a_hung_redis_and_goes_on_once_it_answers(
    server: EmbeddedRedis,
) -> None:
    # Given a worker started while its Redis is hung
    with paused(server):
        worker = Worker("jobs", lambda j: "ok", connection=server.url, block_timeout=0.2)
        errors = collect(worker, "error")
        await asyncio.wait_for(on_count(worker, "error", 2).wait(), 30)
    # When the server resumes, then a job is processed
    async with Queue("jobs", connection=server.url) as queue:
        await queue.add("n", None)
        await asyncio.wait_for(on_count(worker, "completed", 1).wait(), 30)
    await worker.close()
    assert isinstance(errors[0][0], RedisTimeoutError)


@pytest.mark.usefixtures("short_read_timeout")
async def test_blocking_claims_wait_longer_than_the_read_timeout(server: EmbeddedRedis) -> None:
    # Given a read timeout of 1 s and a job due in 2.5 s: the idle worker blocks that long
    async with Queue("jobs", connection=server.url) as queue:
        await queue.add("later", None, delay=2500)
        worker = Worker("jobs", lambda j: "ok", connection=server.url, block_timeout=5)
        errors = collect(worker, "error")

        await asyncio.wait_for(on_count(worker, "completed", 1).wait(), 20)

        await worker.close()
    assert errors == []
