"""Changing a job where it is: Queue.update_job_data, change_job_priority, change_job_delay
and drain (change_job.lua, clean_jobs.lua), and the bound Job's update_data,
change_priority and change_delay."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pydantic
import pytest
import redis.asyncio as aioredis

from lazarus import Job, JobNotFoundError, JobStateError, Queue
from lazarus.sync import Queue as SyncQueue
from tests.conftest import wait_for_state, wait_until


async def events_of(raw: aioredis.Redis, queue: Queue, job_id: str) -> list[dict[str, str]]:
    return [f for _, f in await raw.xrange(queue.keys.events) if f.get("jobId") == job_id]


async def dead_letter(queue: Queue, dlq: Queue, make_worker: Any) -> Job:
    """Dead-letter the one job of ``queue`` into ``dlq``; the dead letter."""

    async def fail(j: Job) -> None:
        raise RuntimeError("boom")

    make_worker(fail, dead_letter_queue=dlq.name)

    async def dead() -> bool:
        return await dlq.get_dead_letter_count() == 1

    await wait_until(dead)
    (letter,) = await dlq.get_dead_letter_jobs()
    return letter


async def runs_in_order(queue: Queue, make_worker: Any, count: int) -> list[str]:
    """The ids of the jobs of ``queue`` in the order one worker slot runs them."""
    ran: list[str] = []

    async def record(job: Job) -> None:
        ran.append(job.id)

    make_worker(record, concurrency=1)
    await wait_until(lambda: asyncio.sleep(0, len(ran) >= count))
    return ran


# -- data -------------------------------------------------------------------------------------


async def test_new_data_is_what_the_job_runs_with(
    queue: Queue, make_worker: Any, raw: aioredis.Redis
) -> None:
    job = await queue.add("n", {"v": 1})

    await queue.update_job_data(job.id, {"v": 2, "note": "fixed"})

    seen: list[Any] = []

    async def record(j: Job) -> None:
        seen.append(j.data)

    make_worker(record)
    await wait_until(lambda: asyncio.sleep(0, bool(seen)))
    assert seen == [{"v": 2, "note": "fixed"}]
    assert [e["event"] for e in await events_of(raw, queue, job.id)][:2] == ["waiting", "changed"]
    assert (await events_of(raw, queue, job.id))[1]["fields"] == "data"


async def test_a_processor_keeps_a_checkpoint_that_its_next_attempt_reads(
    queue: Queue, make_worker: Any
) -> None:
    # Given a job whose first attempt records how far it got, then fails
    job = await queue.add("n", {"done": 0}, attempts=2)
    starts: list[Any] = []

    async def resume(j: Job) -> None:
        starts.append(j.data["done"])
        if len(starts) == 1:
            await j.update_data({"done": 40})
            assert j.data == {"done": 40}  # the snapshot follows
            raise RuntimeError("interrupted")

    make_worker(resume)

    await wait_for_state(queue, job.id, "completed")
    # Then the second attempt started where the first one left off
    assert starts == [0, 40]


async def test_bad_data_names_the_field_and_writes_nothing(
    redis_url: str, prefix: str, raw: aioredis.Redis
) -> None:
    class Order(pydantic.BaseModel):
        id: int

    checked = Queue("jobs", connection=redis_url, prefix=prefix, schema=Order)
    small = Queue("jobs", connection=redis_url, prefix=prefix, max_payload_bytes=100)
    try:
        job = await checked.add("n", {"id": 1})
        before = await raw.xlen(checked.keys.events)
        with pytest.raises(ValueError, match="data"):
            await checked.update_job_data(job.id, {"id": "not a number"})
        with pytest.raises(ValueError, match="data"):
            await small.update_job_data(job.id, {"id": 2, "pad": "x" * 200})
        with pytest.raises(TypeError, match="data"):
            await small.update_job_data(job.id, {"id": 3, "when": object()})
        with pytest.raises(ValueError, match="job_id"):
            await small.update_job_data("", {"id": 4})
        assert await raw.hget(checked.keys.job(job.id), "data") == '{"id":1}'
        assert await raw.xlen(checked.keys.events) == before
    finally:
        await checked.close()
        await small.close()


async def test_a_processor_checkpoint_keeps_to_the_worker_schema(
    queue: Queue, make_worker: Any, raw: aioredis.Redis
) -> None:
    class Order(pydantic.BaseModel):
        id: int
        step: int = 0

    refusals: list[str] = []

    async def checkpoint(job: Job, order: Order) -> None:
        try:
            await job.update_data({"id": order.id, "step": "halfway"})
        except ValueError as exc:
            refusals.append(str(exc))
        await job.update_data(Order(id=order.id, step=order.step + 1))

    job = await queue.add("n", {"id": 7})
    make_worker(checkpoint, schema=Order)

    await wait_for_state(queue, job.id, "completed")
    assert len(refusals) == 1 and "data.step" in refusals[0]
    # The model went in its JSON form, as add stores one.
    assert json.loads(await raw.hget(queue.keys.job(job.id), "data")) == {"id": 7, "step": 1}


async def test_a_paused_queue_s_job_is_told_paused_as_get_job_state_tells_it(
    queue: Queue,
) -> None:
    ready = await queue.add("n", None)
    later = await queue.add("n", None, delay=60_000)
    await queue.pause()

    assert await queue.change_job_priority(ready.id, 3) == "paused"
    assert await queue.change_job_priority(ready.id, 0) == "paused"
    assert await queue.promote_job(later.id) == "paused"
    assert await queue.get_job_state(later.id) == "paused"

    await queue.resume()
    assert await queue.change_job_priority(ready.id, 2) == "prioritized"


async def test_a_missing_job_or_a_dead_letter_is_refused(
    queue: Queue, dlq: Queue, make_worker: Any, raw: aioredis.Redis
) -> None:
    with pytest.raises(JobNotFoundError):
        await queue.update_job_data("nope", 1)
    assert not await raw.exists(queue.keys.job("nope"))

    # A dead letter changes through a replay with data=, never in place
    job = await queue.add("n", {"v": 1})
    letter = await dead_letter(queue, dlq, make_worker)
    for change in (
        dlq.update_job_data(letter.id, {"v": 2}),
        dlq.change_job_priority(letter.id, 1),
        dlq.change_job_delay(letter.id, 10),
    ):
        with pytest.raises(JobStateError, match="a dead letter changes only by a replay"):
            await change
    peeked = await dlq.peek_dead_letter(letter.id)
    assert peeked is not None and peeked.original_data == {"v": 1}
    assert peeked.dead_letter is not None and peeked.dead_letter.original_job_id == job.id


# -- priority ---------------------------------------------------------------------------------


async def test_a_waiting_job_given_a_priority_runs_before_the_others(
    queue: Queue, make_worker: Any, raw: aioredis.Redis
) -> None:
    jobs = [await queue.add("n", i) for i in range(3)]
    await queue.add("n", "p", priority=5, job_id="p5")

    assert await queue.change_job_priority(jobs[2].id, 1) == "prioritized"

    assert await queue.get_job_state(jobs[2].id) == "prioritized"
    assert await raw.hget(queue.keys.job(jobs[2].id), "priority") == "1"
    job = await queue.get_job(jobs[2].id)
    assert job is not None and job.priority == 1
    ran = await runs_in_order(queue, make_worker, 4)
    # Jobs with no priority run first; then by priority: 1 before 5
    assert ran == [jobs[0].id, jobs[1].id, jobs[2].id, "p5"]


async def test_priorities_change_order_among_prioritized_jobs_and_back_to_waiting(
    queue: Queue, make_worker: Any
) -> None:
    a = await queue.add("n", "a", priority=1)
    b = await queue.add("n", "b", priority=2)
    c = await queue.add("n", "c", priority=3)

    assert await queue.change_job_priority(c.id, 1) == "prioritized"  # after a: same priority
    assert await queue.change_job_priority(a.id, 4) == "prioritized"
    assert await queue.change_job_priority(b.id, 0) == "waiting"

    assert await queue.get_job_state(b.id) == "waiting"
    assert await runs_in_order(queue, make_worker, 3) == [b.id, c.id, a.id]


async def test_a_delayed_or_finished_job_keeps_its_new_priority_for_when_it_is_ready(
    queue: Queue, raw: aioredis.Redis
) -> None:
    delayed = await queue.add("n", None, delay=60_000)

    assert await queue.change_job_priority(delayed.id, 7) == "delayed"
    assert await queue.get_job_state(delayed.id) == "delayed"

    assert await queue.promote_job(delayed.id) == "prioritized"
    score = await raw.zscore(queue.keys.prioritized, delayed.id)
    assert score is not None and int(score) >> 32 == 7


async def test_a_running_job_is_retried_at_its_new_priority(
    queue: Queue, make_worker: Any, raw: aioredis.Redis
) -> None:
    job = await queue.add("n", None, attempts=2, backoff={"type": "fixed", "delay": 60_000})
    started = asyncio.Event()
    release = asyncio.Event()

    async def slow_failure(j: Job) -> None:
        started.set()
        await release.wait()
        raise RuntimeError("again")

    worker = make_worker(slow_failure)
    await asyncio.wait_for(started.wait(), 10)

    assert await queue.change_job_priority(job.id, 3) == "active"
    release.set()

    async def delayed() -> bool:
        return await queue.get_job_state(job.id) == "delayed"

    await wait_until(delayed)
    await worker.close()
    assert await queue.promote_job(job.id) == "prioritized"
    score = await raw.zscore(queue.keys.prioritized, job.id)
    assert score is not None and int(score) >> 32 == 3


async def test_a_job_deep_inside_a_long_wait_list_is_found_and_prioritized(
    queue: Queue, raw: aioredis.Redis
) -> None:
    # Given 25,000 waiting jobs (more than a script searches whole), and one in the middle
    await queue.add_bulk({"name": "n", "job_id": f"j{i}"} for i in range(25_000))

    assert await queue.change_job_priority("j12000", 2) == "prioritized"

    assert await raw.zscore(queue.keys.prioritized, "j12000") is not None
    assert "j12000" not in await raw.lrange(queue.keys.wait, 0, -1)
    counts = await queue.get_job_counts()
    assert (counts["waiting"], counts["prioritized"]) == (24_999, 1)


async def test_bad_priorities_name_the_field_and_write_nothing(
    queue: Queue, raw: aioredis.Redis
) -> None:
    job = await queue.add("n", None)
    before = await raw.xlen(queue.keys.events)
    for bad, kind in ((-1, ValueError), (2**21 + 1, ValueError), ("1", TypeError),
                      (True, TypeError), (1.5, TypeError)):  # fmt: skip
        with pytest.raises(kind, match="priority"):
            await queue.change_job_priority(job.id, bad)  # type: ignore[arg-type]
    with pytest.raises(JobNotFoundError):
        await queue.change_job_priority("gone", 1)
    assert await queue.get_job_state(job.id) == "waiting"
    assert await raw.xlen(queue.keys.events) == before


# -- delay ------------------------------------------------------------------------------------


async def test_a_delayed_job_given_a_short_delay_runs_soon(
    queue: Queue, make_worker: Any, raw: aioredis.Redis
) -> None:
    # Given a job delayed by an hour and an idle worker asleep until then
    job = await queue.add("n", None, delay=3_600_000)
    ran: list[str] = []

    async def record(j: Job) -> None:
        ran.append(j.id)

    make_worker(record, block_timeout=30)

    # When its delay becomes 50 ms
    before = int(time.time() * 1000)
    await queue.change_job_delay(job.id, 50)
    after = int(time.time() * 1000)

    # Then it became due 50 ms after the call (the delayed event says when: the job itself
    # may be running by now)
    assert await raw.hget(queue.keys.job(job.id), "delay") == "50"
    events = await events_of(raw, queue, job.id)
    assert [(e["event"], e.get("fields")) for e in events[1:3]] == [
        ("changed", "delay"),
        ("delayed", None),
    ]
    assert before + 50 <= int(events[2]["delay"]) <= after + 50
    # Then the worker woke for the new due time and ran it
    await wait_until(lambda: asyncio.sleep(0, job.id in ran))


async def test_a_delay_can_grow_too(queue: Queue, raw: aioredis.Redis) -> None:
    job = await queue.add("n", None, delay=1_000)

    await (await queue.get_job(job.id)).change_delay(86_400_000)  # type: ignore[union-attr]

    due = await raw.zscore(queue.keys.delayed, job.id)
    assert due is not None and due > job.timestamp + 86_000_000


async def test_a_job_that_is_not_delayed_keeps_its_place_and_bad_delays_write_nothing(
    queue: Queue, raw: aioredis.Redis
) -> None:
    waiting = await queue.add("n", None)
    delayed = await queue.add("n", None, delay=60_000)
    before = await raw.xlen(queue.keys.events)

    with pytest.raises(JobStateError, match="only a delayed job's delay changes"):
        await queue.change_job_delay(waiting.id, 10)
    with pytest.raises(JobNotFoundError):
        await queue.change_job_delay("gone", 10)
    for bad, kind in ((-1, ValueError), (10**13 + 1, ValueError), (None, TypeError)):
        with pytest.raises(kind, match="delay"):
            await queue.change_job_delay(delayed.id, bad)  # type: ignore[arg-type]

    assert await queue.get_job_state(waiting.id) == "waiting"
    assert await raw.zscore(queue.keys.delayed, delayed.id) == delayed.timestamp + 60_000
    assert await raw.xlen(queue.keys.events) == before


# -- several at once -------------------------------------------------------------------------


async def test_data_priority_and_delay_change_together_in_one_event(
    queue: Queue, raw: aioredis.Redis
) -> None:
    job = await queue.add("n", {"v": 1}, delay=60_000)

    state = await queue.change_job(job.id, data={"v": 2}, priority=3, delay=120_000)

    assert state == "delayed"
    stored = await queue.get_job(job.id)
    assert stored is not None and (stored.data, stored.priority) == ({"v": 2}, 3)
    due = await raw.zscore(queue.keys.delayed, job.id)
    assert due is not None and due >= job.timestamp + 120_000
    changed = [e for e in await events_of(raw, queue, job.id) if e["event"] == "changed"]
    assert [e["fields"] for e in changed] == ["data,priority,delay"]


async def test_one_change_refused_writes_none_of_the_others(
    queue: Queue, raw: aioredis.Redis
) -> None:
    # Given a waiting job deep inside a long wait list: a priority change must search it
    await queue.add_bulk({"name": "n", "job_id": f"j{i}", "data": i} for i in range(25_000))
    before = await raw.xlen(queue.keys.events)

    # A delay for a job that is not delayed refuses the data and the priority with it
    with pytest.raises(JobStateError):
        await queue.change_job("j12000", data="new", priority=1, delay=5)
    with pytest.raises(ValueError, match="nothing to change"):
        await queue.change_job("j12000")
    with pytest.raises(ValueError, match="priority"):
        await queue.change_job("j12000", data="new", priority=-1)

    assert await raw.hget(queue.keys.job("j12000"), "data") == "12000"
    assert await raw.xlen(queue.keys.events) == before

    # And the search, then the change, writes both once
    assert await queue.change_job("j12000", data="new", priority=1) == "prioritized"
    assert await raw.hget(queue.keys.job("j12000"), "data") == '"new"'
    assert await raw.xlen(queue.keys.events) == before + 1


# -- drain ------------------------------------------------------------------------------------


async def test_drain_removes_what_waits_and_leaves_the_rest(
    queue: Queue, make_worker: Any, raw: aioredis.Redis
) -> None:
    # Given one finished job, then waiting, prioritized and delayed ones
    done = await queue.add("n", None, job_id="done")

    async def quick(j: Job) -> None:
        return None

    worker = make_worker(quick)

    await wait_for_state(queue, done.id, "completed")
    await worker.close()
    await queue.add_bulk([{"name": "n", "job_id": f"w{i}"} for i in range(1_500)])
    await queue.add_bulk([{"name": "n", "job_id": f"p{i}", "priority": 2} for i in range(20)])
    await queue.add("n", None, job_id="later", delay=60_000)

    assert await queue.drain(dry_run=True) == 1_520
    assert await queue.drain(delayed=True, dry_run=True) == 1_521
    assert await queue.drain() == 1_520

    counts = await queue.get_job_counts()
    assert (counts["waiting"], counts["prioritized"], counts["delayed"]) == (0, 0, 1)
    assert counts["completed"] == 1
    assert not await raw.exists(queue.keys.job("w7"))

    assert await queue.drain(delayed=True) == 1
    assert await queue.get_job_state("later") == "unknown"


async def test_drain_leaves_the_dead_letters_of_a_queue_that_holds_them(
    queue: Queue, dlq: Queue, make_worker: Any
) -> None:
    await queue.add("n", None)
    await dead_letter(queue, dlq, make_worker)
    await dlq.add("n", None)

    assert await dlq.drain(dry_run=True) == 1
    assert await dlq.drain() == 1
    assert await dlq.get_dead_letter_count() == 1


def test_the_sync_queue_changes_and_drains(redis_url: str, prefix: str) -> None:
    with SyncQueue("jobs", connection=redis_url, prefix=prefix) as queue:
        job = queue.add("n", {"v": 1}, delay=60_000)
        queue.update_job_data(job.id, {"v": 2})
        assert queue.change_job_priority(job.id, 4) == "delayed"
        queue.change_job_delay(job.id, 120_000)
        stored = queue.get_job(job.id)
        assert stored is not None and stored.data == {"v": 2} and stored.priority == 4
        assert queue.drain(delayed=True) == 1
