"""Seed 003's dead letter API, /api/v1/dead-letter, answered from Redis and from the record
(SQLite and PostgreSQL) in the same shapes, through httpx's ASGI transport."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import httpx
import pytest
import redis.asyncio as aioredis

from lazarus import Queue, Worker
from lazarus._keys import QueueKeys
from lazarus.http import create_app
from lazarus.record import RecordExporter, migrate, open_database

from .helpers import dead_letter

MakeWorker = Callable[..., Worker]
TOKEN = "t0ken-for-the-v1-tests"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
NO_AUTH = {"Authorization": ""}


@pytest.fixture(params=["redis", "sqlite", "postgresql"])
def source(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def client(
    source: str, request: pytest.FixtureRequest, redis_url: str, prefix: str
) -> AsyncIterator[httpx.AsyncClient]:
    record = None
    if source != "redis":
        record = str(
            request.getfixturevalue("postgres_url" if source == "postgresql" else "sqlite_url")
        )
        db = open_database(record)
        await migrate(db)
        await db.close()
    app = create_app(connection=redis_url, prefix=prefix, token=TOKEN, record=record)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(
        transport=transport, base_url="http://localhost", headers=AUTH
    ) as c:
        c.app = app  # type: ignore[attr-defined]
        yield c
    if app.state.record is not None:
        await app.state.record.close()
    await app.state.ops.close()


async def exported(client: httpx.AsyncClient, raw: aioredis.Redis, prefix: str) -> None:
    """Bring the record up to date (nothing to do when the app answers from Redis)."""
    record = client.app.state.record  # type: ignore[attr-defined]
    if record is not None:
        exporter = RecordExporter(raw, record.db, prefix=prefix)
        while await exporter.step():
            pass


@pytest.fixture
async def letters(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, raw: aioredis.Redis, prefix: str,
    client: httpx.AsyncClient,
) -> list[str]:  # fmt: skip
    await raw.sadd(QueueKeys(prefix, dlq.name).dead_letter_registry, dlq.name)
    await exported(client, raw, prefix)
    jobs = [("email.send", {"to": "a"}), ("report.generate", 2), ("email.send", {"to": "b"})]
    found = await dead_letter(make_worker, queue, dlq, jobs)
    await exported(client, raw, prefix)
    return [j.id for j in found]


async def test_list_is_newest_first_paged_and_filtered_by_job_type(
    client: httpx.AsyncClient, letters: list[str]
) -> None:
    everything = (await client.get("/api/v1/dead-letter", params={"limit": 2})).json()
    emails = (await client.get("/api/v1/dead-letter", params={"jobType": "email.send"})).json()
    second = (await client.get("/api/v1/dead-letter", params={"limit": 2, "page": 2})).json()

    assert [d["id"] for d in everything["data"]] == letters[:2]
    assert (everything["total"], everything["totalPages"], everything["page"]) == (3, 2, 1)
    assert [d["id"] for d in second["data"]] == letters[2:]
    assert [d["jobPayload"] for d in emails["data"]] == [{"to": "b"}, {"to": "a"}]
    item = emails["data"][0]
    assert item["jobType"] == "email.send" and item["failureCount"] == 1
    assert item["lastError"].startswith("UnrecoverableError: ")
    assert item["failedAt"].endswith("Z") and item["status"] == "pending"


async def test_stats_count_by_type(client: httpx.AsyncClient, letters: list[str]) -> None:
    stats = (await client.get("/api/v1/dead-letter/stats")).json()

    assert stats["total"] == 3
    assert stats["byType"] == [
        {"jobType": "email.send", "count": 2},
        {"jobType": "report.generate", "count": 1},
    ]
    assert stats["oldest"] <= stats["newest"]


async def test_detail_and_a_missing_id(client: httpx.AsyncClient, letters: list[str]) -> None:
    found = await client.get(f"/api/v1/dead-letter/{letters[0]}")
    missing = await client.get("/api/v1/dead-letter/nope")

    assert found.status_code == 200
    assert found.json()["attempts"][0]["outcome"] == "failed"
    assert missing.status_code == 404


async def test_retry_creates_a_job_and_the_dead_letter_leaves_the_queue(
    client: httpx.AsyncClient, letters: list[str], queue: Queue, dlq: Queue,
    raw: aioredis.Redis, prefix: str,
) -> None:  # fmt: skip
    refused = await client.post(f"/api/v1/dead-letter/{letters[0]}/retry", headers=NO_AUTH)
    retried = await client.post(f"/api/v1/dead-letter/{letters[0]}/retry", headers=AUTH)

    assert refused.status_code == 401
    assert retried.status_code == 200
    body = retried.json()
    assert (body["status"], body["type"], body["queue"]) == ("QUEUED", "email.send", "jobs")
    assert await queue.get_job_state(body["id"]) == "waiting"
    assert await dlq.get_dead_letter_count() == 2


async def test_delete_answers_204_and_the_dead_letter_is_gone_from_redis_and_the_list(
    client: httpx.AsyncClient, letters: list[str], dlq: Queue, raw: aioredis.Redis, prefix: str
) -> None:
    deleted = await client.delete(f"/api/v1/dead-letter/{letters[1]}", headers=AUTH)
    await exported(client, raw, prefix)

    assert deleted.status_code == 204
    assert await dlq.get_dead_letter_count() == 2
    listed = (await client.get("/api/v1/dead-letter")).json()
    assert letters[1] not in [d["id"] for d in listed["data"]]
    assert (await client.get(f"/api/v1/dead-letter/{letters[1]}")).status_code == 404


@pytest.mark.parametrize("source", ["sqlite", "postgresql"], indirect=True)
async def test_the_record_answers_for_dead_letters_redis_no_longer_holds(
    client: httpx.AsyncClient, letters: list[str], dlq: Queue, raw: aioredis.Redis,
    prefix: str, source: str,
) -> None:  # fmt: skip
    await dlq.purge_dead_letter(letters[0])
    await exported(client, raw, prefix)

    shown = (await client.get(f"/api/v1/dead-letter/{letters[0]}")).json()

    assert shown["status"] == "purged"
    assert [e["event"] for e in shown["events"]] == ["dead-lettered", "purged"]
