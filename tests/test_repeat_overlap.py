"""Repeatable jobs that must not overlap (``overlap="skip"``), and occurrences named by UUIDv7s
(``job_ids="uuid7"``)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any

import redis.asyncio as aioredis

from lazarus import Job, Queue, Worker, _scripts
from lazarus._connection import now_ms
from lazarus._repeat import schedule_keys
from lazarus._schedule import occurrence_due

from .conftest import wait_until

MakeWorker = Callable[..., Worker]
UUIDV7 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


async def claim(raw: aioredis.Redis, queue: Queue, job_id: str, token: str) -> None:
    """Move a delayed job to active under ``token``, as a claim does."""
    keys = queue.keys
    await raw.zrem(keys.delayed, job_id)
    await raw.lpush(keys.active, job_id)
    await raw.zadd(keys.leases, {job_id: now_ms() + 30_000})
    await raw.hset(keys.job(job_id), "lockToken", token)


async def fire(raw: aioredis.Redis, queue: Queue, key: str, job_id: str, token: str) -> Any:
    """Call repeat_job as a worker does on claiming ``job_id``, the schedule's pending one."""
    keys = [*schedule_keys(queue.keys, key), queue.keys.completed, queue.keys.failed]
    due = occurrence_due(job_id)
    args = [now_ms(), 100, key, due, due + 60_000, job_id, token]
    return await _scripts.load("repeat_job")(raw, keys, args)


async def events_named(raw: aioredis.Redis, queue: Queue, name: str) -> list[dict[str, str]]:
    return [f for _, f in await raw.xrange(queue.keys.events) if f.get("event") == name]


async def test_an_occurrence_due_while_the_last_one_run_has_not_ended_is_skipped(
    queue: Queue, raw: aioredis.Redis
) -> None:
    # Given a schedule that must not overlap, whose last run (a job still waiting) has not
    # ended, and its pending occurrence just claimed
    pending = await queue.add("n", repeat={"every": 60_000, "overlap": "skip"})
    [schedule] = await queue.get_repeatable_jobs()
    earlier = await queue.add("n", None)
    await raw.hset(queue.keys.repeat(schedule.key), "run", earlier.id)
    await claim(raw, queue, pending.id, "w:1")

    # When the worker advances the schedule
    reply = await fire(raw, queue, schedule.key, pending.id, "w:1")

    # Then the claimed occurrence is gone unrun, the next one waits, and the skip is told
    assert reply == 3
    assert not await raw.exists(queue.keys.job(pending.id))
    assert await raw.lrange(queue.keys.active, 0, -1) == []
    assert await raw.zscore(queue.keys.leases, pending.id) is None
    [after] = await queue.get_repeatable_jobs()
    assert after.next == schedule.next + 60_000
    assert (after.last_run, after.last_skipped) == (earlier.id, pending.id)
    assert await queue.get_job_state(f"repeat:{schedule.key}:{after.next}") == "delayed"
    [told] = await events_named(raw, queue, "skipped")
    assert (told["jobId"], told["running"]) == (pending.id, earlier.id)
    # and a second run of the same call (a reply lost) skips it again, changing nothing
    assert await fire(raw, queue, schedule.key, pending.id, "w:1") == -3
    assert await queue.get_repeatable_jobs() == [after]


async def test_an_occurrence_due_once_the_last_one_run_ended_runs(
    queue: Queue, raw: aioredis.Redis
) -> None:
    # Given a schedule that must not overlap, whose last run completed
    pending = await queue.add("n", repeat={"every": 60_000, "overlap": "skip"})
    [schedule] = await queue.get_repeatable_jobs()
    earlier = await queue.add("n", None)
    await raw.zadd(queue.keys.completed, {earlier.id: now_ms()})
    await raw.hset(queue.keys.repeat(schedule.key), "run", earlier.id)
    await claim(raw, queue, pending.id, "w:1")

    # When its pending occurrence is claimed
    reply = await fire(raw, queue, schedule.key, pending.id, "w:1")

    # Then it runs: it stays claimed, and it is the schedule's last run
    assert reply == 1
    assert await queue.get_job_state(pending.id) == "active"
    [after] = await queue.get_repeatable_jobs()
    assert (after.last_run, after.last_skipped) == (pending.id, None)


async def test_a_claim_that_no_longer_holds_its_occurrence_changes_nothing(
    queue: Queue, raw: aioredis.Redis
) -> None:
    pending = await queue.add("n", repeat={"every": 60_000, "overlap": "skip"})
    [schedule] = await queue.get_repeatable_jobs()
    await claim(raw, queue, pending.id, "w:2")

    assert await fire(raw, queue, schedule.key, pending.id, "w:1") == -3

    assert await queue.get_repeatable_jobs() == [schedule]
    assert await queue.get_job_state(pending.id) == "active"


async def test_workers_run_occurrences_of_a_schedule_that_skips_overlaps_one_at_a_time(
    queue: Queue, raw: aioredis.Redis, make_worker: MakeWorker
) -> None:
    # Given a schedule due every 100 ms that must not overlap, and workers with free slots
    # whose first occurrence runs until it is let go
    ran: list[str] = []
    running: set[str] = set()
    most = 0
    let_go = asyncio.Event()

    async def process(job: Job) -> None:
        nonlocal most
        running.add(job.id)
        most = max(most, len(running))
        ran.append(job.id)
        if len(ran) == 1:
            await let_go.wait()
        running.discard(job.id)

    await queue.add("tick", repeat={"every": 100, "overlap": "skip"})
    for _ in range(2):
        make_worker(process, concurrency=2)

    # When occurrences fall due while the first one runs
    await wait_until(lambda: _skipped(raw, queue, 2), message="two occurrences skipped")

    # Then none of them ran, each skip names the one running; once it ends, the next runs
    assert len(ran) == 1
    assert {e["running"] for e in await events_named(raw, queue, "skipped")} == {ran[0]}
    let_go.set()
    await wait_until(lambda: _ran(ran, 3), message="the occurrences after it to run")
    await queue.remove_repeatable("tick", {"every": 100, "overlap": "skip"})
    assert most == 1


async def test_occurrences_of_a_schedule_that_allows_overlaps_run_side_by_side(
    queue: Queue, make_worker: MakeWorker
) -> None:
    # Given a schedule due every 100 ms (overlap is allowed by default) whose occurrences run
    # until they are let go
    running: set[str] = set()
    let_go = asyncio.Event()

    async def process(job: Job) -> None:
        running.add(job.id)
        await let_go.wait()

    await queue.add("tick", repeat={"every": 100})
    make_worker(process, concurrency=3)

    # Then the next occurrence runs while the one before it still does
    await wait_until(lambda: _ran(running, 2), message="two occurrences running at once")
    let_go.set()
    await queue.remove_repeatable("tick", {"every": 100})


async def _skipped(raw: aioredis.Redis, queue: Queue, n: int) -> bool:
    return len(await events_named(raw, queue, "skipped")) >= n


async def _ran(ids: Any, n: int) -> bool:
    return len(ids) >= n


async def test_occurrences_named_by_uuid7_carry_their_due_time_and_run_once_each(
    queue: Queue, make_worker: MakeWorker
) -> None:
    # Given a schedule whose occurrences are named by UUIDv7s
    first = await queue.add("tick", repeat={"every": 100, "limit": 3, "job_ids": "uuid7"})
    [schedule] = await queue.get_repeatable_jobs()
    assert UUIDV7.fullmatch(first.id) and occurrence_due(first.id) == schedule.next
    ran: list[str] = []

    async def record(job: Job) -> None:
        ran.append(job.id)

    # When workers run it to its limit
    make_worker(record, concurrency=2)
    await wait_until(lambda: _ran(ran, 3), message="three occurrences to run")
    await wait_until(lambda: _no_schedules(queue), message="the schedule to end")

    # Then each occurrence ran once, named by a UUIDv7 of its own due time
    assert len(set(ran)) == 3 and all(UUIDV7.fullmatch(i) for i in ran)
    due = sorted(occurrence_due(i) for i in ran)
    assert due[0] == schedule.next and all(d % 100 == 0 for d in due)


async def test_removing_a_uuid7_schedule_removes_its_pending_occurrence(queue: Queue) -> None:
    pending = await queue.add("tick", repeat={"every": 60_000, "job_ids": "uuid7"})

    assert await queue.remove_repeatable("tick", {"every": 60_000}) is True

    assert await queue.get_job(pending.id) is None
    assert await queue.get_delayed_count() == 0


async def _no_schedules(queue: Queue) -> bool:
    return await queue.get_repeatable_jobs() == []
