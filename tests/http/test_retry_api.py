"""POST /api/queues/{name}/jobs/{id}/retry, POST /api/queues/{name}/retry,
POST /api/queues/{name}/jobs/{id}/promote and POST /api/queues/{name}/promote."""

from __future__ import annotations

from typing import Any

import httpx

from lazarus import Job, Queue
from tests.conftest import wait_until


async def failed_jobs(queue: Queue, make_worker: Any, count: int) -> list[str]:
    added = await queue.add_bulk([{"name": "n", "data": {"i": i}} for i in range(count)])

    async def boom(job: Job) -> None:
        raise RuntimeError("boom")

    worker = make_worker(boom)

    async def failed() -> bool:
        return await queue.get_failed_count() == count

    await wait_until(failed)
    await worker.close()
    return [job.id for job in added]


async def test_retry_one_failed_job(
    client: httpx.AsyncClient, queue: Queue, make_worker: Any
) -> None:
    (job_id,) = await failed_jobs(queue, make_worker, 1)
    response = await client.post(f"/api/queues/jobs/jobs/{job_id}/retry")
    assert response.status_code == 200, response.text
    assert (response.json()["id"], response.json()["state"]) == (job_id, "waiting")
    again = await client.post(f"/api/queues/jobs/jobs/{job_id}/retry")
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "job_state_conflict"
    missing = await client.post("/api/queues/jobs/jobs/nope/retry")
    assert missing.status_code == 404


async def test_retry_every_failed_job_with_a_dry_run_first(
    client: httpx.AsyncClient, queue: Queue, make_worker: Any
) -> None:
    await failed_jobs(queue, make_worker, 3)
    dry = await client.post("/api/queues/jobs/retry?dryRun=true")
    assert dry.json() == {"state": "failed", "retried": 3, "dryRun": True}
    assert await queue.get_failed_count() == 3
    done = await client.post("/api/queues/jobs/retry")
    assert done.json() == {"state": "failed", "retried": 3, "dryRun": False}
    assert await queue.get_failed_count() == 0


async def test_retry_of_an_unknown_queue_is_a_404(client: httpx.AsyncClient) -> None:
    assert (await client.post("/api/queues/nope/retry")).status_code == 404


async def test_the_live_workers_of_a_queue(
    client: httpx.AsyncClient, queue: Queue, make_worker: Any
) -> None:
    await queue.add("n")
    make_worker(lambda job: None, name="w-1", concurrency=2)

    async def listed() -> bool:
        return bool((await client.get("/api/queues/jobs/workers")).json()["workers"])

    await wait_until(listed)
    (worker,) = (await client.get("/api/queues/jobs/workers")).json()["workers"]
    assert (worker["name"], worker["concurrency"]) == ("w-1", 2)
    assert worker["lastSeen"] >= worker["startedAt"] > 0


async def test_promote_one_delayed_job(client: httpx.AsyncClient, queue: Queue) -> None:
    job = await queue.add("n", {"i": 1}, delay=3_600_000)

    response = await client.post(f"/api/queues/jobs/jobs/{job.id}/promote")

    assert response.status_code == 200, response.text
    assert (response.json()["id"], response.json()["state"]) == (job.id, "waiting")
    assert await queue.get_job_state(job.id) in ("waiting", "active", "completed")
    again = await client.post(f"/api/queues/jobs/jobs/{job.id}/promote")
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "job_state_conflict"
    missing = await client.post("/api/queues/jobs/jobs/nope/promote")
    assert missing.status_code == 404


async def test_promote_every_delayed_job_with_a_dry_run_first(
    client: httpx.AsyncClient, queue: Queue
) -> None:
    await queue.pause()  # promoted jobs stay put where the test can see them
    delayed = [await queue.add("n", {"i": i}, delay=3_600_000 + i) for i in range(3)]
    ready = await queue.add("n", {"i": 9})

    dry = await client.post("/api/queues/jobs/promote?dryRun=true")

    assert dry.status_code == 200, dry.text
    assert dry.json() == {"promoted": 3, "dryRun": True}
    assert [await queue.get_job_state(j.id) for j in delayed] == ["delayed"] * 3
    done = await client.post("/api/queues/jobs/promote")
    assert done.json() == {"promoted": 3, "dryRun": False}
    assert [await queue.get_job_state(j.id) for j in [*delayed, ready]] == ["paused"] * 4
    assert await queue.get_delayed_count() == 0
    again = await client.post("/api/queues/jobs/promote")
    assert again.json() == {"promoted": 0, "dryRun": False}


async def test_promote_of_an_unknown_queue_is_a_404_and_needs_the_token(
    client: httpx.AsyncClient, anonymous: httpx.AsyncClient, queue: Queue
) -> None:
    job = await queue.add("n", None, delay=3_600_000)

    missing = await client.post("/api/queues/nope/promote")
    refused = await anonymous.post("/api/queues/jobs/promote")
    misspelt = await client.post("/api/queues/jobs/promote?dry_run=true")

    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    assert refused.status_code == 401
    assert misspelt.status_code == 422 and "dry_run" in misspelt.text
    assert await queue.get_job_state(job.id) == "delayed"
