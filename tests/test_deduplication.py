"""Deduplication: an add whose deduplication id another job holds adds nothing."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
import redis.asyncio as aioredis

from lazarus import Job, Queue, UnrecoverableError, Worker, _scripts
from lazarus._keys import QueueKeys

from .conftest import keys_of, wait_until
from .test_worker import on_count

MakeWorker = Callable[..., Worker]


async def events_named(raw: aioredis.Redis, queue: Queue, name: str) -> list[dict[str, str]]:
    return [f for _, f in await raw.xrange(queue.keys.events) if f["event"] == name]


async def test_a_duplicate_add_returns_the_holder_writes_nothing_and_says_so(
    queue: Queue, raw: aioredis.Redis
) -> None:
    first = await queue.add("send", {"n": 1}, deduplication={"id": "order-7"})

    second = await queue.add("send", {"n": 2}, deduplication={"id": "order-7"})

    assert second.id == first.id
    assert second.data == {"n": 1}
    assert second.deduplication_id == "order-7"
    assert await queue.get_waiting_count() == 1
    assert await queue.get_deduplication_job_id("order-7") == first.id
    [event] = await events_named(raw, queue, "deduplicated")
    assert event["jobId"] == first.id and event["deduplicationId"] == "order-7"
    assert event["deduplicatedJobId"] not in (first.id, "")


async def test_one_bulk_add_keeps_the_first_job_of_each_deduplication_id(queue: Queue) -> None:
    jobs = await queue.add_bulk([
        {"name": "a", "data": 1, "deduplication": {"id": "x"}},
        {"name": "b", "data": 2},
        {"name": "c", "data": 3, "deduplication": {"id": "x"}},
    ])  # fmt: skip

    assert [j.data for j in jobs] == [1, 2, 1]
    assert jobs[2].id == jobs[0].id
    assert await queue.get_waiting_count() == 2


@pytest.mark.parametrize(
    ("processor", "options"),
    [
        (lambda job: "done", {}),
        (lambda job: "done", {"remove_on_complete": True}),
        (lambda job: 1 / 0, {}),
        (lambda job: 1 / 0, {"remove_on_fail": True}),
        (lambda job: 1 / 0, {"on_exhaustion": "discard"}),
    ],
    ids=["completed", "completed and removed", "failed", "failed and removed", "discarded"],
)
async def test_without_ttl_the_id_is_free_once_the_job_finishes(
    queue: Queue, make_worker: MakeWorker, processor: Callable[[Job], object],
    options: dict[str, Any],
) -> None:  # fmt: skip
    first = await queue.add("n", deduplication={"id": "k"}, **options)
    worker = make_worker(processor)

    await wait_until(lambda: _freed(queue), message="the id to be freed")
    await worker.close()

    second = await queue.add("n", deduplication={"id": "k"})
    assert second.id != first.id
    assert await queue.get_deduplication_job_id("k") == second.id


async def _freed(queue: Queue) -> bool:
    return await queue.get_deduplication_job_id("k") is None


async def test_a_dead_lettered_job_frees_its_id(queue: Queue, make_worker: MakeWorker) -> None:
    async def fail(job: Job) -> None:
        raise UnrecoverableError("no")

    await queue.add("n", deduplication={"id": "k"})
    worker = make_worker(fail, dead_letter_queue="jobs-dlq")

    await asyncio.wait_for(on_count(worker, "deadLettered", 1).wait(), 10)

    assert await queue.get_deduplication_job_id("k") is None


async def test_a_retried_job_keeps_its_id(queue: Queue, make_worker: MakeWorker) -> None:
    async def fail(job: Job) -> None:
        raise ConnectionError("down")

    job = await queue.add("n", deduplication={"id": "k"}, attempts=2,
                          backoff={"type": "fixed", "delay": 60_000})  # fmt: skip
    worker = make_worker(fail)

    await asyncio.wait_for(on_count(worker, "retrying", 1).wait(), 10)

    assert await queue.get_deduplication_job_id("k") == job.id
    assert (await queue.add("n", deduplication={"id": "k"})).id == job.id


async def test_with_ttl_the_id_outlives_the_job_until_the_ttl_runs_out(
    queue: Queue, make_worker: MakeWorker
) -> None:
    first = await queue.add("n", deduplication={"id": "k", "ttl": 1500})
    worker = make_worker(lambda job: "done")
    await asyncio.wait_for(on_count(worker, "completed", 1).wait(), 10)

    assert (await queue.add("n", deduplication={"id": "k", "ttl": 1500})).id == first.id

    await wait_until(lambda: _freed(queue), message="the ttl to run out")
    assert (await queue.add("n", deduplication={"id": "k"})).id != first.id


async def test_removing_the_job_or_the_key_frees_the_id(queue: Queue) -> None:
    job = await queue.add("n", deduplication={"id": "k", "ttl": 60_000})
    await queue.remove(job.id)
    assert await queue.get_deduplication_job_id("k") is None

    await queue.add("n", deduplication={"id": "k"})
    assert await queue.remove_deduplication_key("k") is True
    assert await queue.remove_deduplication_key("k") is False
    assert (await queue.add("n", deduplication={"id": "k"})).id != job.id
    assert await queue.get_waiting_count() == 2


async def test_cleaning_a_waiting_job_frees_its_id(queue: Queue) -> None:
    await queue.add("n", deduplication={"id": "k"})

    await queue.clean(0, state="waiting")

    assert await queue.get_deduplication_job_id("k") is None


async def test_an_id_another_job_took_since_is_not_freed(queue: Queue) -> None:
    old = await queue.add("n", deduplication={"id": "k"})
    await queue.remove_deduplication_key("k")
    new = await queue.add("n", deduplication={"id": "k"})

    await queue.remove(old.id)

    assert await queue.get_deduplication_job_id("k") == new.id


@pytest.mark.parametrize(
    ("value", "error", "field"),
    [
        ("k", TypeError, "deduplication"),
        ({"ttl": 5}, ValueError, "deduplication.id"),
        ({"id": "has space"}, ValueError, "deduplication.id"),
        ({"id": "k", "ttl": 0}, ValueError, "deduplication.ttl"),
        ({"id": "k", "ttl": "5"}, TypeError, "deduplication.ttl"),
        ({"id": "k", "mode": "extend"}, ValueError, "unknown keys"),
        ({"id": "k", "extend": True}, ValueError, "deduplication.extend needs"),
        ({"id": "k", "ttl": 5, "extend": 1}, TypeError, "deduplication.extend"),
        ({"id": "k", "replace": "yes"}, TypeError, "deduplication.replace"),
    ],
)
async def test_bad_deduplication_raises_naming_the_field_and_writes_nothing(
    queue: Queue, raw: aioredis.Redis, prefix: str, value: object, error: type[Exception],
    field: str,
) -> None:  # fmt: skip
    with pytest.raises(error, match=field):
        await queue.add("n", deduplication=value)  # type: ignore[arg-type]

    assert await keys_of(raw, prefix) == set()


async def test_add_jobs_script_answers_the_holder_for_a_held_id(
    raw: aioredis.Redis, prefix: str
) -> None:
    k = QueueKeys(prefix, "src")
    opts = json.dumps({"attempts": 1})

    async def add(job_id: str) -> object:
        args = [1000, 100, 0, "", job_id, "n", "{}", opts, 0, 0, 1, "dk", 0, ""]
        return (await _scripts.load("add_jobs")(raw, [*k.group, k.job(job_id)], args))[0]

    assert await add("a") == "waiting"
    assert await add("b") == ["a"]
    assert await raw.exists(k.job("b")) == 0
    assert await raw.hget(k.job("a"), "deid") == "dk"
    assert await raw.get(k.dedup("dk")) == "a"
    assert await raw.pttl(k.dedup("dk")) == -1


# -- debouncing -------------------------------------------------------------------------------


async def test_extend_holds_the_id_until_ttl_after_the_last_add(
    queue: Queue, raw: aioredis.Redis
) -> None:
    debounce = {"id": "reindex", "ttl": 60_000, "extend": True}
    first = await queue.add("reindex", deduplication=debounce)
    await raw.pexpire(queue.keys.dedup("reindex"), 1_000)  # as if 59 s had passed

    again = await queue.add("reindex", deduplication=debounce)

    assert again.id == first.id
    assert await raw.pttl(queue.keys.dedup("reindex")) > 50_000  # started again
    # Without extend, a held id keeps its ttl
    await raw.pexpire(queue.keys.dedup("reindex"), 1_000)
    await queue.add("reindex", deduplication={"id": "reindex", "ttl": 60_000})
    assert await raw.pttl(queue.keys.dedup("reindex")) <= 1_000


async def test_replace_puts_the_last_add_in_place_of_a_delayed_holder(
    queue: Queue, make_worker: MakeWorker, raw: aioredis.Redis
) -> None:
    # Given a burst of three adds of the same key, each delayed by 300 ms
    debounce = {"id": "profile-9", "replace": True}
    jobs = [
        await queue.add("sync", {"version": n}, delay=300, deduplication=debounce) for n in range(3)
    ]

    # Then only the last is there, holding the key, and the others are gone for good
    assert len({j.id for j in jobs}) == 3
    assert await queue.get_deduplication_job_id("profile-9") == jobs[2].id
    assert await queue.get_delayed_count() == 1
    for gone in jobs[:2]:
        assert await queue.get_job(gone.id) is None
    removed = [e["jobId"] for e in await events_named(raw, queue, "removed")]
    assert removed == [jobs[0].id, jobs[1].id]

    ran: list[object] = []
    make_worker(lambda job: ran.append(job.data["version"]))
    await wait_until(lambda: asyncio.sleep(0, ran == [2]))


async def test_replace_leaves_a_holder_that_is_no_longer_delayed(
    queue: Queue, raw: aioredis.Redis
) -> None:
    debounce = {"id": "k", "replace": True}
    first = await queue.add("n", {"v": 1}, deduplication=debounce)  # waiting, not delayed

    second = await queue.add("n", {"v": 2}, delay=100, deduplication=debounce)

    assert second.id == first.id and second.data == {"v": 1}
    assert await queue.get_delayed_count() == 0
    assert await events_named(raw, queue, "removed") == []


async def test_replace_leaves_a_holder_that_ran_and_waits_out_a_backoff(
    queue: Queue, make_worker: MakeWorker, raw: aioredis.Redis
) -> None:
    # Given a holder whose first attempt failed, delayed by an hour's backoff
    debounce = {"id": "k", "replace": True}
    first = await queue.add("n", None, attempts=2, backoff={"type": "fixed", "delay": 3_600_000},
                            deduplication=debounce)  # fmt: skip

    async def fail(job: Job) -> None:
        raise RuntimeError("first attempt")

    worker = make_worker(fail)

    async def backing_off() -> bool:
        return await queue.get_job_state(first.id) == "delayed"

    await wait_until(backing_off)
    await worker.close()

    # Then a debounced add keeps it, with its failure history
    second = await queue.add("n", None, delay=100, deduplication=debounce)
    assert second.id == first.id
    stored = await queue.get_job(first.id)
    assert stored is not None and stored.failed_reason == "first attempt"
