"""Background bulk operations outlive their server: one whose server was killed is resumed by
another once its lease runs out, a server whose lease was taken over stops, and a cancel
ends an operation wherever it runs. Nothing is replayed twice."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis
from fastapi import FastAPI

from lazarus import DeadLetterFilter, Queue
from lazarus._connection import now_ms
from lazarus.http import create_app
from lazarus.http.operation_records import BulkOperation, operation_key, running_key
from lazarus.http.operations import BulkOperations

from ..conftest import wait_until
from .conftest import AUTH, DLQ, TOKEN
from .test_bulk_operations_api import BULK, finished

SLOW = 0.05  # dead letters per second: one, then twenty seconds before the next


@pytest.fixture
async def second(second_app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=second_app), base_url="http://127.0.0.1", headers=AUTH
    ) as client:
        yield client


async def replayed(queue: Queue, other: Queue) -> list[str]:
    """The labels of the jobs replayed into both source queues, one per job."""
    return sorted([j.original_data["label"] for q in (queue, other) for j in await q.get_waiting()])


async def slow_replay(client: httpx.AsyncClient) -> dict[str, Any]:
    """A replay of every dead letter at :data:`SLOW`, once its first one is done."""
    started = (await client.post(BULK, json={"action": "replay", "dlq": DLQ, "all": True,
                                             "rate": SLOW})).json()  # fmt: skip

    async def one_done() -> bool:
        return bool((await client.get(started["url"])).json()["done"])

    await wait_until(one_done, message="the first replay")
    return started


async def left_by_a_killed_server(
    raw: aioredis.Redis, prefix: str, operation_id: str, *, lease_until: int
) -> BulkOperation:
    """A replay of every dead letter (four, two to a batch) as a server killed at once left
    it: running, listed, none done, its lease held until ``lease_until``."""
    now = now_ms()
    left = BulkOperation(
        id=operation_id, action="replay", queue=DLQ, filter={}, dry_run=False, rate=None,
        batch_size=2, status="running", matched=4, done=0, started_at=now, updated_at=now,
        finished_at=None, error=None, server="gone:1", lease_until=lease_until,
    )  # fmt: skip
    await raw.zadd(running_key(prefix), {left.id: now})
    await raw.hset(operation_key(prefix, left.id), mapping=left.to_fields())  # type: ignore[arg-type]
    return left


async def test_an_operation_left_by_a_killed_server_is_resumed_once_its_lease_runs_out(
    second_app: FastAPI, second: httpx.AsyncClient, seeded: dict[str, str], dlq: Queue,
    queue: Queue, other: Queue, raw: aioredis.Redis, prefix: str,
) -> None:  # fmt: skip
    # Given a replay of every dead letter as a killed server left it: running, listed, its
    # lease still held for a minute
    now = now_ms()
    left = await left_by_a_killed_server(raw, prefix, "ab" * 16, lease_until=now + 60_000)
    bulk: BulkOperations = second_app.state.bulk

    # When another server looks while the lease holds, Then it leaves it alone
    assert await bulk.look_after() == []
    assert (await second.get(f"{BULK}/{left.id}")).json()["status"] == "running"

    # When the lease has run out, Then the operation shows interrupted, and the next look
    # resumes it from its snapshot, to the end
    await raw.hset(operation_key(prefix, left.id), "lease_until", now - 1)
    assert (await second.get(f"{BULK}/{left.id}")).json()["status"] == "interrupted"
    assert await bulk.look_after() == [left.id]
    ended = await finished(second, f"{BULK}/{left.id}")
    assert (ended["status"], ended["done"], ended["resumes"]) == ("done", 4, 1)
    assert ended["server"] != "gone:1"
    assert await replayed(queue, other) == ["a", "b", "c", "d"]
    # And once ended, it leaves the list of running operations
    assert await raw.zrange(running_key(prefix), 0, -1) == []


async def test_a_resumed_operation_counts_what_its_killed_server_did_and_never_reported(
    second_app: FastAPI, second: httpx.AsyncClient, seeded: dict[str, str], dlq: Queue,
    queue: Queue, other: Queue, raw: aioredis.Redis, prefix: str,
) -> None:  # fmt: skip
    # Given a replay of every dead letter as a killed server left it: its record says none
    # done, but it had replayed two ("email.send": a and d) in a batch it never reported
    left = await left_by_a_killed_server(raw, prefix, "cd" * 16, lease_until=now_ms() - 1)
    assert await dlq.replay_all_dead_letters(
        DeadLetterFilter(name="email.send"), as_of=left.started_at, tally=left.id
    ) == 2  # fmt: skip

    # When another server resumes it, to the end
    assert await second_app.state.bulk.look_after() == [left.id]
    ended = await finished(second, f"{BULK}/{left.id}")

    # Then it replayed the other two, and counts all four done
    assert (ended["status"], ended["done"], ended["matched"]) == ("done", 4, 4)
    assert await replayed(queue, other) == ["a", "b", "c", "d"]


async def test_a_server_whose_lease_was_taken_over_stops_and_none_is_replayed_twice(
    app: FastAPI, client: httpx.AsyncClient, second_app: FastAPI, seeded: dict[str, str],
    dlq: Queue, queue: Queue, other: Queue, raw: aioredis.Redis, prefix: str,
) -> None:  # fmt: skip
    # Given a slow replay on the first server, whose lease ran out while it stalled
    started = await slow_replay(client)
    await raw.hset(operation_key(prefix, started["id"]), "lease_until", 0)

    # When a second server claims it, and replays its next dead letter
    assert await second_app.state.bulk.look_after() == [started["id"]]

    async def two_done() -> bool:
        return bool((await client.get(started["url"])).json()["done"] == 2)

    await wait_until(two_done, message="the second server's first replay")

    # Then the first server, at its next renewal, learns it is not its own and stops, while
    # the second one goes on
    assert app.state.bulk.running == [started["id"]]
    assert await app.state.bulk.look_after() == []
    await wait_until(lambda: _idle(app.state.bulk), message="the first server to stop")
    assert second_app.state.bulk.running == [started["id"]]
    record = (await client.get(started["url"])).json()
    assert (record["status"], record["resumes"]) == ("running", 1)
    assert record["server"] != started["server"]
    # And each dead letter was replayed once, by one server or the other
    assert await replayed(queue, other) == ["a", "b"]


async def test_of_two_servers_that_look_at_once_one_resumes_the_operation(
    app: FastAPI, client: httpx.AsyncClient, second_app: FastAPI, seeded: dict[str, str],
    raw: aioredis.Redis, prefix: str,
) -> None:  # fmt: skip
    # Given a slow replay whose server gave it up
    started = await slow_replay(client)
    await app.state.bulk.close()

    # When two servers look for operations to resume at the same moment
    third = BulkOperations(second_app.state.ops)
    try:
        found = await asyncio.gather(second_app.state.bulk.look_after(), third.look_after())

        # Then one of them resumes it, and only one runs it
        assert sorted(found) == [[], [started["id"]]]
        assert len(second_app.state.bulk.running + third.running) == 1
    finally:
        await third.close()


async def _idle(bulk: BulkOperations) -> bool:
    return bulk.running == []


async def test_a_cancel_stops_the_operation_wherever_it_runs(
    app: FastAPI, client: httpx.AsyncClient, second_app: FastAPI, second: httpx.AsyncClient,
    anonymous: httpx.AsyncClient, seeded: dict[str, str], dlq: Queue, raw: aioredis.Redis,
    prefix: str,
) -> None:  # fmt: skip
    # Given a slow replay on the first server
    started = await slow_replay(client)
    url = f"{BULK}/{started['id']}"

    # When a client of the second server cancels it (without a token, then with one)
    refused = await anonymous.delete(url)
    cancelled = await second.delete(url)

    # Then it is cancelled, with what it did so far, and the first server stops at its next
    # renewal; the second one does not resume it
    assert refused.status_code == 401
    assert cancelled.status_code == 200, cancelled.text
    record = cancelled.json()
    assert (record["status"], record["done"], record["error"]) == ("cancelled", 1, "cancelled")
    assert record["finishedAt"] is not None
    assert await app.state.bulk.look_after() == []
    await wait_until(lambda: _idle(app.state.bulk), message="the first server to stop")
    assert await second_app.state.bulk.look_after() == []
    assert await dlq.get_dead_letter_count() == 3
    assert await raw.zrange(running_key(prefix), 0, -1) == []

    # And a second cancel is a 409, an unknown operation a 404
    again = await client.delete(url)
    assert again.status_code == 409 and again.json()["error"]["code"] == "operation_ended"
    assert (await client.delete(f"{BULK}/{'0' * 32}")).status_code == 404


async def test_a_cancel_on_its_own_server_stops_it_at_once(
    app: FastAPI, client: httpx.AsyncClient, seeded: dict[str, str], dlq: Queue
) -> None:
    started = await slow_replay(client)

    cancelled = await client.delete(started["url"])

    assert cancelled.json()["status"] == "cancelled"
    await wait_until(lambda: _idle(app.state.bulk), message="the operation to stop")
    assert await dlq.get_dead_letter_count() == 3


def test_a_lease_out_of_range_is_refused_naming_it(redis_url: str) -> None:
    for lease in (0.5, 4000, True):
        with pytest.raises(ValueError, match="bulk_lease"):
            create_app(connection=redis_url, token=TOKEN, bulk_lease=lease)
