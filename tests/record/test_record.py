"""The Record: pages, one dead letter with its events, stats, replay and delete, on SQLite and
PostgreSQL, filled by a real exporter from real dead letters."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest
import redis.asyncio as aioredis

from lazarus import JobNotFoundError, JobStateError, Queue, Worker
from lazarus._keys import QueueKeys
from lazarus.record import Record, RecordExporter, RecordSchemaError, open_database
from lazarus.record.database import Database
from lazarus.record.outbox import OutboxEntry
from lazarus.record.queries import list_dead_letters
from lazarus.record.rows import statements

from .helpers import dead_letter

MakeWorker = Callable[..., Worker]


@pytest.fixture
async def record(
    record_url: str, db: object, raw: aioredis.Redis, prefix: str
) -> AsyncIterator[Record]:
    r = Record(record_url, connection=raw, prefix=prefix)
    yield r
    await r.close()


async def export(raw: aioredis.Redis, record: Record, prefix: str, dlq: Queue) -> None:
    await raw.sadd(QueueKeys(prefix, dlq.name).dead_letter_registry, dlq.name)
    exporter = RecordExporter(raw, record.db, prefix=prefix)
    while await exporter.step():
        pass


async def test_list_pages_newest_first_filtered_by_job_type_with_totals(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, record: Record, raw: aioredis.Redis,
    prefix: str,
) -> None:  # fmt: skip
    # Given three email and two sms dead letters in the record
    jobs = [("email.send", 1), ("sms.send", 2), ("email.send", 3), ("sms.send", 4),
            ("email.send", 5)]  # fmt: skip
    letters = await dead_letter(make_worker, queue, dlq, jobs)
    await export(raw, record, prefix, dlq)

    # When the emails are listed two per page
    first = await record.list(page=1, limit=2, job_type="email.send")
    second = await record.list(page=2, limit=2, job_type="email.send")

    # Then the pages hold the three emails, newest first
    emails = [j.id for j in letters if j.name == "email.send"]
    assert [r["id"] for r in first.rows + second.rows] == emails
    assert (first.total, first.total_pages, len(second.rows)) == (3, 2, 1)


@pytest.mark.parametrize(
    ("options", "error", "named"),
    [({"status": "lost"}, ValueError, "status must be one of pending"),
     ({"status": "PENDING"}, ValueError, "status must be one of"),
     ({"queue": "bad{"}, ValueError, "queue"),
     ({"job_type": 5}, TypeError, "job_type must be a str or None")],
)  # fmt: skip
async def test_list_refuses_a_filter_no_row_can_match_naming_it(
    record: Record, options: dict[str, object], error: type[Exception], named: str
) -> None:
    # When the record is listed by a status, queue or job type no row can hold
    with pytest.raises(error) as raised:
        await record.list(**options)

    # Then the error names the filter (it answered an empty page)
    assert named in str(raised.value)


async def test_dead_letters_of_one_millisecond_list_newest_arrival_first(db: Database) -> None:
    # Given three dead letters of one millisecond whose ids sort against their arrival order,
    # then a later change of the first (its status) and a second arrival of the second
    def change(position: str, event: str, letter: str, at: int) -> OutboxEntry:
        return OutboxEntry("dlq", position, event, letter, at, "pending", {})

    def fields(at: int) -> dict[str, str]:
        return {"dlq:sourceQueue": "q", "name": "n", "dlq:deadLetteredAt": str(at)}

    for position, event, letter, at in [
        ("5-0", "dead-lettered", "c", 5), ("5-1", "dead-lettered", "a", 5),
        ("5-2", "dead-lettered", "b", 5), ("7-0", "status", "c", 7),
    ]:  # fmt: skip
        await db.run(statements(change(position, event, letter, at), fields(5)))
    before = [r["id"] for r in (await list_dead_letters(db)).rows]
    await db.run(statements(change("9-0", "dead-lettered", "a", 9), fields(9)))

    # When the record lists them
    after = [r["id"] for r in (await list_dead_letters(db)).rows]

    # Then one millisecond's dead letters come newest arrival first, a change other than a new
    # arrival moves none of them, and a dead letter that arrives again comes first
    assert before == ["b", "a", "c"]
    assert after == ["a", "b", "c"]


async def test_dead_letters_copied_from_the_store_keep_its_order_within_a_millisecond(
    dlq: Queue, record: Record, raw: aioredis.Redis, prefix: str
) -> None:
    # Given four dead letters of one millisecond, in the store before the record's outbox
    # was on, whose ids sort against their arrival order
    async with raw.pipeline(transaction=False) as pipe:
        for letter in ["c", "a", "d", "b"]:
            pipe.hset(dlq.keys.job(letter), mapping={
                "name": "n", "data": "1", "timestamp": 5000, "dlq:sourceQueue": "q",
                "dlq:deadLetteredAt": 5000, "dlq:originalJobId": f"o{letter}",
                "dlq:reason": "unrecoverable", "dlq:errorType": "E", "dlq:failedReason": "x",
                "dlq:originalOpts": "{}", "dlq:stacktrace": "[]", "dlq:attempts": "[]",
            })  # fmt: skip
            pipe.lpush(dlq.keys.wait, letter)
        await pipe.execute()
    assert await dlq.migrate_dead_letters() == 4

    # When the record copies them and lists them
    await export(raw, record, prefix, dlq)
    listed = [r["id"] for r in (await record.list(limit=10)).rows]

    # Then it lists them in the store's order, newest arrival first
    stored = [j.id for j in await dlq.find_dead_letters(limit=10)]
    assert listed == stored
    assert sorted(stored) == ["a", "b", "c", "d"] and stored != ["d", "c", "b", "a"]


async def test_stats_count_by_type_with_the_oldest_and_newest_failure(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, record: Record, raw: aioredis.Redis,
    prefix: str,
) -> None:  # fmt: skip
    letters = await dead_letter(make_worker, queue, dlq, [("a", 1), ("b", 2), ("a", 3)])
    await export(raw, record, prefix, dlq)

    stats = await record.stats()

    assert stats["total"] == 3
    assert stats["byType"] == [{"jobType": "a", "count": 2}, {"jobType": "b", "count": 1}]
    assert stats["oldest"] <= stats["newest"]
    assert stats["newest"].timestamp() * 1000 >= letters[-1].timestamp - 1


async def test_replay_of_a_dead_letter_gone_from_redis_enqueues_its_payload_once(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, record: Record, raw: aioredis.Redis,
    prefix: str,
) -> None:  # fmt: skip
    # Given a recorded dead letter that was purged from Redis
    await export(raw, record, prefix, dlq)  # the outbox is on before it arrives
    [letter] = await dead_letter(make_worker, queue, dlq, [("a", {"big": 1})])
    payload = await raw.hget(QueueKeys(prefix, dlq.name).job(letter.id), "data")
    await dlq.purge_dead_letter(letter.id)
    await export(raw, record, prefix, dlq)

    # When it is replayed from the record
    new_id = await record.replay(letter.id)

    # Then the source queue holds a new job with the same payload bytes, and the record says so
    assert await raw.hget(QueueKeys(prefix, "jobs").job(new_id), "data") == payload
    assert await queue.get_job_state(new_id) == "waiting"
    row = await record.get(letter.id)
    assert row is not None and row["status"] == "replayed" and row["replay_count"] == 1
    assert [e["event"] for e in row["events"]] == ["dead-lettered", "purged", "replayed"]
    with pytest.raises(JobStateError):
        await record.replay(letter.id)


async def test_replay_of_a_dead_letter_still_in_redis_goes_through_redis(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, record: Record, raw: aioredis.Redis,
    prefix: str,
) -> None:  # fmt: skip
    [letter] = await dead_letter(make_worker, queue, dlq, [("a", 1)])
    await export(raw, record, prefix, dlq)

    new_id = await record.replay(letter.id)
    await export(raw, record, prefix, dlq)

    assert await dlq.get_dead_letter_count() == 0
    assert await queue.get_job_state(new_id) == "waiting"
    row = await record.get(letter.id)
    assert row is not None and row["status"] == "processing"


async def test_delete_purges_redis_and_leaves_a_tombstone_the_outbox_cannot_undo(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, record: Record, raw: aioredis.Redis,
    prefix: str,
) -> None:  # fmt: skip
    [letter] = await dead_letter(make_worker, queue, dlq, [("a", 1)])
    await export(raw, record, prefix, dlq)

    await record.delete(letter.id)
    await export(raw, record, prefix, dlq)  # applies the purge the delete made in Redis

    assert await dlq.get_dead_letter_count() == 0
    with pytest.raises(JobNotFoundError):
        await record.replay(letter.id)
    row = await record.get(letter.id)
    assert row is not None and row["status"] == "deleted" and row["job_payload"] == "null"


async def test_a_record_that_was_never_migrated_is_refused_with_the_command_to_run(
    sqlite_url: str,
) -> None:
    record = Record(sqlite_url)
    with pytest.raises(RecordSchemaError, match="lazarus record migrate"):
        await record.stats()
    await record.close()


@pytest.mark.parametrize(
    "url", ["mysql://x/y", "sqlite://x.db", "sqlite:x.db"], ids=["mysql", "host", "no-slashes"]
)
def test_a_bad_record_url_raises_value_error_naming_the_url(url: str) -> None:
    with pytest.raises(ValueError, match="record URL"):
        open_database(url)
