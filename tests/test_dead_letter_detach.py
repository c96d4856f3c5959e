"""A purge of the whole store: its indexes detached at once, its dead letters then deleted in
bounded calls; what a purge stopped half-way leaves is finished by the next purge or pruning;
a store the purge does not wholly cover is purged one dead letter at a time."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster

from lazarus import DeadLetterFilter, Queue, UnrecoverableError, _scripts
from lazarus._connection import now_ms
from lazarus.dead_letter import detach

from .conftest import wait_until
from .test_dead_letter_store import T0, seed


async def store_keys(raw: aioredis.Redis, dlq: Queue) -> set[str]:
    """The store's keys left, but its sequence (kept, so that arrivals stay in order)."""
    found = {k async for k in raw.scan_iter(match=dlq.keys.dl + "*", count=1000)}
    return found - {dlq.keys.dl + "seq"}


async def dead_letter_hashes(raw: aioredis.Redis, dlq: Queue) -> int:
    return len([k async for k in raw.scan_iter(match=dlq.keys.job("*"), count=1000)])


class Stop(Exception):
    """Raised by a progress callback: the purging process dies there."""


async def test_a_whole_store_purge_empties_the_store_first_then_deletes_every_dead_letter(
    raw: aioredis.Redis, dlq: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given 300 dead letters of every kind, with logs, deleted 40 a call
    await seed(raw, dlq, 300, rng=random.Random(1))
    await raw.rpush(dlq.keys.logs("dl00007"), "a line")
    monkeypatch.setattr(detach, "DROP_MOST", 40)

    # When everything is purged, looking at the store at each report of progress
    seen: list[tuple[int, int, int]] = []

    async def progress(done: int) -> None:
        seen.append((done, await dlq.get_dead_letter_count(), await dead_letter_hashes(raw, dlq)))

    purged = await dlq.purge_dead_letters(on_progress=progress)

    # Then the store was empty from the first report on, while the hashes went 40 at a time
    assert purged == 300
    assert [done for done, _, _ in seen] == [*range(40, 300, 40), 300]
    assert {count for _, count, _ in seen} == {0}
    assert [left for _, _, left in seen] == [300 - done for done, _, _ in seen]
    # and nothing of the store, no hash and no logs are left; the purge is counted and told
    assert await store_keys(raw, dlq) == set()
    assert await dead_letter_hashes(raw, dlq) == 0
    assert not await raw.exists(dlq.keys.logs("dl00007"))
    assert int(await raw.hget(dlq.keys.meta, "count:purged")) == 300
    events = await raw.xrange(dlq.keys.events)
    assert sum(int(f["count"]) for _, f in events if f["event"] == "purged") == 300
    assert await dlq.find_dead_letters(limit=50) == []
    assert await dlq.count_dead_letters(DeadLetterFilter(name="push")) == 0


async def test_a_store_the_purge_does_not_cover_is_purged_one_by_one(
    raw: aioredis.Redis, dlq: Queue
) -> None:
    # Given 50 dead letters, one of them archived (outside the live statuses a purge covers)
    await seed(raw, dlq, 50, rng=random.Random(2))
    await dlq.archive_dead_letter("dl00003", actor="operator:test")

    # When everything live is purged
    purged = await dlq.purge_dead_letters()

    # Then the 49 went and the archived one stayed, indexed and counted
    assert purged == 49
    assert await dlq.count_dead_letters(DeadLetterFilter(status="archived")) == 1
    [kept] = await dlq.find_dead_letters(DeadLetterFilter(status="archived"), limit=50)
    assert kept.id == "dl00003"
    assert await dead_letter_hashes(raw, dlq) == 1


async def test_a_status_purge_detaches_when_the_store_holds_that_status_alone(
    raw: aioredis.Redis, dlq: Queue
) -> None:
    # Given 20 dead letters, all archived
    await seed(raw, dlq, 20, rng=random.Random(3))
    for n in range(20):
        await dlq.archive_dead_letter(f"dl{n:05d}", actor="operator:test")

    # When the archived ones are purged, the store is empty at the first progress report
    counts: list[int] = []

    async def progress(done: int) -> None:
        counts.append(await dlq.count_dead_letters(DeadLetterFilter(status="archived")))

    purged = await dlq.purge_dead_letters(DeadLetterFilter(status="archived"), on_progress=progress)

    # Then all 20 went, detached first
    assert purged == 20
    assert counts == [0]
    assert await store_keys(raw, dlq) == set()


async def test_detach_keeps_the_dead_letters_that_arrived_after_the_purge_began(
    raw: aioredis.Redis, dlq: Queue
) -> None:
    # Given 27 dead letters, then 3 that arrived after the purge's bound
    rng = random.Random(4)
    await seed(raw, dlq, 27, rng=rng, at=T0)
    late = await seed(raw, dlq, 3, rng=rng, start=27, at=T0 + 60_000)
    status_index = dlq.keys.dl_index("s", "pending")
    scores = {m["id"]: await raw.zscore(status_index, m["id"]) for m in late}
    before = await store_keys(raw, dlq)
    until = (T0 + 30_000) * 1000

    # When the detach may index again only 2 arrivals after its bound, it refuses and changes
    # nothing
    assert await detach_call(dlq, until=until, most_after=2) == []
    assert await store_keys(raw, dlq) == before
    assert await dlq.get_dead_letter_count() == 30

    # When it may index 3 again, it detaches the 27 and keeps the 3, indexed as they were
    reply = await detach_call(dlq, until=until, most_after=3)
    assert reply[0] == 27
    assert await raw.zcard(reply[1]) == 27
    assert await dlq.get_dead_letter_count() == 3
    found = await dlq.find_dead_letters(limit=50)
    assert {j.id for j in found} == set(scores)
    assert {m: await raw.zscore(status_index, m) for m in scores} == scores
    for field, key in [
        ("name", "name"),
        ("error_type", "dlq:errorType"),
        ("source_queue", "dlq:sourceQueue"),
        ("reason", "dlq:reason"),
    ]:
        for value in {m[key] for m in late}:
            counted = await dlq.count_dead_letters(DeadLetterFilter(**{field: value}))
            listed = await dlq.find_dead_letters(DeadLetterFilter(**{field: value}), limit=50)
            assert counted == len(listed) == sum(m[key] == value for m in late), (field, value)
    for n in range(30):
        held = await dlq.find_dead_letter_by_original_id(f"orig{n}")
        assert (held.id if held else None) == (f"dl{n:05d}" if n >= 27 else None)


async def detach_call(
    dlq: Queue, *, until: int, statuses: str = "pending", most_after: int = 100
) -> list[Any]:
    reply: list[Any] = await _scripts.load("detach_dead_letters")(
        dlq.client, [dlq.keys.dl, dlq.keys.job_prefix],
        [statuses, until, "t1", detach.MOST_INDEX_KEYS, most_after, ""],
    )  # fmt: skip
    return reply


async def test_a_store_with_more_index_keys_than_a_call_may_unlink_is_purged_one_by_one(
    raw: aioredis.Redis, dlq: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given 40 dead letters of four names, and a detach allowed 5 index keys
    await seed(raw, dlq, 40, rng=random.Random(5))
    monkeypatch.setattr(detach, "MOST_INDEX_KEYS", 5)
    reports: list[tuple[int, int]] = []

    async def progress(done: int) -> None:
        reports.append((done, await dlq.get_dead_letter_count()))

    # When everything is purged
    purged = await dlq.purge_dead_letters(on_progress=progress, batch_size=10)

    # Then it went batch by batch through the store (the next batch may be on its way when
    # one is reported: what is reported done is gone at least), and all of it went
    assert purged == 40
    assert [done for done, _ in reports] == [10, 20, 30, 40]
    assert all(left <= 40 - done for done, left in reports), reports
    assert reports[-1] == (40, 0)
    assert await store_keys(raw, dlq) == set()


@pytest.mark.parametrize("finisher", ["purge", "prune"])
async def test_what_a_purge_stopped_half_way_left_is_finished_by_the_next_purge_or_pruning(
    raw: aioredis.Redis, dlq: Queue, monkeypatch: pytest.MonkeyPatch, finisher: str
) -> None:
    # Given 100 dead letters, and a whole-store purge whose process dies after its first call
    await seed(raw, dlq, 100, rng=random.Random(6))
    monkeypatch.setattr(detach, "DROP_MOST", 30)

    def die(done: int) -> None:
        raise Stop

    with pytest.raises(Stop):
        await dlq.purge_dead_letters(on_progress=die)

    # Then the store is empty, and 70 hashes wait in the detached key it listed
    assert await dlq.get_dead_letter_count() == 0
    assert await dead_letter_hashes(raw, dlq) == 70
    [detached] = await raw.smembers(dlq.keys.dl_detached)
    assert await raw.zcard(detached) == 70

    # When, once it is a minute old, a purge of a filter that matches nothing runs, or the
    # retention pruning (before then, each leaves it to its purge)
    async def finish() -> None:
        if finisher == "purge":
            assert await dlq.purge_dead_letters(DeadLetterFilter(name="nothing")) == 0
        else:
            assert await dlq.prune_dead_letters() == 0

    await finish()
    assert await dead_letter_hashes(raw, dlq) == 70
    monkeypatch.setattr(detach, "LEFTOVER_AGE_MS", 0)
    await finish()

    # Then the 70 went too, and so did the detached key and its listing
    assert await dead_letter_hashes(raw, dlq) == 0
    assert await store_keys(raw, dlq) == set()
    assert int(await raw.hget(dlq.keys.meta, "count:purged")) == 100


async def test_a_whole_store_purge_sends_each_dead_letter_to_the_outbox(
    raw: aioredis.Redis, dlq: Queue
) -> None:
    # Given 25 dead letters arrived while nothing drained the outbox, and then an outbox on
    made = await seed(raw, dlq, 25, rng=random.Random(7))
    await raw.set(dlq.keys.dl_outbox_enabled, "1")

    # When everything is purged
    assert await dlq.purge_dead_letters() == 25

    # Then the outbox has one 'purged' entry per dead letter, with its fields as they were
    entries = [f for _, f in await raw.xrange(dlq.keys.dl_outbox) if f["event"] == "purged"]
    assert sorted(f["id"] for f in entries) == sorted(m["id"] for m in made)
    by_id = {m["id"]: m for m in made}
    for entry in entries:
        assert entry["h:data"] == by_id[entry["id"]]["data"]
        assert json.loads(entry["h:data"])["n"] == int(entry["id"][2:])


async def test_a_throttled_whole_store_purge_deletes_at_most_rate_a_call(
    raw: aioredis.Redis, dlq: Queue
) -> None:
    # Given 25 dead letters
    await seed(raw, dlq, 25, rng=random.Random(8))

    # When everything is purged at 20 a second
    started = now_ms()
    reports: list[int] = []
    assert await dlq.purge_dead_letters(rate=20, on_progress=reports.append) == 25

    # Then the calls deleted 20 and 5, and the second waited for the rate
    assert reports == [20, 25]
    assert now_ms() - started >= 900


@pytest.mark.parametrize("patient", ["1", "0"])
async def test_a_drop_call_yields_while_redis_frees_values_in_the_background(
    raw: aioredis.Redis, dlq: Queue, patient: str
) -> None:
    # Given 10 detached dead letters, and a large set that another client unlinks
    await seed(raw, dlq, 10, rng=random.Random(9))
    [count, detached] = await detach_call(dlq, until=(now_ms() + 1) * 1000)
    assert count == 10
    big = dlq.keys.dl + "elsewhere"  # one slot with the store (a cluster runs MULTI per slot)
    for first in range(0, 300_000, 50_000):
        await raw.sadd(big, *range(first, first + 50_000))
    drop = _scripts.load("drop_detached_dead_letters")
    await raw.script_load(drop.source)  # (every master, on a cluster)
    keys = [dlq.keys.dl, dlq.keys.events, dlq.keys.meta, detached, dlq.keys.job_prefix]

    # When a drop call runs right after the unlink (one transaction: Redis's background thread
    # has only begun to free the set), patient or not
    node = raw
    if isinstance(raw, RedisCluster):  # its pipelines send no scripts: the slot's master
        master = raw.get_node_from_key(big)
        node = aioredis.Redis(host=master.host, port=master.port, decode_responses=True)
    try:
        async with node.pipeline(transaction=True) as pipe:
            pipe.unlink(big)
            pipe.evalsha(drop.sha, len(keys), *keys, 1000, 4000, 100, now_ms(), patient)
            _, reply = await pipe.execute()
    finally:
        if node is not raw:
            await node.aclose()

    # Then a patient call did nothing and said so; one that is not deleted all 10
    if patient == "1":
        assert reply == [0, 10, 1]
        assert await dead_letter_hashes(raw, dlq) == 10
    else:
        assert reply == [10, 0, 0]
        assert await dead_letter_hashes(raw, dlq) == 0


async def _fails(job: Any) -> None:
    raise UnrecoverableError("no")


async def test_a_replay_that_fails_while_its_dead_letter_is_being_purged_becomes_a_new_one(
    raw: aioredis.Redis, queue: Queue, dlq: Queue, make_worker: Any
) -> None:
    # Given a dead letter replayed (processing), then detached by a whole-store purge of the
    # processing dead letters that has not deleted its hash yet
    await queue.add("n", {"n": 1})
    worker = make_worker(_fails, dead_letter_queue=dlq.name)
    await wait_until(lambda: _holds(dlq, 1), message="a dead letter")
    await worker.close()
    [first] = await dlq.get_dead_letter_jobs()
    replayed = await dlq.replay_dead_letter(first.id)
    [count, _] = await detach_call(dlq, until=(now_ms() + 1) * 1000, statuses="processing")
    assert count == 1

    # When the replayed job fails for good meanwhile, and the purge then goes on
    worker = make_worker(_fails, dead_letter_queue=dlq.name)
    await wait_until(lambda: _holds(dlq, 1), message="the replay dead-lettered")
    await worker.close()
    await dlq.settle_dead_letters()
    await detach.drop_leftovers(dlq.client, dlq.keys, dlq.max_events)

    # Then the replay is a dead letter of its own, whole, and every index entry has its hash
    [second] = await dlq.get_dead_letter_jobs()
    assert second.id != first.id and second.dead_letter is not None
    assert second.dead_letter.original_job_id == replayed
    assert await raw.exists(dlq.keys.job(first.id)) == 0
    for status in await raw.zrange(dlq.keys.dl + "v:s", 0, -1):
        for dl_id in await raw.zrange(dlq.keys.dl_index("s", status), 0, -1):
            assert await raw.exists(dlq.keys.job(dl_id)), (status, dl_id)


async def _holds(dlq: Queue, count: int) -> bool:
    return await dlq.count_dead_letters(DeadLetterFilter(status="pending")) == count
