"""``lazarus migrate``: dead letters that lazarus 0.1 kept in a dead letter queue's waiting
list move into its dead letter store; ordinary queues are left alone unless named."""

from __future__ import annotations

import redis.asyncio as aioredis

from lazarus import Queue
from lazarus._keys import QueueKeys

from .conftest import Invoke, parsed

NOW = 1_736_937_000_000


async def old_dead_letter(raw: aioredis.Redis, keys: QueueKeys, dl_id: str, name: str) -> None:
    """A dead letter as lazarus 0.1 wrote it: a job hash with ``dlq:*`` fields at the head of
    the dead letter queue's waiting list, counted in its meta hash, the queue registered."""
    await raw.hset(keys.job(dl_id), mapping={
        "name": name, "data": '{"n":1}', "opts": "{}", "timestamp": NOW,
        "dlq:sourceQueue": "src", "dlq:originalJobId": f"orig-{dl_id}",
        "dlq:failedReason": "boom", "dlq:errorType": "ValueError", "dlq:deadLetteredAt": NOW,
        "dlq:originalOpts": '{"attempts":1}', "dlq:reason": "attempts_exhausted",
        "dlq:replayCount": 0,
    })  # fmt: skip
    await raw.lpush(keys.wait, dl_id)
    await raw.hincrby(keys.meta, "count:deadLettered:attempts_exhausted:src", 1)
    await raw.sadd(keys.registry, keys.queue)


async def test_migrate_moves_old_dead_letters_of_every_dead_letter_queue_only(
    raw: aioredis.Redis, prefix: str, redis_url: str, invoke: Invoke
) -> None:
    # Given a 0.1 dead letter queue with two dead letters, and a source queue with a job
    old = QueueKeys(prefix, "old-dlq")
    await old_dead_letter(raw, old, "d1", "charge")
    await old_dead_letter(raw, old, "d2", "refund")
    async with Queue("src", connection=redis_url, prefix=prefix) as src:
        waiting = await src.add("later", {})

        # When the operator migrates, as a table and then again as JSON
        first = await invoke("migrate")
        again = parsed(await invoke("migrate", "--json"))

        # Then both dead letters moved into the store, once, and the source queue was not
        # touched: its job still waits, and it is not taken for a dead letter queue
        assert first.exit_code == 0, first.output
        assert "old-dlq: moved 2 dead letters" in first.stdout
        assert "moved 2 dead letters in 1 queue" in first.stdout
        assert again == {"queues": [{"name": "old-dlq", "moved": 0}], "moved": 0}
        assert [j.id for j in await src.get_waiting()] == [waiting.id]
    assert await raw.smembers(old.dead_letter_registry) == {"old-dlq"}
    async with Queue("old-dlq", connection=redis_url, prefix=prefix) as dlq:
        assert [j.id for j in (await dlq.search_dead_letters()).jobs] == ["d2", "d1"]
    listed = parsed(await invoke("dlq", "list", "old-dlq", "--name", "refund", "--json"))
    assert [d["id"] for d in listed["deadLetters"]] == ["d2"] and listed["total"] == 1


async def test_migrate_of_named_queues_runs_on_those_only(
    raw: aioredis.Redis, prefix: str, invoke: Invoke
) -> None:
    # Given two 0.1 dead letter queues
    await old_dead_letter(raw, QueueKeys(prefix, "a-dlq"), "a1", "x")
    await old_dead_letter(raw, QueueKeys(prefix, "b-dlq"), "b1", "y")

    # When only one is named
    document = parsed(await invoke("migrate", "b-dlq", "--json"))

    # Then only that one moved
    assert document == {"queues": [{"name": "b-dlq", "moved": 1}], "moved": 1}
    assert await raw.lrange(QueueKeys(prefix, "a-dlq").wait, 0, -1) == ["a1"]


async def test_migrate_without_dead_letter_queues_says_there_is_nothing_to_do(
    invoke: Invoke,
) -> None:
    result = await invoke("migrate")
    bad = await invoke("migrate", "has space")

    assert result.exit_code == 0, result.output
    assert "no dead letter queues under prefix" in result.stdout
    assert bad.exit_code == 2 and "Invalid value for '[QUEUE]...'" in bad.output
