"""Repeatable jobs: schedules, their occurrences (each once), listing and removal."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest
import redis.asyncio as aioredis

from lazarus import Job, Queue, Worker, _scripts, list_queues
from lazarus._connection import now_ms
from lazarus._repeat import schedule_keys
from lazarus._schedule import Repeat

from .conftest import keys_of, wait_until

MakeWorker = Callable[..., Worker]


def ms(*args: int, tz: str) -> int:
    return int(datetime(*args, tzinfo=ZoneInfo(tz)).timestamp() * 1000)  # type: ignore[misc]


async def test_an_every_schedule_adds_its_first_occurrence_on_the_next_multiple(
    queue: Queue,
) -> None:
    before = now_ms()
    job = await queue.add("report", {"kind": "daily"}, repeat={"every": 60_000})

    [schedule] = await queue.get_repeatable_jobs()
    assert schedule.every == 60_000 and schedule.name == "report" and schedule.count == 1
    assert schedule.next % 60_000 == 0 and before < schedule.next <= before + 60_000
    assert job.id == f"repeat:{schedule.key}:{schedule.next}"
    assert job.data == {"kind": "daily"} and job.repeat_key == schedule.key
    assert await queue.get_job_state(job.id) == "delayed"


async def test_adding_a_schedule_again_keeps_one_schedule_and_one_pending_occurrence(
    queue: Queue,
) -> None:
    first = await queue.add("report", 1, repeat={"every": 60_000})

    again = await asyncio.gather(*(queue.add("report", 2, repeat={"every": 60_000})
                                   for _ in range(5)))  # fmt: skip

    assert {j.id for j in again} == {first.id}
    assert len(await queue.get_repeatable_jobs()) == 1
    assert await queue.get_delayed_count() == 1


async def test_workers_run_each_occurrence_once_until_the_limit_ends_the_schedule(
    queue: Queue, make_worker: MakeWorker
) -> None:
    ran: list[str] = []

    async def record(job: Job) -> None:
        ran.append(job.id)

    await queue.add("tick", repeat={"every": 100, "limit": 4})
    for _ in range(3):
        make_worker(record, concurrency=2)

    await wait_until(lambda: _no_schedules(queue), message="the schedule to end")
    await wait_until(lambda: _completed(queue, 4), message="four occurrences to run")

    assert len(ran) == 4 and len(set(ran)) == 4
    due = sorted(int(i.rsplit(":", 1)[1]) for i in ran)
    assert all(d % 100 == 0 for d in due) and due == sorted(set(due))


async def _no_schedules(queue: Queue) -> bool:
    return await queue.get_repeatable_jobs() == []


async def _completed(queue: Queue, n: int) -> bool:
    return await queue.get_completed_count() == n and await queue.get_active_count() == 0


def test_cron_occurrences_follow_the_time_zone_across_a_clock_change() -> None:
    repeat = Repeat.parse({"pattern": "0 9 * * *", "tz": "Europe/Paris"})
    saturday_noon = ms(2026, 3, 28, 12, 0, tz="Europe/Paris")

    sunday = repeat.next_after(saturday_noon)

    assert sunday == ms(2026, 3, 29, 9, 0, tz="Europe/Paris")
    assert repeat.next_after(sunday) - sunday == 24 * 3600 * 1000


def test_missed_occurrences_are_skipped_and_limits_end_the_schedule() -> None:
    every = Repeat.parse({"every": 1000, "limit": 5, "end_date": 20_000})

    assert every.following(current=1000, count=1, now=1500) == 2000
    assert every.following(current=1000, count=1, now=10_500) == 11_000
    assert every.following(current=1000, count=5, now=1500) == -1
    assert every.following(current=19_000, count=2, now=19_500) == 20_000
    assert every.following(current=20_000, count=3, now=20_500) == -1


async def test_a_cron_schedule_is_due_at_its_next_match(queue: Queue) -> None:
    job = await queue.add("n", repeat={"pattern": "30 4 1 * *", "tz": "Asia/Tokyo"})

    [schedule] = await queue.get_repeatable_jobs()
    due = datetime.fromtimestamp(schedule.next / 1000, ZoneInfo("Asia/Tokyo"))
    assert (due.day, due.hour, due.minute) == (1, 4, 30)
    assert schedule.pattern == "30 4 1 * *" and schedule.tz == "Asia/Tokyo"
    assert job.id.endswith(f":{schedule.next}")


async def test_removing_a_schedule_removes_its_pending_occurrence(
    queue: Queue, raw: aioredis.Redis, prefix: str
) -> None:
    a = await queue.add("a", repeat={"every": 60_000})
    await queue.add("b", repeat={"pattern": "0 0 * * *"})
    [key_b] = [s.key for s in await queue.get_repeatable_jobs() if s.name == "b"]

    assert await queue.remove_repeatable("a", {"every": 60_000}) is True
    assert await queue.remove_repeatable_by_key(key_b) is True
    assert await queue.remove_repeatable_by_key(key_b) is False

    assert await queue.get_repeatable_jobs() == []
    assert await queue.get_job(a.id) is None
    assert await queue.get_delayed_count() == 0


async def test_advancing_an_occurrence_twice_adds_the_next_one_once(
    queue: Queue, raw: aioredis.Redis
) -> None:
    job = await queue.add("n", repeat={"every": 60_000})
    [schedule] = await queue.get_repeatable_jobs()
    await raw.hset(queue.keys.job(job.id), "lockToken", "w:1")  # as a claim leaves it
    keys = [*schedule_keys(queue.keys, schedule.key), queue.keys.completed, queue.keys.failed]
    following = schedule.next + 60_000
    args = [now_ms(), 100, schedule.key, schedule.next, following, job.id, "w:1"]

    replies = [await _scripts.load("repeat_job")(raw, keys, args) for _ in range(2)]

    assert replies == [1, 0]
    assert await queue.get_delayed_count() == 2
    assert await raw.hget(queue.keys.repeat(schedule.key), "next") == str(following)
    [advanced] = await queue.get_repeatable_jobs()
    assert advanced.last_run == job.id and advanced.last_skipped is None
    nxt = f"repeat:{schedule.key}:{following}"
    await raw.hset(queue.keys.job(nxt), "lockToken", "w:1")
    ended = await _scripts.load("repeat_job")(raw, keys, [now_ms(), 100, schedule.key,
                                                          following, -1, nxt, "w:1"])  # fmt: skip
    assert ended == 2 and await queue.get_repeatable_jobs() == []


@pytest.mark.parametrize(
    ("repeat", "options", "error", "field"),
    [
        ({}, {}, ValueError, "exactly one"),
        ({"every": 10, "pattern": "* * * * *"}, {}, ValueError, "exactly one"),
        ({"every": 0}, {}, ValueError, "repeat.every"),
        ({"every": "10"}, {}, TypeError, "repeat.every"),
        ({"pattern": "not cron"}, {}, ValueError, "repeat.pattern"),
        ({"pattern": "* * * * *", "tz": "Mars/Base"}, {}, ValueError, "repeat.tz"),
        ({"every": 10, "tz": "UTC"}, {}, ValueError, "repeat.tz"),
        ({"every": 10, "limit": 0}, {}, ValueError, "repeat.limit"),
        ({"every": 10, "cron": "x"}, {}, ValueError, "unknown keys"),
        ({"every": 10, "end_date": 5}, {}, ValueError, "repeat.end_date"),
        ({"every": 10, "overlap": "cancel"}, {}, ValueError, "repeat.overlap"),
        ({"every": 10, "job_ids": "uuid4"}, {}, ValueError, "repeat.job_ids"),
        ({"every": 10}, {"delay": 5}, ValueError, "delay"),
        ({"every": 10}, {"attempts": 0}, ValueError, "attempts"),
        ("daily", {}, TypeError, "repeat"),
    ],
)
async def test_a_bad_schedule_raises_naming_the_field_and_writes_nothing(
    queue: Queue, raw: aioredis.Redis, prefix: str, repeat: object, options: dict[str, object],
    error: type[Exception], field: str,
) -> None:  # fmt: skip
    with pytest.raises(error, match=field):
        await queue.add("n", repeat=repeat, **options)  # type: ignore[arg-type]

    assert await keys_of(raw, prefix) == set()


async def test_a_queue_that_only_has_a_schedule_is_listed(
    queue: Queue, redis_url: str, prefix: str
) -> None:
    await queue.add("report", None, repeat={"every": 60_000})

    assert await list_queues(redis_url, prefix=prefix) == ["jobs"]


async def test_adding_a_schedule_again_after_its_occurrence_was_removed_brings_one_back(
    queue: Queue,
) -> None:
    # Given a schedule whose pending occurrence was removed (by hand, or by a clean)
    first = await queue.add("tick", None, repeat={"every": 60_000})
    await queue.remove(first.id)
    assert await queue.get_job(first.id) is None

    # When the schedule is added again
    again = await queue.add("tick", None, repeat={"every": 60_000})

    # Then it has a pending occurrence again, the one its schedule says is next
    assert await queue.get_job_state(again.id) == "delayed"
    [schedule] = await queue.get_repeatable_jobs()
    assert again.id == f"repeat:{schedule.key}:{schedule.next}"
