"""Workers register in Redis while they run (lazarus.workers), so operators see who works."""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import pytest
import redis.asyncio as aioredis

from lazarus import Queue, workers
from lazarus._connection import now_ms
from lazarus.workers import Presence, list_workers
from tests.conftest import wait_until
from tests.faults import out_of_memory, private_redis


async def test_a_running_worker_is_listed_and_leaves_when_it_closes(
    queue: Queue, make_worker: Any
) -> None:
    # Given a worker of the queue
    worker = make_worker(lambda job: None, concurrency=3, name="w-1")

    async def listed() -> bool:
        return [w.name for w in await list_workers(queue.client, queue.keys)] == ["w-1"]

    # Then it is listed with its details
    await wait_until(listed)
    (info,) = await list_workers(queue.client, queue.keys)
    assert (info.concurrency, info.pid, info.running) == (3, os.getpid(), 0)
    assert info.last_seen >= info.started_at > 0
    # When it closes, then it is gone at once
    await worker.close()
    assert await list_workers(queue.client, queue.keys) == []


async def test_an_expired_registration_is_not_listed_and_is_swept_by_the_next_heartbeat(
    queue: Queue, raw: aioredis.Redis
) -> None:
    # Given a worker that died: its registration expired a second ago
    await raw.zadd(queue.keys.workers, {"dead": 1_000})
    await raw.hset(queue.keys.workers_info, "dead", json.dumps({"pid": 1}))
    assert await list_workers(queue.client, queue.keys) == []
    # When a live worker's heartbeat runs
    await Presence(queue.client, queue.keys, "alive", 1, lambda: 0).beat()
    # Then only the live one is left, details and all
    assert await raw.zrange(queue.keys.workers, 0, -1) == ["alive"]
    assert await raw.hkeys(queue.keys.workers_info) == ["alive"]


async def test_a_heartbeat_lists_its_worker_again_after_its_own_registration_lapsed(
    queue: Queue, raw: aioredis.Redis
) -> None:
    # Given a worker whose registration lapsed (its heartbeats missed for longer than
    # HEARTBEAT_TTL: Redis unreachable, the process stopped), beside one that died
    presence = Presence(queue.client, queue.keys, "late", 2, lambda: 1)
    await presence.beat()
    await raw.zadd(queue.keys.workers, {"late": now_ms() - 1, "dead": 1_000})
    await raw.hset(queue.keys.workers_info, "dead", json.dumps({"pid": 1}))
    assert await list_workers(queue.client, queue.keys) == []

    # When its heartbeat runs again
    await presence.beat()

    # Then it is listed again at once, details and all, and the dead one is gone
    (info,) = await list_workers(queue.client, queue.keys)
    assert (info.name, info.concurrency, info.running) == ("late", 2, 1)
    assert await raw.zrange(queue.keys.workers, 0, -1) == ["late"]
    assert await raw.hkeys(queue.keys.workers_info) == ["late"]


async def test_a_heartbeat_forgets_a_bounded_number_of_lapsed_workers_and_the_next_the_rest(
    queue: Queue, raw: aioredis.Redis
) -> None:
    # Given 1,500 workers that died, their registrations lapsed
    await raw.zadd(queue.keys.workers, {f"dead-{i}": 1_000 + i for i in range(1_500)})
    await raw.hset(queue.keys.workers_info, mapping={f"dead-{i}": "{}" for i in range(1_500)})
    presence = Presence(queue.client, queue.keys, "alive", 1, lambda: 0)

    # When a live worker beats twice
    await presence.beat()
    left = await raw.zcard(queue.keys.workers)
    await presence.beat()

    # Then the first beat forgot the oldest 1,000, the second the other 500
    assert left == 501
    assert await raw.zrange(queue.keys.workers, 0, -1) == ["alive"]
    assert await raw.hkeys(queue.keys.workers_info) == ["alive"]


async def test_the_heartbeat_goes_on_after_redis_refused_writes_for_a_while(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(workers, "HEARTBEAT_INTERVAL", 0.05)
    with private_redis() as server:
        client = aioredis.Redis.from_url(server.url, decode_responses=True)
        queue = Queue("jobs", connection=client)
        presence = Presence(client, queue.keys, "w-1", 1, lambda: 0)
        beating = asyncio.create_task(presence.run())
        try:
            await wait_until(lambda: _listed(queue), message="registered")
            # Heartbeats refused (out of memory) for a few intervals...
            async with out_of_memory(client):
                refused_at = now_ms()
                await asyncio.sleep(0.3)  # several heartbeats' worth of refusals

            async def renewed() -> bool:
                (info,) = await list_workers(client, queue.keys)
                return info.last_seen > refused_at + 300

            # ... then the heartbeat renews the registration again.
            await wait_until(renewed, message="a heartbeat after the refusals")
            assert not beating.done()
        finally:
            presence.stop()
            await beating
            await queue.close()
            await client.aclose()


async def _listed(queue: Queue) -> bool:
    return [w.name for w in await list_workers(queue.client, queue.keys)] == ["w-1"]
