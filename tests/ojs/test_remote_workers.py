"""Remote OJS workers in lazarus's workers registry, and the admin's quiet directive
(``lazarus.ojs.remote_workers``; ojs-admin-api 9.1-9.4)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from lazarus import Queue, Worker
from lazarus.ojs import remote_workers
from lazarus.ojs.sweeper import Sweeper
from lazarus.workers import list_workers

from ..conftest import wait_until
from .test_admin import enqueue
from .test_layer import backend_of

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


async def lapse(mail: Queue, worker_id: str) -> None:
    """Let the registration of ``worker_id`` lapse, as three missed heartbeats would."""
    await mail.client.zadd(mail.keys.workers, {worker_id: 1})


async def test_deregistering_a_lapsed_worker_sends_the_jobs_it_holds_back_at_once(
    client: httpx.AsyncClient, app: FastAPI, mail: Queue
) -> None:
    # Given a remote worker that fetched two jobs under an hour's lease, then fell silent
    first, second = await enqueue(client), await enqueue(client)
    response = await client.post("/ojs/v1/workers/fetch", json={
        "queues": ["mail"], "count": 2, "worker_id": "w-gone",
        "visibility_timeout_ms": 3_600_000})  # fmt: skip
    assert len(response.json()["jobs"]) == 2
    await lapse(mail, "w-gone")

    # When the admin deregisters it
    response = await client.delete("/ojs/v1/admin/workers/w-gone")

    # Then both jobs are let go, and the server's next sweep makes them available again,
    # and the worker is forgotten
    assert response.status_code == 200, response.text
    assert sorted(response.json()["rescheduled_job_ids"]) == sorted([first, second])
    await Sweeper(backend_of(app)).tick()
    for job_id in (first, second):
        job = (await client.get(f"/ojs/v1/jobs/{job_id}")).json()["job"]
        assert (job["state"], job["attempt"]) == ("available", 1)
    assert await mail.client.hexists(mail.keys.workers_info, "w-gone") == 0
    assert (await client.delete("/ojs/v1/admin/workers/w-gone")).status_code == 404


async def test_a_live_worker_is_not_deregistered_and_keeps_its_jobs(
    client: httpx.AsyncClient, app: FastAPI, mail: Queue
) -> None:
    # Given a remote worker holding a job, beating
    job_id = await enqueue(client)
    assert await fetch(client, "w-live") == [job_id]

    # When the admin tries to deregister it
    response = await client.delete("/ojs/v1/admin/workers/w-live")

    # Then it is refused, naming the worker, and the job stays the worker's
    assert response.status_code == 409, response.text
    assert response.json()["error"]["details"] == {"worker_id": "w-live"}
    await Sweeper(backend_of(app)).tick()
    assert (await client.get(f"/ojs/v1/jobs/{job_id}")).json()["job"]["state"] == "active"
    ack = await client.post("/ojs/v1/workers/ack", json={"job_id": job_id, "worker_id": "w-live"})
    assert ack.status_code == 200, ack.text


async def test_deregistering_leaves_alone_a_job_another_worker_holds_now(
    client: httpx.AsyncClient, app: FastAPI, mail: Queue
) -> None:
    # Given a job a remote worker let lapse, that another worker fetched since
    job_id = await enqueue(client, visibility_timeout_ms=50)
    assert await fetch(client, "w-old") == [job_id]
    sweeper = Sweeper(backend_of(app))

    async def available() -> bool:
        await sweeper.tick()
        job = (await client.get(f"/ojs/v1/jobs/{job_id}")).json()["job"]
        return bool(job["state"] == "available")

    await wait_until(available, message="the lapsed lease swept")
    assert await fetch(client, "w-new") == [job_id]
    await lapse(mail, "w-old")

    # When the first worker is deregistered
    response = await client.delete("/ojs/v1/admin/workers/w-old")

    # Then nothing of the other worker's is let go
    assert response.status_code == 200, response.text
    assert response.json()["rescheduled_job_ids"] == []
    ack = await client.post("/ojs/v1/workers/ack", json={"job_id": job_id, "worker_id": "w-new"})
    assert ack.status_code == 200, ack.text


async def test_deregistering_lets_go_of_every_job_the_worker_holds_past_one_page(
    client: httpx.AsyncClient, mail: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a lapsed remote worker holding five jobs, claimed between those of a live one,
    # and a deregistration that reads two active jobs at a time
    monkeypatch.setattr(remote_workers, "ACTIVE_PAGE", 2)
    gone: list[str] = []
    for _ in range(5):
        for _ in range(2):
            await enqueue(client)
        gone += await fetch(client, "w-many")
        assert len(await fetch(client, "w-busy")) == 1
    await lapse(mail, "w-many")

    # When the admin deregisters it
    response = await client.delete("/ojs/v1/admin/workers/w-many")

    # Then every one of its jobs is let go, from every page, and none of the other's
    assert response.status_code == 200, response.text
    assert sorted(response.json()["rescheduled_job_ids"]) == sorted(gone)
    assert len(set(gone)) == 5


async def test_deregistering_an_unknown_worker_is_a_404(client: httpx.AsyncClient) -> None:
    response = await client.delete("/ojs/v1/admin/workers/nobody")

    assert response.status_code == 404, response.text
    assert response.json()["error"]["details"] == {"worker_id": "nobody"}


async def test_quieting_an_in_process_worker_is_refused_and_writes_nothing(
    client: httpx.AsyncClient, mail: Queue, redis_url: str, prefix: str, raw: Any
) -> None:
    # Given a live lazarus Worker of the queue, which hears no directive
    worker = Worker("mail", lambda job: None, connection=redis_url, prefix=prefix)
    try:

        async def registered() -> bool:
            return bool(await list_workers(mail.client, mail.keys))

        await wait_until(registered, message="the worker's registration")
        (listed,) = await list_workers(mail.client, mail.keys)

        # When the admin tries to quiet it
        response = await client.post(f"/ojs/v1/admin/workers/{listed.name}/quiet")

        # Then it is refused, naming the worker, and no directive waits for it
        assert response.status_code == 409, response.text
        assert response.json()["error"]["details"] == {"worker_id": listed.name}
        assert await raw.exists(f"{prefix}:ojs:directive:{listed.name}") == 0
    finally:
        await worker.close()
