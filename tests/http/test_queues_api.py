"""Queue endpoints, pause and resume, and the health check (seed 004, FR-008)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from lazarus import Job, Queue
from lazarus.http import create_app

from .conftest import DLQ, MakeWorker, fail_as_told

UNREACHABLE = "redis://127.0.0.1:1/0"


def by_name(items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {item["name"]: item for item in items}


async def test_queue_list_shows_counts_and_dead_letter_depth(
    client: httpx.AsyncClient, seeded: dict[str, str], queue: Queue
) -> None:
    # Given four dead letters and one job waiting in jobs
    await queue.add("pending", {"n": 1})

    # When the queues are listed
    response = await client.get("/api/queues")

    # Then each queue shows its counts, and the DLQ its depth and oldest dead letter
    assert response.status_code == 200
    queues = by_name(response.json()["queues"])
    assert set(queues) == {"jobs", "other", DLQ}
    assert queues["jobs"]["counts"]["waiting"] == 1
    assert queues["jobs"]["isDeadLetterQueue"] is False
    dead = queues[DLQ]
    assert (dead["isDeadLetterQueue"], dead["deadLetters"]) == (True, 4)
    oldest = min(j.dead_letter.dead_lettered_at for j in await Queue(
        DLQ, connection=queue.client, prefix=queue.prefix).get_dead_letter_jobs()
        if j.dead_letter)  # fmt: skip
    assert dead["oldestDeadLetterAt"] == oldest


async def test_one_queue_and_an_unknown_queue(
    client: httpx.AsyncClient, seeded: dict[str, str]
) -> None:
    one = await client.get(f"/api/queues/{DLQ}")
    unknown = await client.get("/api/queues/never-used")

    assert one.status_code == 200
    assert (one.json()["name"], one.json()["deadLetters"]) == (DLQ, 4)
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == "not_found"


async def test_one_job_of_a_queue_with_its_state(
    client: httpx.AsyncClient, seeded: dict[str, str], queue: Queue
) -> None:
    # Given a waiting job in jobs and a dead letter in the DLQ
    job = await queue.add("pending", {"n": 1}, attempts=2)

    # When each is fetched through its queue
    waiting = await client.get(f"/api/queues/jobs/jobs/{job.id}")
    dead = await client.get(f"/api/queues/{DLQ}/jobs/{seeded['a']}")
    missing = await client.get("/api/queues/jobs/jobs/no-such-job")

    # Then each comes with its state, and the dead letter with its metadata
    assert waiting.status_code == 200
    body = waiting.json()
    assert (body["id"], body["state"], body["data"], body["maxAttempts"]) == (
        job.id, "waiting", {"n": 1}, 2
    )  # fmt: skip
    assert body["deadLetter"] is None and body["expiresAt"] is None
    assert dead.json()["deadLetter"]["sourceQueue"] == "jobs"
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "not_found"


async def test_a_job_with_an_expiry_says_when(client: httpx.AsyncClient, queue: Queue) -> None:
    job = await queue.add("flash-sale", None, expires=90_000)

    body = (await client.get(f"/api/queues/jobs/jobs/{job.id}")).json()

    assert body["opts"]["expires"] == 90_000
    assert body["expiresAt"] == body["timestamp"] + 90_000


async def test_pause_and_resume_a_queue(client: httpx.AsyncClient, queue: Queue) -> None:
    # Given a queue with one waiting job
    await queue.add("pending")

    # When it is paused, then resumed
    paused = await client.post("/api/queues/jobs/pause")
    assert await queue.is_paused()
    resumed = await client.post("/api/queues/jobs/resume")

    # Then each answer shows the new state
    assert paused.status_code == 200
    assert paused.json()["paused"] is True
    assert paused.json()["counts"]["paused"] == 1
    assert resumed.json()["paused"] is False
    assert resumed.json()["counts"]["waiting"] == 1
    assert not await queue.is_paused()


async def test_pause_of_an_unknown_queue_is_not_found_and_writes_nothing(
    client: httpx.AsyncClient, raw: Any, prefix: str
) -> None:
    response = await client.post("/api/queues/never-used/pause")
    assert response.status_code == 404
    # Nothing but the audit trail's record of the refusal
    assert [k async for k in raw.scan_iter(match=f"{prefix}:*")] == [f"{prefix}:audit"]


async def test_health_reports_active_waiting_failed_and_dead_letters_per_queue(
    client: httpx.AsyncClient, make_worker: MakeWorker, queue: Queue, other: Queue
) -> None:
    # Given one active job and two waiting ones in jobs (a worker of concurrency 1 holds the
    # first), one failed job in other, and one dead letter in jobs-dlq
    release = asyncio.Event()
    started = asyncio.Event()

    async def hold(job: Job) -> None:
        if (job.data or {}).get("error"):
            await fail_as_told(job)
        started.set()
        await release.wait()

    failing = make_worker(fail_as_told, "other")
    failed = asyncio.Event()
    failing.on("failed", lambda *_: failed.set())
    await other.add("fails", {"error": "ValueError"})
    await asyncio.wait_for(failed.wait(), 10)

    holder = make_worker(hold, "jobs", dead_letter_queue=DLQ)
    dead = asyncio.Event()
    holder.on("deadLettered", lambda *_: dead.set())
    await queue.add("dies", {"error": "TimeoutError"})
    await asyncio.wait_for(dead.wait(), 10)
    await queue.add("held")
    await asyncio.wait_for(started.wait(), 10)
    await queue.add_bulk([{"name": "later"}, {"name": "later"}])

    # When the health check is called
    response = await client.get("/api/health")
    release.set()

    # Then it reports Redis as reachable and the exact counts
    assert response.status_code == 200
    health = response.json()
    assert health["status"] == "ok"
    assert health["redis"]["reachable"] is True
    queues = by_name(health["queues"])
    assert {k: queues["jobs"][k] for k in ("active", "waiting", "failed")} == {
        "active": 1, "waiting": 2, "failed": 0
    }  # fmt: skip
    assert queues["other"]["failed"] == 1
    assert queues[DLQ]["deadLetters"] == 1


async def test_health_with_no_queues_reports_zero_queues(client: httpx.AsyncClient) -> None:
    response = await client.get("/api/health")
    assert response.json() == {
        "status": "ok", "redis": {"reachable": True, "error": None}, "queues": [], "error": None
    }  # fmt: skip


@pytest.fixture(params=["redis", "cluster"])
async def unreachable(request: pytest.FixtureRequest) -> AsyncIterator[httpx.AsyncClient]:
    """A client of an app whose Redis (or Redis Cluster) cannot be reached."""
    url = UNREACHABLE.replace("redis://", "redis+cluster://", 1)
    app = create_app(connection=url if request.param == "cluster" else UNREACHABLE,
                     prefix="p", token="t" * 16)  # fmt: skip
    transport = httpx.ASGITransport(app=app)
    headers = {"Authorization": f"Bearer {'t' * 16}"}
    async with httpx.AsyncClient(
        transport=transport, base_url="http://localhost", headers=headers
    ) as c:
        yield c
    await app.state.ops.close()


async def test_health_is_503_with_a_json_body_when_redis_is_down(
    unreachable: httpx.AsyncClient,
) -> None:
    response = await unreachable.get("/api/health")

    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable"
    assert body["redis"]["reachable"] is False
    assert "127.0.0.1:1" in body["redis"]["error"]
    assert body["error"]["code"] == "redis_unavailable"


async def test_liveness_says_only_whether_redis_answers(
    unreachable: httpx.AsyncClient, anonymous: httpx.AsyncClient
) -> None:
    # /health needs no credentials, and tells an anonymous caller nothing about the setup
    assert (await anonymous.get("/health")).json() == {"status": "ok"}
    async with httpx.AsyncClient(
        transport=unreachable._transport, base_url="http://localhost"
    ) as stranger:
        down = await stranger.get("/health")
    assert down.status_code == 503
    assert down.json() == {"status": "unavailable"}


@pytest.mark.parametrize(
    "path",
    ["/api/queues", "/api/queues/jobs", "/api/queues/jobs/jobs/x", "/metrics",
     f"/api/dlq?dlq={DLQ}", f"/api/dlq/x?dlq={DLQ}",
     f"/api/dlq/stats?dlq={DLQ}"],
)  # fmt: skip
async def test_every_read_is_503_redis_unavailable_when_redis_is_down(
    unreachable: httpx.AsyncClient, path: str
) -> None:
    response = await unreachable.get(path)

    assert response.status_code == 503
    assert response.json()["error"]["code"] == "redis_unavailable"
