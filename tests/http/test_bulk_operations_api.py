"""Bulk replay and purge as background operations: 202 with the operation's URL, progress
read from Redis (by any server process), rate and dry runs passed to the library, and an
operation stopped with its server."""

from __future__ import annotations

import datetime
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis
from fastapi import FastAPI

from lazarus import DeadLetterFilter, Queue
from lazarus.http.operation_records import describe_filter, operation_key
from lazarus.http.operations import BulkOperations

from ..conftest import wait_until
from .conftest import AUTH, DLQ

BULK = "/api/dead-letters/bulk"


async def finished(client: httpx.AsyncClient, url: str) -> dict[str, Any]:
    """The operation at ``url`` once it is no longer running."""
    record: dict[str, Any] = {}

    async def ended() -> bool:
        nonlocal record
        record = (await client.get(url)).json()
        return record["status"] != "running"

    await wait_until(ended, message=f"{url} to finish")
    return record


async def remaining(dlq: Queue) -> set[str]:
    return {j.original_data["label"] for j in await dlq.get_dead_letter_jobs()}


async def test_a_bulk_replay_answers_202_and_runs_in_the_background(
    client: httpx.AsyncClient, seeded: dict[str, str], dlq: Queue, queue: Queue
) -> None:
    # Given four dead letters; When email.* from jobs are to be replayed in the background
    response = await client.post(BULK, json={
        "action": "replay", "dlq": DLQ, "filter": {"job_type": "email.*", "queue": "jobs"},
    })  # fmt: skip

    # Then the answer is 202 with the operation, its URL also in Location
    assert response.status_code == 202, response.text
    started = response.json()
    assert response.headers["location"] == started["url"]
    assert started["url"].endswith(f"{BULK}/{started['id']}")
    assert (started["action"], started["dlq"], started["dryRun"]) == ("replay", DLQ, False)
    assert started["filter"] == {"name_prefix": "email.", "source_queue": "jobs"}
    assert started["finishedAt"] is None and started["error"] is None

    # When the operation is followed to its end
    record = await finished(client, started["url"])

    # Then it replayed a and b, as it says
    assert record["status"] == "done", record
    assert (record["matched"], record["done"]) == (2, 2)
    assert record["finishedAt"] >= record["startedAt"]
    assert await remaining(dlq) == {"c", "d"}
    assert {j.original_data["label"] for j in await queue.get_waiting()} == {"a", "b"}


async def test_a_bulk_purge_dry_run_counts_and_changes_nothing(
    client: httpx.AsyncClient, seeded: dict[str, str], dlq: Queue
) -> None:
    response = await client.post(BULK, json={"action": "purge", "dlq": DLQ, "all": True,
                                             "dry_run": True})  # fmt: skip

    record = await finished(client, response.json()["url"])

    assert record["status"] == "done" and record["dryRun"] is True
    assert (record["matched"], record["done"]) == (4, 0)
    assert await dlq.get_dead_letter_count() == 4


async def test_a_bulk_purge_with_a_text_filter_reports_done_without_a_count(
    client: httpx.AsyncClient, seeded: dict[str, str], dlq: Queue
) -> None:
    response = await client.post(BULK, json={"action": "purge", "dlq": DLQ,
                                             "filter": {"args": '"to":"'}})  # fmt: skip

    record = await finished(client, response.json()["url"])

    assert (record["status"], record["matched"], record["done"]) == ("done", None, 2)
    assert await remaining(dlq) == {"b", "c"}


async def test_a_bulk_operation_needs_a_filter_a_token_and_valid_values(
    client: httpx.AsyncClient, anonymous: httpx.AsyncClient, seeded: dict[str, str], dlq: Queue
) -> None:
    unfiltered = await client.post(BULK, json={"action": "purge", "dlq": DLQ})
    no_token = await anonymous.post(BULK, json={"action": "purge", "dlq": DLQ, "all": True})
    bad_name = await client.post(BULK, json={"action": "purge", "dlq": "a{x}", "all": True})
    bad_rate = await client.post(BULK, json={"action": "replay", "dlq": DLQ, "all": True,
                                             "rate": 0})  # fmt: skip
    bad_action = await client.post(BULK, json={"action": "explode", "dlq": DLQ, "all": True})

    assert unfiltered.status_code == 422 and unfiltered.json()["error"]["code"] == "filter_required"
    assert no_token.status_code == 401
    assert bad_name.status_code == 422 and bad_name.json()["error"]["field"] == "dlq"
    assert bad_rate.status_code == 422 and bad_rate.json()["error"]["field"] == "rate"
    assert bad_action.status_code == 422
    assert await dlq.get_dead_letter_count() == 4


async def test_an_unknown_key_of_the_filter_is_refused_before_any_operation_starts(
    client: httpx.AsyncClient,
    seeded: dict[str, str],
    dlq: Queue,
    raw: aioredis.Redis,
    prefix: str,
) -> None:
    # Given four dead letters, three from jobs
    # When a background purge's filter spells the job type as the v1 API does (jobType)
    response = await client.post(BULK, json={
        "action": "purge", "dlq": DLQ, "filter": {"queue": "jobs", "jobType": "report.generate"},
    })  # fmt: skip

    # Then it is refused naming the key; no operation was recorded and nothing was purged
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == "filter.jobType"
    assert [k async for k in raw.scan_iter(match=operation_key(prefix, "*"))] == []
    assert await remaining(dlq) == {"a", "b", "c", "d"}


@pytest.mark.parametrize(
    ("values", "field"),
    [({"batch_size": True}, "batch_size"), ({"rate": True}, "rate"),
     ({"batch_size": 10.0}, "batch_size")],
)  # fmt: skip
async def test_true_or_a_float_for_a_number_is_refused_before_any_operation_starts(
    client: httpx.AsyncClient,
    seeded: dict[str, str],
    dlq: Queue,
    raw: aioredis.Redis,
    prefix: str,
    values: dict[str, Any],
    field: str,
) -> None:
    # Given four dead letters
    # When a background replay (a dry run) comes with true, or a float for a count
    response = await client.post(
        BULK, json={"action": "replay", "dlq": DLQ, "all": True, "dry_run": True, **values}
    )

    # Then it is refused naming the field, and no operation was recorded
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == field
    assert [k async for k in raw.scan_iter(match=operation_key(prefix, "*"))] == []
    assert await remaining(dlq) == {"a", "b", "c", "d"}


async def test_an_unknown_operation_is_a_404(client: httpx.AsyncClient) -> None:
    for operation_id in ("0" * 32, "not-an-id", "{x}"):
        response = await client.get(f"{BULK}/{operation_id}")
        assert response.status_code == 404, operation_id
        assert response.json()["error"]["code"] == "not_found"


async def test_another_server_process_reads_the_operation_from_redis(
    client: httpx.AsyncClient, second_app: FastAPI, seeded: dict[str, str], raw: aioredis.Redis,
    prefix: str,
) -> None:  # fmt: skip
    # Given an operation started on one server, and run to its end
    started = (await client.post(BULK, json={"action": "purge", "dlq": DLQ,
                                             "filter": {"queue": "other"}})).json()  # fmt: skip
    record = await finished(client, started["url"])

    # When a second server is asked about it
    transport = httpx.ASGITransport(app=second_app)
    async with httpx.AsyncClient(
        transport=transport, base_url="http://127.0.0.1", headers=AUTH
    ) as second:
        seen = await second.get(f"{BULK}/{started['id']}")

    # Then it reports the same record, kept in Redis with a time to live
    assert seen.status_code == 200
    assert {**seen.json(), "url": ""} == {**record, "url": ""}
    assert await raw.ttl(operation_key(prefix, started["id"])) > 0


async def test_a_rate_throttles_the_operation_and_a_stopped_server_hands_it_over(
    app: FastAPI, client: httpx.AsyncClient, second_app: FastAPI, seeded: dict[str, str],
    dlq: Queue, queue: Queue, other: Queue, raw: aioredis.Redis, prefix: str,
) -> None:  # fmt: skip
    # Given a replay of everything at one dead letter every twenty seconds (slow enough that
    # a loaded machine cannot see a second one before the server stops)
    started = (await client.post(BULK, json={"action": "replay", "dlq": DLQ, "all": True,
                                             "rate": 0.05}, headers=AUTH)).json()  # fmt: skip
    assert started["rate"] == 0.05
    record: dict[str, Any] = {}

    async def one_done() -> bool:
        nonlocal record
        record = (await client.get(started["url"])).json()
        return bool(record["done"])

    # When the first dead letter is done, Then the rest wait their turn
    await wait_until(one_done, message="the first replay")
    assert (record["status"], record["done"], record["matched"]) == ("running", 1, 4)

    # When the server shuts down, Then the operation stops, waiting for a server to resume it
    await app.state.bulk.close()
    stopped = (await client.get(started["url"])).json()
    assert (stopped["status"], stopped["done"], stopped["finishedAt"]) == ("interrupted", 1, None)
    assert await dlq.get_dead_letter_count() == 3
    assert app.state.bulk.running == []

    # When a second server looks (at its start, and every few seconds); at full speed, as the
    # rest would take a minute at the operation's rate
    second: BulkOperations = second_app.state.bulk
    await raw.hset(operation_key(prefix, started["id"]), "rate", "")
    assert await second.look_after() == [started["id"]]

    # Then it goes on from where it was, and replays the other three, none twice
    ended = await finished(client, started["url"])
    assert (ended["status"], ended["done"], ended["resumes"]) == ("done", 4, 1)
    assert ended["server"] != started["server"]
    assert await dlq.get_dead_letter_count() == 0
    waiting = [j.original_data["label"] for q in (queue, other) for j in await q.get_waiting()]
    assert sorted(waiting) == ["a", "b", "c", "d"]


def test_the_record_describes_a_filter_with_times_in_ms() -> None:
    since = datetime.datetime(2025, 1, 15, 10, 30, tzinfo=datetime.timezone.utc)
    flt = DeadLetterFilter(since=since, until=1_736_940_000_000, status="pending",
                           reason="stalled", payload_contains='"a":1')  # fmt: skip

    assert describe_filter(flt) == {
        "since": 1_736_937_000_000, "until": 1_736_940_000_000, "status": "pending",
        "reason": "stalled", "payload_contains": '"a":1',
    }  # fmt: skip
    assert describe_filter(DeadLetterFilter()) == {}


async def test_starting_an_operation_with_bad_values_raises_naming_them(app: FastAPI) -> None:
    bulk: BulkOperations = app.state.bulk
    bad: list[tuple[dict[str, Any], str]] = [
        ({"rate": 0}, "rate"), ({"rate": True}, "rate"),
        ({"batch_size": 0}, "batch_size"), ({"batch_size": "9"}, "batch_size"),
    ]  # fmt: skip
    for kwargs, field in bad:
        with pytest.raises(ValueError, match=field):
            await bulk.start("purge", DLQ, DeadLetterFilter(), **kwargs)
    with pytest.raises(ValueError, match="action"):
        await bulk.start("explode", DLQ, DeadLetterFilter())  # type: ignore[arg-type]
    assert bulk.running == []
