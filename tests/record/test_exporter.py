"""The exporter copies every change of every dead letter into the record, once and in order,
on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import redis.asyncio as aioredis

from lazarus import Queue, Worker
from lazarus._keys import QueueKeys
from lazarus.record.database import Database, open_database
from lazarus.record.exporter import RecordExporter
from lazarus.record.outbox import Outbox

from ..conftest import wait_until
from .helpers import dead_letter

MakeWorker = Callable[..., Worker]
BIG = '{"z":1,"a":123456789012345678901234567890,"list":[],"obj":{},"f":1.50}'


@pytest.fixture
def exporter(raw: aioredis.Redis, db: Database, prefix: str) -> RecordExporter:
    return RecordExporter(raw, db, prefix=prefix, batch=3)


async def drain(exporter: RecordExporter) -> None:
    while await exporter.step():
        pass


async def rows(db: Database) -> list[dict[str, object]]:
    return await db.fetch(
        f"SELECT id, status, job_type, source_queue, error_type, {db.payload('job_payload')}, "
        "removed_at FROM dead_letters ORDER BY id"
    )


async def events(db: Database, dead_letter_id: str) -> list[tuple[object, object]]:
    found = await db.fetch(
        "SELECT event, status FROM dead_letter_events WHERE dead_letter_id = ? "
        "ORDER BY outbox_position",
        (dead_letter_id,),
    )
    return [(r["event"], r["status"]) for r in found]


async def test_dead_letters_reach_the_record_with_the_payload_byte_for_byte(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, exporter: RecordExporter, db: Database,
    raw: aioredis.Redis, prefix: str,
) -> None:  # fmt: skip
    # Given an exporter that has enabled the outbox, then five dead letters (batches of 3)
    await raw.sadd(QueueKeys(prefix, dlq.name).dead_letter_registry, dlq.name)
    await exporter.enable()
    jobs = await dead_letter(make_worker, queue, dlq, [("email.send", i) for i in range(5)])

    # When the exporter drains the outbox
    await drain(exporter)

    # Then there is one row per dead letter, pending, with its fields
    found = await rows(db)
    assert sorted(r["id"] for r in found) == sorted(j.id for j in jobs)
    assert {r["status"] for r in found} == {"pending"}
    assert {r["error_type"] for r in found} == {"UnrecoverableError"}
    assert {r["source_queue"] for r in found} == {"jobs"}
    assert await raw.xlen(QueueKeys(prefix, dlq.name).dl_outbox) == 0


async def test_payload_keeps_big_integers_key_order_and_empty_containers(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, exporter: RecordExporter, db: Database,
    raw: aioredis.Redis, prefix: str,
) -> None:  # fmt: skip
    # Given a dead letter whose payload JSON has a big integer, keys out of order, [] and {}
    await raw.sadd(QueueKeys(prefix, dlq.name).dead_letter_registry, dlq.name)
    await exporter.enable()
    # (written as raw JSON text: Python's encoder would never produce 1.50)
    job = await queue.add("big", {"placeholder": 0})
    await raw.hset(QueueKeys(prefix, "jobs").job(job.id), "data", BIG)
    await dead_letter(make_worker, queue, dlq, [])

    # When it is exported
    await drain(exporter)

    # Then the record holds exactly those bytes
    [row] = await rows(db)
    assert row["job_payload"] == BIG


async def test_replay_and_purge_are_applied_in_order_and_keep_the_row(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, exporter: RecordExporter, db: Database,
    raw: aioredis.Redis, prefix: str,
) -> None:  # fmt: skip
    # Given two exported dead letters
    await raw.sadd(QueueKeys(prefix, dlq.name).dead_letter_registry, dlq.name)
    await exporter.enable()
    first, second = await dead_letter(make_worker, queue, dlq, [("a", 1), ("b", 2)])
    await drain(exporter)

    # When one is replayed and the other purged, then exported
    await dlq.replay_dead_letter(first.id)
    await dlq.purge_dead_letter(second.id)
    await drain(exporter)

    # Then both rows stay, with their last status and their events in order: the replayed one
    # is processing (it stays in Redis until its new job ends), the purged one is gone
    by_id = {r["id"]: r for r in await rows(db)}
    assert by_id[first.id]["status"] == "processing"
    assert by_id[second.id]["status"] == "purged"
    assert by_id[first.id]["removed_at"] is None
    assert by_id[second.id]["removed_at"] is not None
    assert await events(db, first.id) == [
        ("dead-lettered", "pending"),
        ("processing", "processing"),
    ]
    assert await events(db, second.id) == [("dead-lettered", "pending"), ("purged", "purged")]


async def test_each_event_keeps_the_status_its_change_entered_when_applied_late(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, exporter: RecordExporter, db: Database,
    raw: aioredis.Redis, prefix: str,
) -> None:  # fmt: skip
    # Given a dead letter, replayed, whose replay completed, all before the exporter drains
    await raw.sadd(QueueKeys(prefix, dlq.name).dead_letter_registry, dlq.name)
    await exporter.enable()
    [letter] = await dead_letter(make_worker, queue, dlq, [("a", 1)])
    await dlq.replay_dead_letter(letter.id)
    worker = make_worker(lambda j: "fixed", queue.name)

    async def resolved() -> bool:
        peeked = await dlq.peek_dead_letter(letter.id)
        return peeked is not None and peeked.dead_letter is not None \
            and peeked.dead_letter.status == "resolved"  # fmt: skip

    await wait_until(resolved, message="the replay resolved")
    await worker.close()

    # When the exporter drains the three changes at once
    await drain(exporter)

    # Then each event row has the status its change entered, and the row the newest
    assert await events(db, letter.id) == [
        ("dead-lettered", "pending"), ("processing", "processing"), ("resolved", "resolved"),
    ]  # fmt: skip
    assert {r["id"]: r["status"] for r in await rows(db)}[letter.id] == "resolved"


async def test_a_change_applied_again_or_late_leaves_the_row_as_the_newest_change_made_it(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, exporter: RecordExporter, db: Database,
    raw: aioredis.Redis, prefix: str,
) -> None:  # fmt: skip
    # Given a dead letter dead-lettered then purged, both changes in the outbox
    keys = QueueKeys(prefix, dlq.name)
    await raw.sadd(keys.dead_letter_registry, dlq.name)
    await exporter.enable()
    [letter] = await dead_letter(make_worker, queue, dlq, [("a", 1)])
    await dlq.purge_dead_letter(letter.id)
    entries = await exporter.outbox.take(dlq.name, count=10)
    assert [e.event for e in entries] == ["dead-lettered", "purged"]

    # When the newest change is applied first, then both again, in order
    await exporter.apply(entries[1:])
    await exporter.apply(entries)

    # Then the row is the purged one and each event is recorded once
    [row] = await rows(db)
    assert row["status"] == "purged"
    assert await events(db, letter.id) == [("dead-lettered", "pending"), ("purged", "purged")]


async def test_dead_letters_held_before_the_outbox_was_enabled_are_copied_once(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, exporter: RecordExporter, db: Database,
    raw: aioredis.Redis, prefix: str,
) -> None:  # fmt: skip
    # Given two dead letters made while no record was configured: no outbox entry
    await raw.sadd(QueueKeys(prefix, dlq.name).dead_letter_registry, dlq.name)
    jobs = await dead_letter(make_worker, queue, dlq, [("a", 1), ("b", 2)])
    assert await raw.exists(QueueKeys(prefix, dlq.name).dl_outbox) == 0

    # When an exporter starts
    await drain(exporter)

    # Then both are in the record
    assert sorted(r["id"] for r in await rows(db)) == sorted(j.id for j in jobs)


class _FailsOnce:
    """A database whose first write fails (a brief outage), then the real one."""

    def __init__(self, db: Database) -> None:
        self.db, self.failures = db, 1

    def __getattr__(self, name: str) -> Any:
        return getattr(self.db, name)

    async def run(self, statements: Any) -> Any:
        if self.failures:
            self.failures -= 1
            raise ConnectionError("the database is briefly unavailable")
        return await self.db.run(statements)


async def test_a_copy_of_earlier_dead_letters_cut_short_is_done_again_by_the_next_step(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, db: Database, raw: aioredis.Redis,
    prefix: str,
) -> None:  # fmt: skip
    # Given five dead letters made while no record was configured, and a database whose
    # first write fails
    await raw.sadd(QueueKeys(prefix, dlq.name).dead_letter_registry, dlq.name)
    jobs = await dead_letter(make_worker, queue, dlq, [("a", i) for i in range(5)])
    exporter = RecordExporter(raw, _FailsOnce(db), prefix=prefix, batch=2)  # type: ignore[arg-type]

    # When the exporter's first step fails in the copy, and it goes on
    with pytest.raises(ConnectionError):
        await exporter.step()
    await drain(exporter)

    # Then every one of them is in the record all the same
    assert sorted(r["id"] for r in await rows(db)) == sorted(j.id for j in jobs)


async def test_the_copy_of_earlier_dead_letters_misses_none_when_others_leave_meanwhile(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, db: Database, raw: aioredis.Redis,
    prefix: str,
) -> None:  # fmt: skip
    # Given six dead letters made while no record was configured, copied two at a time, and
    # the oldest purged right after the first two are copied
    await raw.sadd(QueueKeys(prefix, dlq.name).dead_letter_registry, dlq.name)
    jobs = await dead_letter(make_worker, queue, dlq, [("a", i) for i in range(6)])
    oldest = (await dlq.get_dead_letter_jobs(0, -1))[-1].id  # newest first

    class PurgeAfterFirst(_FailsOnce):
        async def run(self, statements: Any) -> Any:
            done = await self.db.run(statements)
            if self.failures:
                self.failures -= 1
                await dlq.purge_dead_letter(oldest)
            return done

    exporter = RecordExporter(raw, PurgeAfterFirst(db), prefix=prefix, batch=2)  # type: ignore[arg-type]

    # When the exporter copies them
    await drain(exporter)

    # Then every one that stayed is in the record: none was skipped by the shift
    recorded = {r["id"] for r in await rows(db)}
    assert {j.id for j in jobs} - {oldest} <= recorded


async def test_forgetting_the_last_drainer_switches_the_outbox_off_and_deletes_it(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, exporter: RecordExporter,
    raw: aioredis.Redis, prefix: str,
) -> None:  # fmt: skip
    # Given the record's and a webhook's groups on an outbox holding one undrained entry
    keys = QueueKeys(prefix, dlq.name)
    await raw.sadd(keys.dead_letter_registry, dlq.name)
    await exporter.enable()
    hook = Outbox(raw, prefix, group="webhook:ops", consumer="c")
    await hook.enable(dlq.name)
    await dead_letter(make_worker, queue, dlq, [("a", 1)])

    # When the record is forgotten, the webhook's group still holds the entry back
    await exporter.outbox.forget(dlq.name)
    assert await raw.xlen(keys.dl_outbox) == 1
    assert await raw.exists(keys.dl_outbox_enabled) == 1

    # And when the webhook is forgotten too, the outbox is off and gone
    await hook.forget(dlq.name)
    assert await raw.exists(keys.dl_outbox, keys.dl_outbox_enabled) == 0
    await dead_letter(make_worker, queue, dlq, [("b", 2)])
    assert await raw.exists(keys.dl_outbox) == 0


class GroupsReadThen:
    """A Redis client that runs ``then`` once, right after its first ``XINFO GROUPS``: another
    process acting between a forget's reading of the groups and what it does about them."""

    def __init__(self, redis: aioredis.Redis, then: Callable[[], Any]) -> None:
        self._redis, self._then, self.fired = redis, then, False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._redis, name)

    async def xinfo_groups(self, name: str) -> Any:
        groups = await self._redis.xinfo_groups(name)
        if not self.fired:
            self.fired = True
            await self._then()
        return groups


async def test_a_drainer_enabling_the_outbox_while_the_last_group_is_forgotten_keeps_it(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, raw: aioredis.Redis, prefix: str
) -> None:
    # Given an outbox that only the record's group drains
    keys = QueueKeys(prefix, dlq.name)
    await raw.sadd(keys.dead_letter_registry, dlq.name)
    await Outbox(raw, prefix, group="record", consumer="c").enable(dlq.name)
    hook = Outbox(raw, prefix, group="webhook:ops", consumer="c")
    racing = GroupsReadThen(raw, lambda: hook.enable(dlq.name))
    record = Outbox(racing, prefix, group="record", consumer="-")  # type: ignore[arg-type]

    # When the record's group is forgotten while a webhook deliverer enables the outbox (one
    # step of the forget, or between its steps)
    await record.forget(dlq.name)
    if not racing.fired:
        await hook.enable(dlq.name)

    # Then the outbox is on, with the webhook's group, and the next dead letter reaches it
    assert await raw.exists(keys.dl_outbox_enabled) == 1
    assert [g["name"] for g in await raw.xinfo_groups(keys.dl_outbox)] == ["webhook:ops"]
    [letter] = await dead_letter(make_worker, queue, dlq, [("a", 1)])
    assert [e.id for e in await hook.take(dlq.name, count=10)] == [letter.id]


async def test_a_record_started_after_a_webhook_drained_the_outbox_still_gets_every_dead_letter(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, exporter: RecordExporter, db: Database,
    raw: aioredis.Redis, prefix: str,
) -> None:  # fmt: skip
    # Given a webhook group that switched the outbox on, read and acknowledged an arrival
    keys = QueueKeys(prefix, dlq.name)
    await raw.sadd(keys.dead_letter_registry, dlq.name)
    hook = Outbox(raw, prefix, group="webhook:ops", consumer="c")
    await hook.enable(dlq.name)
    [letter] = await dead_letter(make_worker, queue, dlq, [("a", 1)])
    taken = await hook.take(dlq.name, count=10)
    await hook.ack(dlq.name, [e.position for e in taken])
    await hook.trim(dlq.name)
    assert await raw.xlen(keys.dl_outbox) == 0

    # When the record's exporter starts
    await drain(exporter)

    # Then the dead letter is in the record all the same
    assert [r["id"] for r in await rows(db)] == [letter.id]


async def test_a_status_change_is_applied_from_the_hash_with_its_timeline(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, exporter: RecordExporter, db: Database,
    raw: aioredis.Redis, prefix: str,
) -> None:  # fmt: skip
    # Given an exported dead letter whose status then changes the way a status change script
    # does it: the hash gets the status and its timeline, the outbox an entry named after it
    keys = QueueKeys(prefix, dlq.name)
    await raw.sadd(keys.dead_letter_registry, dlq.name)
    await exporter.enable()
    [letter] = await dead_letter(make_worker, queue, dlq, [("a", 1)])
    await drain(exporter)
    timeline = '[{"status":"pending","at":1},{"status":"resolved","at":2,"actor":"ops"}]'
    await raw.hset(keys.job(letter.id), mapping={"dlq:status": "resolved",
                                                 "dlq:timeline": timeline})  # fmt: skip
    await raw.xadd(keys.dl_outbox, {"event": "resolved", "id": letter.id, "at": "",
                                    "status": "resolved"})  # fmt: skip

    # When the exporter drains
    await drain(exporter)

    # Then the row has the new status, when it was resolved, and the timeline as text
    [row] = await db.fetch(
        f"SELECT status, resolved_at, {db.payload('timeline')} FROM dead_letters"
    )
    assert row["status"] == "resolved" and row["resolved_at"] is not None
    assert row["timeline"] == timeline
    assert await events(db, letter.id) == [("dead-lettered", "pending"), ("resolved", "resolved")]


@pytest.mark.parametrize(
    ("batch", "error"), [(0, ValueError), (10_001, ValueError), (True, TypeError), ("5", TypeError)]
)
def test_a_bad_batch_size_raises_naming_batch(
    raw: aioredis.Redis, batch: object, error: type[Exception], sqlite_url: str
) -> None:
    with pytest.raises(error, match="batch"):
        RecordExporter(raw, open_database(sqlite_url), batch=batch)  # type: ignore[arg-type]
