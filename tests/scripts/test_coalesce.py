"""Coalesced calls: concurrent script calls share writes and connections, each with its own
reply, and a dropped connection costs no call more than it did alone."""

from __future__ import annotations

import asyncio
import gc
import uuid
import weakref
from collections.abc import AsyncIterator
from typing import Any

import hiredis
import pytest
import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

from lazarus import Queue, _scripts
from lazarus._scripts._coalesce import MAX_BATCH_BYTES, Coalescer, Packed

from ..conftest import ON_CLUSTER
from ..faults import flush_scripts


@pytest.fixture
async def narrow(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    """A client whose pool refuses a third connection."""
    client = aioredis.Redis.from_url(redis_url, decode_responses=True, max_connections=2)
    yield client
    await client.aclose()


async def test_hundreds_of_concurrent_adds_fit_in_two_connections(
    narrow: aioredis.Redis, raw: aioredis.Redis, prefix: str
) -> None:
    queue = Queue("jobs", connection=narrow, prefix=prefix)

    jobs = await asyncio.gather(*(queue.add("n", {"i": i}) for i in range(300)))

    assert len({job.id for job in jobs}) == 300
    assert await raw.llen(f"{prefix}:{{jobs}}:wait") == 300


async def test_after_a_flush_concurrent_calls_reload_once_and_run(
    narrow: aioredis.Redis, raw: aioredis.Redis, prefix: str
) -> None:
    queue = Queue("jobs", connection=narrow, prefix=prefix)
    await queue.add("n", {})
    functions = await flush_scripts(raw)
    await raw.config_resetstat()

    await asyncio.gather(*(queue.add("n", {"i": i}) for i in range(200)))

    assert await raw.llen(f"{prefix}:{{jobs}}:wait") == 201
    if functions and not ON_CLUSTER:
        # The calls refused together shared a load of the library, not one load per call: a
        # batch in flight while the load ran may be refused after it and load once more
        stats = await raw.info("commandstats")
        assert 1 <= stats["cmdstat_function|load"]["calls"] <= _scripts.IN_FLIGHT


async def test_an_error_reply_fails_its_own_call_only(raw: aioredis.Redis, prefix: str) -> None:
    batches = _scripts.coalesced(raw)
    key = f"{prefix}:text"
    await raw.set(key, "x")

    replies = await asyncio.gather(
        batches.submit(("APPEND", key, "y"), False),
        batches.submit(("INCR", key), False),
        batches.submit(("APPEND", key, "z"), False),
    )

    assert replies[0] == 2 and replies[2] == 3
    assert isinstance(replies[1], ResponseError)
    assert await raw.get(key) == "xyz"


async def test_a_call_cancelled_before_its_batch_leaves_is_never_sent(
    raw: aioredis.Redis, prefix: str
) -> None:
    batches = _scripts.coalesced(raw)
    cancelled = batches.submit(("SET", f"{prefix}:cancelled", 1), False)
    kept = batches.submit(("SET", f"{prefix}:kept", 1), False)
    cancelled.cancel()

    assert await kept == "OK"
    assert await raw.exists(f"{prefix}:cancelled") == 0


async def test_a_dropped_batch_sends_again_only_what_may_run_twice(
    redis_url: str, raw: aioredis.Redis, prefix: str
) -> None:
    # A connection that kills itself halfway through a batch: its own user's connections.
    user, password = f"u{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    await raw.execute_command("ACL", "SETUSER", user, "on", f">{password}", "~*", "+@all")
    client = aioredis.Redis.from_url(
        redis_url, decode_responses=True, username=user, password=password
    )
    try:
        batches = _scripts.coalesced(client)
        once, twice = f"{prefix}:once", f"{prefix}:twice"
        calls = [
            batches.submit(("INCR", once), False),
            batches.submit(("CLIENT", "KILL", "USER", user, "SKIPME", "no"), False),
            batches.submit(("INCR", twice), True),
        ]
        results = await asyncio.gather(*calls, return_exceptions=True)

        # What may not run twice reports that its outcome is unknown; it ran once.
        assert isinstance(results[0], RedisConnectionError)
        assert await raw.get(once) == "1"
        # What may run twice was sent again, alone, and answered.
        assert results[2] == 1
        assert await raw.get(twice) == "1"
    finally:
        await client.aclose()
        await raw.execute_command("ACL", "DELUSER", user)


async def test_a_closed_client_s_pool_and_batches_are_freed(redis_url: str, prefix: str) -> None:
    pools = []
    for index in range(5):
        queue = Queue(f"jobs{index}", connection=redis_url, prefix=prefix)
        await asyncio.gather(*(queue.add("n", {}) for _ in range(3)))  # batches and a spare
        pools.append(weakref.ref(queue.client.connection_pool))
        await queue.close()
    del queue
    gc.collect()

    assert [pool() for pool in pools] == [None] * 5


async def test_a_batch_carries_at_most_16_kib_and_a_larger_command_goes_alone(
    narrow: aioredis.Redis, raw: aioredis.Redis, prefix: str
) -> None:
    sent: list[list[int]] = []

    async def recording(client: Any, commands: Any, *, repeatable: bool) -> list[Any]:
        sent.append([len(command.wire) for command in commands])
        return await _scripts.execute(client, commands, repeatable=repeatable)

    batches = Coalescer(narrow, recording)
    batches.alone_first = False
    values = ["x" * 3000] * 20 + ["y" * 40_000] + ["z" * 3000] * 5
    commands = [_packed("SET", f"{prefix}:k{i}", value) for i, value in enumerate(values)]

    replies = await asyncio.gather(*(batches.submit(command, True) for command in commands))

    assert all(reply in (True, b"OK", "OK") for reply in replies)
    assert [len(await raw.get(f"{prefix}:k{i}") or "") for i in range(len(values))] == [
        len(value) for value in values
    ]
    assert sum(len(batch) for batch in sent) == len(values)
    for batch in sent:
        assert sum(batch) <= MAX_BATCH_BYTES or len(batch) == 1
    assert [size > 40_000 for batch in sent for size in batch].count(True) == 1
    assert len(sent) >= 6  # 26 commands, about 110 KiB: never in fewer writes


def _packed(*command: Any) -> Packed:
    packed = Packed(command)
    packed.wire = hiredis.pack_command(command)
    return packed
