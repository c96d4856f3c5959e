"""OJS ``expires_at``: a job past it when a worker would fetch it is discarded without
running, into the server's dead letter queue with reason ``expired``; a job cancelled by
``Queue.cancel_job`` while it waited is not handed out either."""

from __future__ import annotations

import datetime
from typing import Any

import httpx
from redis.asyncio import Redis

from lazarus import Queue
from lazarus.ojs.records import now_ms

from ..conftest import keys_of, wait_until
from .test_layer import DLQ, RETRY_ONCE, enqueue, fetch, state_of


def iso(ms: int) -> str:
    moment = datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


async def passed(ms: int) -> None:
    async def reached() -> bool:
        return now_ms() > ms

    await wait_until(reached, message=f"the clock past {iso(ms)}")


async def push(client: httpx.AsyncClient, **fields: Any) -> dict[str, Any]:
    options = {"queue": "mail", "retry": RETRY_ONCE}
    body = {"type": "mail.send", "args": ["ada"], **fields, "options": options}
    response = await client.post("/ojs/v1/jobs", json=body)
    assert response.status_code == 201, response.text
    job: dict[str, Any] = response.json()["job"]
    return job


async def dead_letter(redis_url: str, prefix: str, job_id: str) -> Any:
    async with Queue(DLQ, connection=redis_url, prefix=prefix) as dead:
        letter = await dead.find_dead_letter_by_original_id(job_id)
    assert letter is not None and letter.dead_letter is not None
    return letter.dead_letter


async def test_a_job_fetched_past_its_expiry_is_discarded_not_handed_out(
    client: httpx.AsyncClient, redis_url: str, prefix: str
) -> None:
    expires = now_ms() + 200
    late = await push(client, expires_at=iso(expires))
    await passed(expires)
    fresh = await enqueue(client)

    fetched = await fetch(client)

    assert [j["id"] for j in fetched] == [fresh]  # the fetch went on past the expired one
    assert (await state_of(client, late["id"]))["state"] == "discarded"
    letter = await dead_letter(redis_url, prefix, late["id"])
    assert (letter.reason, letter.error_type) == ("expired", "JobExpiredError")
    assert "before it started" in (letter.failed_reason or "")
    errors = (await client.get(f"/ojs/v1/dead-letter/{late['id']}")).json()["job"]["errors"]
    assert [(e["code"], e["retryable"]) for e in errors] == [("expired", False)]


async def test_a_job_that_expires_before_it_is_due_is_taken_and_discarded_once_due(
    client: httpx.AsyncClient, redis_url: str, prefix: str
) -> None:
    # (Margins of seconds: a first request to a fresh app takes a few hundred milliseconds.)
    now = now_ms()
    job = await push(client, scheduled_at=iso(now + 2_000), expires_at=iso(now + 1_000))
    assert job["state"] == "scheduled"
    await passed(now + 2_000)

    async def discarded() -> bool:
        assert await fetch(client) == []
        return (await state_of(client, job["id"]))["state"] == "discarded"

    await wait_until(discarded, message="the expired job discarded by a fetch")
    letter = await dead_letter(redis_url, prefix, job["id"])
    assert letter.reason == "expired"


async def test_a_job_within_its_expiry_runs_and_the_engine_knows_its_expiry(
    client: httpx.AsyncClient, redis_url: str, prefix: str
) -> None:
    expires = now_ms() + 3_600_000
    job = await push(client, expires_at=iso(expires))

    assert [j["id"] for j in await fetch(client)] == [job["id"]]
    async with Queue("mail", connection=redis_url, prefix=prefix) as mail:
        stored = await mail.get_job(job["id"])
    assert stored is not None and stored.expires_at is not None
    assert 0 <= stored.expires_at - expires <= 1_000  # within the add's own milliseconds
    assert (await state_of(client, job["id"]))["expires_at"] == iso(expires)


async def test_a_bad_expires_at_is_refused_naming_it_and_nothing_is_written(
    client: httpx.AsyncClient, raw: Redis, prefix: str
) -> None:
    before = await keys_of(raw, prefix) - {f"{prefix}:audit"}  # the requests' own audit
    for fields, named in (
        ({"expires_at": "tomorrow"}, "expires_at"),
        ({"expires_at": 1700000000}, "expires_at"),
        ({"options": {"queue": "mail", "expires_at": "2030-01-01"}}, "options.expires_at"),
    ):
        response = await client.post(
            "/ojs/v1/jobs", json={"type": "mail.send", "args": [], "options": {}, **fields}
        )
        assert response.status_code == 400, fields
        assert response.json()["error"]["message"].startswith(named), response.text
    assert await keys_of(raw, prefix) - {f"{prefix}:audit"} == before


async def test_a_waiting_job_cancelled_by_the_library_is_not_handed_out(
    client: httpx.AsyncClient, redis_url: str, prefix: str
) -> None:
    job = await push(client)
    async with Queue("mail", connection=redis_url, prefix=prefix) as mail:
        assert await mail.cancel_job(job["id"], "withdrawn") == "waiting"

    assert await fetch(client) == []
    letter = await dead_letter(redis_url, prefix, job["id"])
    assert (letter.reason, letter.error_type, letter.failed_reason) == (
        "cancelled", "JobCancelledError", "withdrawn"
    )  # fmt: skip


async def events_of(client: httpx.AsyncClient, kind: str) -> list[dict[str, Any]]:
    answer = await client.get("/ojs/v1/events", params={"types": kind})
    found: list[dict[str, Any]] = answer.json()["events"]
    return found


async def test_a_scheduled_push_and_an_expiry_are_events(client: httpx.AsyncClient) -> None:
    now = now_ms()
    later = await push(client, scheduled_at=iso(now + 3_600_000))
    await push(client)  # available at once: no job.scheduled
    expires = now_ms() + 200
    late = await push(client, expires_at=iso(expires))
    await passed(expires)

    assert len(await fetch(client, count=10)) == 1  # the available one; the expired one not

    scheduled = await events_of(client, "job.scheduled")
    assert [(e["data"]["job_id"], e["data"]["scheduled_at"]) for e in scheduled] == [
        (later["id"], iso(now + 3_600_000))
    ]
    (expired,) = await events_of(client, "job.expired")
    data = expired["data"]
    assert (data["job_id"], data["job_type"], data["queue"]) == (late["id"], "mail.send", "mail")
    assert data["ttl_ms"] == expires - int(
        datetime.datetime.fromisoformat(data["created_at"].replace("Z", "+00:00")).timestamp()
        * 1000
    )
    assert data["expired_at"] >= iso(expires)
