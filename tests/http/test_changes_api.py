"""PATCH /api/queues/{name}/jobs/{id} (a job's data, priority and delay, where it is) and
POST /api/queues/{name}/drain."""

from __future__ import annotations

import httpx
import pytest
import redis.asyncio as aioredis

from lazarus import Queue
from tests.conftest import job_snapshot

from .conftest import DLQ, MakeWorker, dead_letter, job


async def test_data_priority_and_delay_change_at_once_and_the_answer_is_the_job(
    client: httpx.AsyncClient, queue: Queue, raw: aioredis.Redis
) -> None:
    # Given a delayed job
    added = await queue.add("n", {"v": 1}, delay=60_000)

    # When all three change in one request
    response = await client.patch(
        f"/api/queues/jobs/jobs/{added.id}",
        json={"data": {"v": 2}, "priority": 3, "delay": 3_600_000},
    )

    # Then the answer is the job as it is now, and Redis holds all three
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["id"], body["state"], body["data"], body["priority"]) == (
        added.id, "delayed", {"v": 2}, 3,
    )  # fmt: skip
    assert body["opts"].get("priority", 0) == 0  # the options stay as added
    due = await raw.zscore(queue.keys.delayed, added.id)
    assert due is not None and due >= added.timestamp + 3_600_000
    assert await raw.hget(queue.keys.job(added.id), "data") == '{"v":2}'
    shown = (await client.get(f"/api/queues/jobs/jobs/{added.id}")).json()
    assert (shown["data"], shown["priority"]) == ({"v": 2}, 3)


async def test_data_null_sets_json_null_and_a_field_left_out_is_kept(
    client: httpx.AsyncClient, queue: Queue, raw: aioredis.Redis
) -> None:
    added = await queue.add("n", {"v": 1}, priority=2)

    response = await client.patch(f"/api/queues/jobs/jobs/{added.id}", json={"data": None})

    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["data"], body["priority"], body["state"]) == (None, 2, "prioritized")
    assert await raw.hget(queue.keys.job(added.id), "data") == "null"
    assert await raw.zscore(queue.keys.prioritized, added.id) is not None


async def test_a_new_priority_places_a_waiting_job_again(
    client: httpx.AsyncClient, queue: Queue, raw: aioredis.Redis
) -> None:
    await queue.pause()  # nothing runs it meanwhile
    first = await queue.add("n", None)
    second = await queue.add("n", None)

    up = await client.patch(f"/api/queues/jobs/jobs/{second.id}", json={"priority": 1})
    # A ready job of a paused queue is told paused, as get_job_state tells it
    assert (up.status_code, up.json()["state"], up.json()["priority"]) == (200, "paused", 1)
    assert await raw.lrange(queue.keys.wait, 0, -1) == [first.id]
    assert await raw.zscore(queue.keys.prioritized, second.id) is not None

    back = await client.patch(f"/api/queues/jobs/jobs/{second.id}", json={"priority": 0})
    assert back.json()["state"] == "paused"
    assert await raw.zscore(queue.keys.prioritized, second.id) is None
    assert await raw.lrange(queue.keys.wait, 0, -1) == [second.id, first.id]


@pytest.mark.parametrize(
    ("content", "field", "says"),
    [
        ("{}", "body", "nothing to change"),
        ('{"prio": 1}', "prio", "Extra inputs"),
        ('{"data": 1, "priority": -1}', "priority", "greater than or equal to 0"),
        ('{"priority": 2097153}', "priority", "less than or equal to 2097152"),
        ('{"priority": true}', "priority", "valid integer"),
        ('{"priority": 5.0}', "priority", "valid integer"),
        ('{"priority": null}', "priority", "not null"),
        ('{"delay": "10"}', "delay", "valid integer"),
        ('{"delay": null}', "delay", "not null"),
        ('{"data": NaN, "priority": 1}', "data", "JSON cannot represent"),
        ('{"data": 1,', "body", "not valid JSON"),
        ("[1]", "body", "valid dictionary"),
    ],
)
async def test_a_bad_body_is_a_422_naming_the_field_and_writes_nothing(
    client: httpx.AsyncClient,
    queue: Queue,
    raw: aioredis.Redis,
    content: str,
    field: str,
    says: str,
) -> None:
    added = await queue.add("n", {"v": 1}, delay=60_000)
    before = await job_snapshot(raw, queue, added.id)

    response = await client.patch(
        f"/api/queues/jobs/jobs/{added.id}",
        content=content,
        headers={"content-type": "application/json"},
    )

    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert (error["code"], error["field"]) == ("invalid_parameter", field)
    assert says in error["message"]
    assert await job_snapshot(raw, queue, added.id) == before


async def test_a_delay_for_a_job_that_is_not_delayed_is_a_409_and_changes_nothing(
    client: httpx.AsyncClient, queue: Queue, raw: aioredis.Redis
) -> None:
    added = await queue.add("n", {"v": 1})
    before = await job_snapshot(raw, queue, added.id)

    response = await client.patch(
        f"/api/queues/jobs/jobs/{added.id}", json={"data": "new", "priority": 1, "delay": 5}
    )

    assert response.status_code == 409, response.text
    assert response.json()["error"]["code"] == "job_state_conflict"
    assert "only a delayed job's delay changes" in response.json()["error"]["message"]
    assert await job_snapshot(raw, queue, added.id) == before


async def test_a_dead_letter_is_a_409_and_stays_as_it_was(
    client: httpx.AsyncClient,
    queue: Queue,
    dlq: Queue,
    make_worker: MakeWorker,
    raw: aioredis.Redis,
) -> None:
    (letter,) = await dead_letter(make_worker, queue, [job("n", "a")])
    before = await job_snapshot(raw, dlq, letter)

    response = await client.patch(f"/api/queues/{DLQ}/jobs/{letter}", json={"data": {"x": 1}})

    assert response.status_code == 409, response.text
    assert response.json()["error"]["code"] == "job_state_conflict"
    assert await job_snapshot(raw, dlq, letter) == before


async def test_a_missing_job_or_queue_is_a_404_and_the_token_is_required(
    client: httpx.AsyncClient, anonymous: httpx.AsyncClient, queue: Queue, raw: aioredis.Redis
) -> None:
    added = await queue.add("n", {"v": 1})
    before = await job_snapshot(raw, queue, added.id)

    no_job = await client.patch("/api/queues/jobs/jobs/nope", json={"priority": 1})
    no_queue = await client.patch(f"/api/queues/nope/jobs/{added.id}", json={"priority": 1})
    refused = await anonymous.patch(f"/api/queues/jobs/jobs/{added.id}", json={"priority": 1})

    assert no_job.status_code == 404 and no_job.json()["error"]["code"] == "not_found"
    assert no_queue.status_code == 404 and "no queue 'nope'" in no_queue.text
    assert refused.status_code == 401
    assert not await raw.exists(queue.keys.job("nope"))
    assert await job_snapshot(raw, queue, added.id) == before


# -- drain ------------------------------------------------------------------------------------


async def test_drain_removes_what_waits_and_with_delayed_the_delayed_jobs_too(
    client: httpx.AsyncClient, queue: Queue
) -> None:
    await queue.pause()
    waiting = await queue.add("n", None)
    prioritized = await queue.add("n", None, priority=1)
    later = await queue.add("n", None, delay=3_600_000)

    counted = await client.post("/api/queues/jobs/drain?dryRun=true&delayed=true")
    assert counted.json() == {"drained": 3, "delayed": True, "dryRun": True}
    assert await queue.get_job(waiting.id) is not None

    first = await client.post("/api/queues/jobs/drain")

    assert first.status_code == 200, first.text
    assert first.json() == {"drained": 2, "delayed": False, "dryRun": False}
    assert [await queue.get_job(j.id) for j in (waiting, prioritized)] == [None, None]
    assert await queue.get_job_state(later.id) == "delayed"
    second = await client.post("/api/queues/jobs/drain?delayed=true")
    assert second.json() == {"drained": 1, "delayed": True, "dryRun": False}
    assert await queue.get_job(later.id) is None


async def test_drain_leaves_dead_letters(
    client: httpx.AsyncClient, queue: Queue, make_worker: MakeWorker, dlq: Queue
) -> None:
    await dead_letter(make_worker, queue, [job("n", "a")])
    await dlq.add("n", None)  # a plain job in the dead letter queue

    response = await client.post(f"/api/queues/{DLQ}/drain?delayed=true")

    assert response.json() == {"drained": 1, "delayed": True, "dryRun": False}
    assert await dlq.get_dead_letter_count() == 1


async def test_drain_of_an_unknown_queue_a_misspelt_flag_or_no_token_drains_nothing(
    client: httpx.AsyncClient, anonymous: httpx.AsyncClient, queue: Queue
) -> None:
    await queue.pause()
    added = await queue.add("n", None, delay=3_600_000)
    waiting = await queue.add("n", None)

    missing = await client.post("/api/queues/nope/drain")
    misspelt = await client.post("/api/queues/jobs/drain?delay=true")
    refused = await anonymous.post("/api/queues/jobs/drain")

    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    assert misspelt.status_code == 422 and misspelt.json()["error"]["field"] == "delay"
    assert refused.status_code == 401
    assert await queue.get_job_state(added.id) == "delayed"
    assert await queue.get_job_state(waiting.id) == "paused"
