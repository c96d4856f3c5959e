"""POST /api/queues/{name}/jobs/{id}/cancel: a job that has not ended fails as cancelled, by
a real worker; an ended job, a bad reason or a viewer's request writes nothing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest
import redis.asyncio as aioredis

from lazarus import Job, Queue
from lazarus.http import create_app
from tests.conftest import (
    dead_letter_of,
    job_snapshot,
    run_until_stopped,
    wait_for_state,
)

from .conftest import DLQ, MakeWorker, dead_letter, job

VIEWER = "viewer-token-0123456789"


def url(job_id: str, queue: str = "jobs") -> str:
    return f"/api/queues/{queue}/jobs/{job_id}/cancel"


@pytest.fixture
async def viewer(redis_url: str, prefix: str) -> AsyncIterator[httpx.AsyncClient]:
    """A client of an app whose only token is a viewer's."""
    app = create_app(connection=redis_url, prefix=prefix, tokens=f"eve:viewer:{VIEWER}")
    transport = httpx.ASGITransport(app=app)
    headers = {"Authorization": f"Bearer {VIEWER}"}
    async with httpx.AsyncClient(
        transport=transport, base_url="http://localhost", headers=headers
    ) as c:
        yield c
    await app.state.bulk.close()
    await app.state.ops.close()


async def test_a_waiting_job_is_cancelled_and_a_worker_fails_it_without_running_it(
    client: httpx.AsyncClient, queue: Queue, make_worker: MakeWorker
) -> None:
    # Given a job that waits behind another
    first = await queue.add("n", {"i": 1})
    second = await queue.add("n", {"i": 2})

    # When the second is cancelled with a reason
    response = await client.post(url(second.id), json={"reason": "duplicate order"})

    # Then the answer is the job, first in line; a worker fails it without running it
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["id"], body["state"], body["data"]) == (second.id, "waiting", {"i": 2})
    ran: list[str] = []

    async def process(j: Job) -> None:
        ran.append(j.id)

    make_worker(process, concurrency=1, dead_letter_queue=None)
    await wait_for_state(queue, second.id, "failed")
    await wait_for_state(queue, first.id, "completed")
    assert ran == [first.id]
    failed = (await client.get(f"/api/queues/jobs/jobs/{second.id}")).json()
    assert (failed["state"], failed["errorType"], failed["failedReason"]) == (
        "failed", "JobCancelledError", "duplicate order",
    )  # fmt: skip


async def test_without_a_body_a_paused_queue_s_job_is_cancelled_as_cancelled(
    client: httpx.AsyncClient, queue: Queue, make_worker: MakeWorker
) -> None:
    await queue.pause()
    added = await queue.add("n", None, delay=3_600_000)

    response = await client.post(url(added.id))

    assert response.status_code == 200, response.text
    assert response.json()["state"] == "paused"
    make_worker(lambda j: None, dead_letter_queue=None)
    await queue.resume()
    await wait_for_state(queue, added.id, "failed")
    stored = await queue.get_job(added.id)
    assert stored is not None and stored.failed_reason == "cancelled"


async def test_a_running_job_is_answered_active_and_its_worker_stops_it(
    client: httpx.AsyncClient, queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    added, stopped = await run_until_stopped(queue, make_worker, dead_letter_queue=DLQ)

    response = await client.post(url(added.id), json={"reason": "withdrawn"})

    assert response.status_code == 200, response.text
    assert response.json()["state"] == "active"
    await asyncio.wait_for(stopped.wait(), 10)
    letter = await dead_letter_of(dlq, added.id)
    assert letter.dead_letter is not None
    assert (letter.dead_letter.reason, letter.dead_letter.failed_reason) == (
        "cancelled", "withdrawn",
    )  # fmt: skip


async def test_an_ended_job_is_a_409_and_nothing_is_written(
    client: httpx.AsyncClient,
    queue: Queue,
    dlq: Queue,
    make_worker: MakeWorker,
    raw: aioredis.Redis,
) -> None:
    (letter,) = await dead_letter(make_worker, queue, [job("n", "a")])
    done = await queue.add("ok", None)
    worker = make_worker(lambda j: None)
    await wait_for_state(queue, done.id, "completed")
    await worker.close()

    for target, job_id in ((queue, done.id), (dlq, letter)):
        before = await job_snapshot(raw, target, job_id)

        response = await client.post(url(job_id, target.name), json={"reason": "too late"})

        assert response.status_code == 409, response.text
        error = response.json()["error"]
        assert error["code"] == "job_state_conflict"
        assert "it has ended" in error["message"]
        assert await job_snapshot(raw, target, job_id) == before


@pytest.mark.parametrize(
    ("content", "field", "says"),
    [
        ('{"reason": ""}', "reason", "reason must not be empty"),
        ('{"reason": null}', "reason", "valid string"),
        ('{"reason": 5}', "reason", "valid string"),
        ('{"reason": "' + "x" * 5000 + '"}', "reason", "reason must be at most 4096 bytes"),
        ('{"reason": "' + "é" * 2100 + '"}', "reason", "at most 4096 bytes of JSON, got 4202"),
        ('{"reason": "x", "why": "y"}', "why", "Extra inputs"),
        ('{"reason": ', "body", "not valid JSON"),
        ('["x"]', "body", "valid dictionary"),
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

    response = await client.post(
        url(added.id), content=content, headers={"content-type": "application/json"}
    )

    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert (error["code"], error["field"]) == ("invalid_parameter", field)
    assert says in error["message"]
    assert await job_snapshot(raw, queue, added.id) == before


async def test_a_missing_job_or_queue_is_a_404_and_writes_nothing(
    client: httpx.AsyncClient, queue: Queue, raw: aioredis.Redis
) -> None:
    added = await queue.add("n", None)
    before = await job_snapshot(raw, queue, added.id)

    no_job = await client.post(url("nope"))
    no_queue = await client.post(url(added.id, "nope"))

    assert no_job.status_code == 404 and no_job.json()["error"]["code"] == "not_found"
    assert no_queue.status_code == 404 and "no queue 'nope'" in no_queue.text
    assert not await raw.exists(queue.keys.job("nope"))
    assert await job_snapshot(raw, queue, added.id) == before


async def test_a_viewer_or_a_caller_without_a_token_is_refused_and_nothing_is_written(
    viewer: httpx.AsyncClient,
    anonymous: httpx.AsyncClient,
    queue: Queue,
    raw: aioredis.Redis,
) -> None:
    added = await queue.add("n", None)
    before = await job_snapshot(raw, queue, added.id)

    as_viewer = await viewer.post(url(added.id), json={"reason": "mine"})
    without_token = await anonymous.post(url(added.id))

    assert as_viewer.status_code == 403, as_viewer.text
    assert as_viewer.json()["error"]["code"] == "forbidden"
    assert without_token.status_code == 401
    assert await job_snapshot(raw, queue, added.id) == before
    assert await queue.get_job_state(added.id) == "waiting"
