"""Remote OJS workers in lazarus's workers registry, and the admin's quiet directive
(``lazarus.ojs.remote_workers``; ojs-admin-api 9.1-9.3)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from lazarus import Queue
from lazarus.workers import list_workers

from .test_admin import enqueue

pytestmark = pytest.mark.timeout(60)


async def fetch(client: httpx.AsyncClient, worker_id: str | None, count: int = 1) -> list[str]:
    body: dict[str, Any] = {"queues": ["mail"], "count": count}
    if worker_id is not None:
        body["worker_id"] = worker_id
    response = await client.post("/ojs/v1/workers/fetch", json=body)
    assert response.status_code == 200, response.text
    return [job["id"] for job in response.json()["jobs"]]


async def beat(client: httpx.AsyncClient, worker_id: str, jobs: list[str]) -> dict[str, Any]:
    response = await client.post(
        "/ojs/v1/workers/heartbeat", json={"worker_id": worker_id, "active_jobs": jobs}
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def test_a_worker_that_fetches_is_listed_as_a_remote_worker_of_its_queues(
    client: httpx.AsyncClient, mail: Queue
) -> None:
    # Given a remote worker that fetched a job from mail, asking for five
    job_id = await enqueue(client)
    assert await fetch(client, "w-remote", count=5) == [job_id]

    # Then lazarus's registry of the queue has it, remote, and so has the admin's list
    (registered,) = await list_workers(mail.client, mail.keys)
    assert (registered.name, registered.remote, registered.concurrency, registered.pid) == (
        "w-remote", True, 5, 0,
    )  # fmt: skip
    body = (await client.get("/ojs/v1/admin/workers")).json()
    (item,) = body["items"]
    assert (item["id"], item["queues"], item["remote"], item["state"]) == (
        "w-remote", ["mail"], True, "running",
    )  # fmt: skip
    assert item["hostname"] == registered.host != ""
    assert body["summary"] == {"total": 1, "running": 1, "quiet": 0}


async def test_a_heartbeat_tells_the_registry_which_jobs_the_worker_runs(
    client: httpx.AsyncClient, mail: Queue
) -> None:
    # Given a remote worker holding two jobs
    first, second = await enqueue(client), await enqueue(client)
    assert sorted(await fetch(client, "w-beat", count=2)) == sorted([first, second])

    # When it beats naming them
    await beat(client, "w-beat", [first, second])

    # Then its detail lists them, and the registry counts them
    detail = (await client.get("/ojs/v1/admin/workers/w-beat")).json()
    assert sorted(detail["active_job_ids"]) == sorted([first, second])
    assert detail["active_jobs"] == 2
    (registered,) = await list_workers(mail.client, mail.keys)
    assert registered.running == 2


async def test_a_fetch_without_a_worker_id_registers_no_one(
    client: httpx.AsyncClient, mail: Queue
) -> None:
    await enqueue(client)

    assert len(await fetch(client, None)) == 1

    assert await list_workers(mail.client, mail.keys) == []


async def test_a_quieted_worker_hears_quiet_and_fetches_nothing_while_others_do(
    client: httpx.AsyncClient, mail: Queue
) -> None:
    # Given a remote worker that has fetched once, and a job waiting since
    await fetch(client, "w-quiet")
    job_id = await enqueue(client)

    # When the admin quiets it
    response = await client.post("/ojs/v1/admin/workers/w-quiet/quiet")
    assert response.status_code == 200, response.text
    assert response.json()["state"] == "quiet"

    # Then its heartbeat says so, its fetches get no job, and another worker gets the job
    assert (await beat(client, "w-quiet", []))["directive"] == "quiet"
    assert await fetch(client, "w-quiet") == []
    assert await fetch(client, "w-other") == [job_id]
    listed = {
        w["id"]: w["state"] for w in (await client.get("/ojs/v1/admin/workers")).json()["items"]
    }
    assert listed == {"w-quiet": "quiet", "w-other": "running"}


async def test_quieting_a_worker_that_is_not_live_is_a_404_and_writes_nothing(
    client: httpx.AsyncClient, raw: Any, prefix: str
) -> None:
    response = await client.post("/ojs/v1/admin/workers/nobody/quiet")

    assert response.status_code == 404, response.text
    assert response.json()["error"]["details"] == {"worker_id": "nobody"}
    assert await raw.exists(f"{prefix}:ojs:directive:nobody") == 0
    assert (await client.get("/ojs/v1/admin/workers/nobody")).status_code == 404
