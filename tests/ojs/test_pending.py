"""OJS ``options.pending`` and ACTIVATE: a staged job is not handed to workers until it is
activated; activating anything else is a 409."""

from __future__ import annotations

import datetime
from typing import Any

import httpx
from redis.asyncio import Redis

from lazarus import Queue
from lazarus.ojs.records import now_ms

from ..conftest import keys_of
from .test_layer import fetch, state_of


async def push(client: httpx.AsyncClient, **options: Any) -> dict[str, Any]:
    body = {"type": "mail.send", "args": ["ada"], "options": {"queue": "mail", **options}}
    response = await client.post("/ojs/v1/jobs", json=body)
    assert response.status_code == 201, response.text
    job: dict[str, Any] = response.json()["job"]
    return job


async def activate(client: httpx.AsyncClient, job_id: str) -> httpx.Response:
    return await client.post(f"/ojs/v1/jobs/{job_id}/activate")


async def test_a_pending_job_waits_for_activation_then_runs(
    client: httpx.AsyncClient, redis_url: str, prefix: str
) -> None:
    job = await push(client, pending=True)
    assert job["state"] == "pending"
    other = await push(client)

    # Not handed out while pending; the engine holds it as delayed
    assert [j["id"] for j in await fetch(client, count=10)] == [other["id"]]
    assert (await state_of(client, job["id"]))["state"] == "pending"
    async with Queue("mail", connection=redis_url, prefix=prefix) as mail:
        assert await mail.get_job_state(job["id"]) == "delayed"

    answer = await activate(client, job["id"])

    assert answer.status_code == 200, answer.text
    activated = answer.json()["job"]
    assert (activated["state"], activated["previous_state"]) == ("available", "pending")
    assert activated["activated_at"]
    assert [j["id"] for j in await fetch(client)] == [job["id"]]
    again = await activate(client, job["id"])
    assert again.status_code == 409
    assert again.json()["error"]["details"]["current_state"] == "active"


async def test_a_pending_job_with_a_time_to_come_is_scheduled_once_activated(
    client: httpx.AsyncClient, redis_url: str, prefix: str
) -> None:
    due = now_ms() + 3_600_000
    moment = datetime.datetime.fromtimestamp(due / 1000, datetime.timezone.utc)
    job = await push(client, pending=True, delay_until=moment.isoformat())
    assert job["state"] == "pending"

    answer = await activate(client, job["id"])

    assert answer.json()["job"]["state"] == "scheduled"
    async with Queue("mail", connection=redis_url, prefix=prefix) as mail:
        score = await mail.client.zscore(mail.keys.delayed, job["id"])
    assert score is not None and abs(score - due) <= 1_000


async def test_activate_refuses_what_is_not_pending(
    client: httpx.AsyncClient, raw: Redis, prefix: str
) -> None:
    ready = await push(client)
    before = await keys_of(raw, prefix) - {f"{prefix}:audit"}

    answer = await activate(client, ready["id"])
    missing = await activate(client, "01940000-0000-7000-8000-000000000000")

    assert answer.status_code == 409
    assert answer.json()["error"]["details"] == {
        "job_id": ready["id"], "current_state": "available"
    }  # fmt: skip
    assert missing.status_code == 404
    assert await keys_of(raw, prefix) - {f"{prefix}:audit"} == before


async def test_a_pending_job_can_be_cancelled(client: httpx.AsyncClient) -> None:
    job = await push(client, pending=True)

    cancelled = await client.delete(f"/ojs/v1/jobs/{job['id']}")

    assert cancelled.json()["job"]["state"] == "cancelled"
    assert (await activate(client, job["id"])).status_code == 409


async def test_a_pending_flag_that_is_not_a_boolean_is_refused(
    client: httpx.AsyncClient, raw: Redis, prefix: str
) -> None:
    before = await keys_of(raw, prefix) - {f"{prefix}:audit"}
    body = {"type": "mail.send", "args": [], "options": {"pending": "yes"}}

    response = await client.post("/ojs/v1/jobs", json=body)

    assert response.status_code == 400
    assert response.json()["error"]["details"]["field"] == "options.pending"
    assert await keys_of(raw, prefix) - {f"{prefix}:audit"} == before
