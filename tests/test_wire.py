"""One exchange on a connection (``_scripts._wire``): replies in order, error replies in place,
deadlines, dropped and cancelled exchanges, RESP3 pushes."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from lazarus import _scripts
from lazarus._connection import connect
from lazarus._scripts._wire import send_and_read
from lazarus.embedded import EmbeddedRedis

from .conftest import wait_until

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def client(redis_server: EmbeddedRedis) -> AsyncIterator[aioredis.Redis]:
    made = connect(redis_server.url)
    assert isinstance(made, aioredis.Redis)
    yield made
    await made.aclose()


@pytest.fixture
async def conn(client: aioredis.Redis) -> AsyncIterator[Any]:
    taken = await client.connection_pool.get_connection()  # type: ignore[no-untyped-call]
    yield taken
    await client.connection_pool.release(taken)


@pytest.fixture
def key() -> str:
    return f"wire:{uuid.uuid4().hex}"


async def test_replies_come_in_order_with_error_replies_in_their_place(conn: Any, key: str) -> None:
    replies = await send_and_read(
        conn, [("SET", key, "v"), ("INCR", key), ("GET", key), ("DEL", key)], None
    )

    assert replies[0] in (True, "OK")
    assert isinstance(replies[1], ResponseError)
    assert "not an integer" in str(replies[1])
    assert replies[2:] == ["v", 1]


async def test_a_write_larger_than_the_transports_buffer_goes_whole(conn: Any, key: str) -> None:
    value = "x" * (4 * 1024 * 1024)

    replies = await send_and_read(conn, [("SET", key, value), ("STRLEN", key), ("DEL", key)], None)

    assert replies[1:] == [len(value), 1]


async def test_a_missed_deadline_raises_a_timeout_and_closes_the_connection(
    conn: Any, key: str
) -> None:
    # Given a command that blocks for 5 s, sent with a deadline of 0.3 s
    started = time.monotonic()
    with pytest.raises(RedisTimeoutError, match=r"no reply within 0\.3 s"):
        await send_and_read(conn, [("BLPOP", key, 5)], 0.3)

    # Then it ended at its deadline, its connection closed, and the next exchange opens it again
    assert time.monotonic() - started < 3
    assert not conn.is_connected
    assert await send_and_read(conn, [("ECHO", "after")], None) == ["after"]


async def test_a_later_exchange_with_a_sooner_deadline_ends_first_and_alone(
    client: aioredis.Redis, key: str
) -> None:
    # Given an exchange with a long deadline on its way (it blocks 1 s, may take 10)
    pool = client.connection_pool
    long_conn = await pool.get_connection()  # type: ignore[no-untyped-call]
    short_conn = await pool.get_connection()  # type: ignore[no-untyped-call]
    try:
        long_one = asyncio.create_task(send_and_read(long_conn, [("BLPOP", key, 1)], 10.0))
        await asyncio.sleep(0)  # it is sent, its deadline watched
        # When another one with a deadline of 0.2 s follows
        started = time.monotonic()
        with pytest.raises(RedisTimeoutError):
            await send_and_read(short_conn, [("BLPOP", key, 5)], 0.2)
        # Then it ends at its own deadline, not the first one's, and the first one is untouched
        assert time.monotonic() - started < 0.9
        assert await long_one == [None]
        assert long_conn.is_connected
    finally:
        await pool.release(long_conn)
        await pool.release(short_conn)


async def test_a_cancelled_exchange_closes_its_connection_so_no_stale_reply_is_read(
    conn: Any, key: str, client: aioredis.Redis
) -> None:
    # Given an exchange cancelled while its command blocks
    waiting = asyncio.create_task(send_and_read(conn, [("BLPOP", key, 2)], None))
    await wait_until(lambda: _blocked(client), message="the command blocking")
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    # When a job is pushed for it, and the connection used again
    await client.rpush(key, "late")
    assert not conn.is_connected
    # Then the next exchange reads its own reply, not the cancelled one's
    assert await send_and_read(conn, [("ECHO", "mine")], None) == ["mine"]
    await client.delete(key)


async def test_a_connection_the_server_dropped_raises_and_execute_retries_a_repeatable_call(
    client: aioredis.Redis, redis_server: EmbeddedRedis
) -> None:
    # Given the pool's connection, killed by the server while idle
    assert await _scripts.execute(client, [("CLIENT", "SETNAME", "wire-kill")]) in (
        [True],
        ["OK"],
    )
    admin = aioredis.Redis.from_url(redis_server.url, decode_responses=True)
    try:
        killed = await admin.execute_command("CLIENT", "KILL", "SKIPME", "yes", "ID",
                                             await _client_id(admin, "wire-kill"))  # fmt: skip
        assert killed in (1, True, "OK")
        # Then a call that may run twice is sent again on a fresh connection
        assert await _scripts.execute(client, [("ECHO", "again")], repeatable=True) == ["again"]
        # And one that may not raises once its connection is found dropped
        await _scripts.execute(client, [("CLIENT", "SETNAME", "wire-kill")])
        await admin.execute_command("CLIENT", "KILL", "SKIPME", "yes", "ID",
                                    await _client_id(admin, "wire-kill"))  # fmt: skip
        with pytest.raises(RedisConnectionError):
            await _scripts.execute(client, [("ECHO", "once")], repeatable=False)
    finally:
        await admin.aclose()


async def test_a_resp3_push_on_the_way_goes_to_its_handler_not_into_the_replies(
    conn: Any, client: aioredis.Redis, key: str
) -> None:
    if str(getattr(conn, "protocol", 2)) != "3":
        pytest.skip("this redis-py speaks RESP2 by default")
    # Given a connection that tracks a key it read
    assert await send_and_read(conn, [("CLIENT", "TRACKING", "ON"), ("GET", key)], None) in (
        [True, None],
        ["OK", None],
    )
    # When another client changes the key (Redis pushes an invalidation to the first)
    await client.set(key, "changed")
    # Then the next exchange on the first connection answers its own command
    assert await send_and_read(conn, [("ECHO", "own")], None) == ["own"]
    await send_and_read(conn, [("CLIENT", "TRACKING", "OFF"), ("DEL", key)], None)


async def _blocked(client: aioredis.Redis) -> bool:
    info = await client.info("clients")
    return int(info["blocked_clients"]) > 0


async def _client_id(admin: aioredis.Redis, name: str) -> int:
    for entry in await admin.client_list():
        if entry.get("name") == name:
            return int(entry["id"])
    raise AssertionError(f"no client named {name}")


async def test_a_connection_idle_past_its_health_check_is_checked_and_opened_again_first(
    conn: Any, redis_server: EmbeddedRedis
) -> None:
    # Given a connection the server dropped while it sat idle past its health-check interval
    assert conn.health_check_interval > 0
    await send_and_read(conn, [("CLIENT", "SETNAME", "wire-idle")], None)
    admin = aioredis.Redis.from_url(redis_server.url, decode_responses=True)
    try:
        await admin.execute_command("CLIENT", "KILL", "SKIPME", "yes", "ID",
                                    await _client_id(admin, "wire-idle"))  # fmt: skip
    finally:
        await admin.aclose()
    conn.next_health_check = 0  # its interval has passed

    # When an exchange goes on it, then the check finds it dropped, opens it again, and the
    # exchange's own command runs once, on the new connection
    assert await send_and_read(conn, [("ECHO", "checked")], None) == ["checked"]
