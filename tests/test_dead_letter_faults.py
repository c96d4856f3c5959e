"""Dead letter operations when Redis refuses writes: an operation that raises has changed
nothing, and one that returns has done all of its work."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import OutOfMemoryError, ResponseError

from lazarus import DeadLetterFilter, Queue, _moves
from lazarus._keys import QueueKeys

from .conftest import wait_until


@contextlib.asynccontextmanager
async def memory_full(raw: aioredis.Redis) -> AsyncIterator[None]:
    """Redis at its memory limit with eviction off: every write is refused."""
    old = await raw.config_get("maxmemory*")  # (one pattern: Redis 6.2 takes one name)
    await raw.config_set("maxmemory-policy", "noeviction")
    await raw.config_set("maxmemory", 1)
    try:
        yield
    finally:
        await raw.config_set("maxmemory", old["maxmemory"])
        await raw.config_set("maxmemory-policy", old["maxmemory-policy"])


async def one_dead_letter(raw: aioredis.Redis, dlq: Queue) -> str:
    keys = dlq.keys
    await raw.hset(keys.job("d1"), mapping={
        "name": "charge", "data": json.dumps({"n": 1}), "dlq:sourceQueue": "jobs",
        "dlq:errorType": "KeyError", "dlq:reason": "unrecoverable",
        "dlq:deadLetteredAt": 1_700_000_000_000, "dlq:originalJobId": "j1",
        "dlq:originalOpts": '{"attempts":1,"delay":0}',
    })  # fmt: skip
    await raw.lpush(keys.wait, "d1")
    assert await dlq.migrate_dead_letters() == 1
    return "d1"


def actions(dlq: Queue, dl_id: str) -> dict[str, Callable[[], Awaitable[object]]]:
    return {
        "replay_one": lambda: dlq.replay_dead_letter(dl_id),
        "purge_one": lambda: dlq.purge_dead_letter(dl_id),
        "replay_all": lambda: dlq.replay_all_dead_letters(DeadLetterFilter(name="charge")),
        "purge_all": lambda: dlq.purge_dead_letters(DeadLetterFilter(name="charge")),
        "purge_whole": lambda: dlq.purge_dead_letters(),
    }


@pytest.mark.parametrize("operation", ["replay_one", "replay_all"])
async def test_a_replay_refused_for_memory_changes_nothing_and_succeeds_after(
    raw: aioredis.Redis, dlq: Queue, prefix: str, operation: str
) -> None:
    # Given a dead letter, and Redis out of memory
    dl_id = await one_dead_letter(raw, dlq)
    source = QueueKeys(prefix, "jobs")
    replay = actions(dlq, dl_id)[operation]

    # When the replay runs then, it raises
    async with memory_full(raw):
        try:
            await replay()
        except (OutOfMemoryError, ResponseError):
            refused = True
        else:
            # Only across Redis Cluster slots: the move's first step opens by taking the dead
            # letter out of its status index, a deletion, and Redis lets a script that has
            # written finish under maxmemory; the move is then finished by the second step
            # or by a sweep once memory is back.
            assert isinstance(raw, RedisCluster), "a replay went through with memory full"
            refused = False

        if refused:  # and nothing moved: the dead letter is whole, in the store, no new job
            assert await raw.hget(dlq.keys.job(dl_id), "dlq:sourceQueue") == "jobs"
            assert await dlq.get_dead_letter_count() == 1
            assert await raw.llen(source.wait) == 0

    # When memory is back, the same replay goes through once (or the move it began finishes)
    if refused:
        await replay()
    else:
        await _moves.sweep(dlq.client, dlq.keys, dlq.max_events, min_age_ms=0)

    async def replayed_once() -> bool:
        return await raw.llen(source.wait) == 1

    await wait_until(replayed_once, message="one replayed job in the source queue")
    assert await dlq.get_dead_letter_count() == 0


@pytest.mark.parametrize("operation", ["purge_one", "purge_all", "purge_whole"])
async def test_a_purge_frees_memory_so_it_goes_through_even_when_memory_is_full(
    raw: aioredis.Redis, dlq: Queue, operation: str
) -> None:
    dl_id = await one_dead_letter(raw, dlq)

    async with memory_full(raw):
        await actions(dlq, dl_id)[operation]()

        assert not await raw.exists(dlq.keys.job(dl_id))
        assert await dlq.get_dead_letter_count() == 0
        assert await raw.hlen(dlq.keys.dl_counts) == 0


async def test_a_replay_whose_registry_write_fails_raises_before_it_replays(
    raw: aioredis.Redis, dlq: Queue, prefix: str
) -> None:
    # Given a dead letter, and a queue registry that cannot be written (wrong type)
    dl_id = await one_dead_letter(raw, dlq)
    await raw.delete(dlq.keys.registry)
    await raw.set(dlq.keys.registry, "not a set")

    # When it is replayed, the replay raises
    with pytest.raises(ResponseError, match="WRONGTYPE"):
        await dlq.replay_dead_letter(dl_id)

    # Then it raised before doing anything: the dead letter is still there, no job was made
    assert await dlq.get_dead_letter_count() == 1
    assert await raw.llen(QueueKeys(prefix, "jobs").wait) == 0
