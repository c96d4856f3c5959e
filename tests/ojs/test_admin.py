"""The OJS admin API's reads (ojs-admin-api 6, 7, 9, 10): queues with their jobs counted by
state, jobs listed a page at a time by queue and state and read in full, the server's totals
and the live workers, each checked against what lazarus's own library reads."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from lazarus import Queue, Worker, list_queues
from lazarus.ojs import admin_jobs
from lazarus.workers import list_workers

from ..conftest import wait_until
from .test_input import stored

DLQ = "dead"
DEAD_LETTER = {"max_attempts": 1, "on_exhaustion": "dead_letter"}


async def enqueue(client: httpx.AsyncClient, queue: str = "mail", **options: Any) -> str:
    response = await client.post("/ojs/v1/jobs", json={
        "type": "mail.send", "args": ["ada"], "options": {"queue": queue, **options}})  # fmt: skip
    assert response.status_code == 201, response.text
    return str(response.json()["job"]["id"])


async def fetch(client: httpx.AsyncClient, queue: str = "mail") -> list[str]:
    response = await client.post("/ojs/v1/workers/fetch", json={"queues": [queue], "count": 10})
    assert response.status_code == 200, response.text
    return [job["id"] for job in response.json()["jobs"]]


async def ack(client: httpx.AsyncClient, job_id: str) -> None:
    response = await client.post("/ojs/v1/workers/ack", json={"job_id": job_id})
    assert response.status_code == 200, response.text


async def nack(client: httpx.AsyncClient, job_id: str) -> None:
    response = await client.post("/ojs/v1/workers/nack", json={
        "job_id": job_id, "error": {"code": "handler_error", "message": "smtp down"}})  # fmt: skip
    assert response.status_code == 200, response.text


async def info(client: httpx.AsyncClient, job_id: str) -> dict[str, Any]:
    response = await client.get(f"/ojs/v1/jobs/{job_id}")
    assert response.status_code == 200, response.text
    job: dict[str, Any] = response.json()["job"]
    return job


async def every_state(client: httpx.AsyncClient, mail: Queue) -> dict[str, list[str]]:
    """In 'mail': a job of each OJS state lazarus keeps, and one lazarus itself added; their
    ids by state."""
    done = await enqueue(client)
    retried = await enqueue(client, retry={"max_attempts": 3, "initial_interval": "PT1H"})
    dropped = await enqueue(client, retry={"max_attempts": 1})
    buried = await enqueue(client, retry=DEAD_LETTER)
    running = await enqueue(client)
    assert await fetch(client) == [done, retried, dropped, buried, running]
    await ack(client, done)
    for job_id in (retried, dropped, buried):
        await nack(client, job_id)
    later = await enqueue(client, delay_until="2099-01-01T00:00:00Z")
    staged = await enqueue(client, pending=True)
    waiting = await enqueue(client)
    native = (await mail.add("native", {"to": "bob"})).id
    return {"available": [waiting, native], "active": [running], "scheduled": [later],
            "retryable": [retried], "pending": [staged], "completed": [done],
            "discarded": [dropped], "dead_letter": [buried]}  # fmt: skip


def ids(body: dict[str, Any]) -> list[str]:
    return [item["id"] for item in body["items"]]


async def test_the_queue_list_counts_each_queue_s_jobs_by_ojs_state(
    client: httpx.AsyncClient, mail: Queue, redis_url: str, prefix: str
) -> None:
    # Given 'mail' with a job in each state, and a paused queue lazarus itself wrote to
    await every_state(client, mail)
    async with Queue("native", connection=redis_url, prefix=prefix) as native:
        await native.add("native", {})
        await native.pause()

    # When the admin lists the queues
    response = await client.get("/ojs/v1/admin/queues")

    # Then each queue lazarus knows is there by name, with its state and counts, the dead
    # letter counted as a discarded job of 'mail'
    assert response.status_code == 200, response.text
    body = response.json()
    assert [q["name"] for q in body["items"]] == sorted(
        {*await list_queues(redis_url, prefix=prefix), DLQ}
    )
    by_name = {q["name"]: q for q in body["items"]}
    lazarus = await mail.get_job_counts()
    assert by_name["mail"]["counts"] == {
        "available": lazarus["waiting"] + lazarus["prioritized"], "active": lazarus["active"],
        "scheduled": 1, "retryable": 1, "pending": 1, "completed": lazarus["completed"],
        "discarded": lazarus["failed"] + 1, "total": 9,
    }  # fmt: skip
    assert (by_name["mail"]["state"], by_name["mail"]["paused"]) == ("active", False)
    assert (by_name["native"]["state"], by_name["native"]["paused"]) == ("paused", True)
    assert by_name[DLQ]["counts"]["total"] == 0
    assert body["pagination"] == {"total": 3, "page": 1, "per_page": 20, "total_pages": 1}


async def test_the_queue_list_comes_a_page_at_a_time(
    client: httpx.AsyncClient, redis_url: str, prefix: str
) -> None:
    for name in ("q-a", "q-b", "q-c"):
        async with Queue(name, connection=redis_url, prefix=prefix) as queue:
            await queue.add("x", {})

    second = (await client.get("/ojs/v1/admin/queues?page=2&per_page=2")).json()

    assert [q["name"] for q in second["items"]] == ["q-c"]
    assert second["pagination"] == {"total": 3, "page": 2, "per_page": 2, "total_pages": 2}


async def test_a_queue_s_detail_has_its_counts_workers_and_throughput(
    client: httpx.AsyncClient, mail: Queue, make_worker: Callable[..., Worker]
) -> None:
    # Given 'mail' with jobs, and a lazarus worker serving it
    await every_state(client, mail)
    await mail.pause()  # the worker claims nothing: the counts stay as they were
    make_worker(lambda job: None, queue_name="mail", name="w-1")

    async def registered() -> bool:
        return len(await list_workers(mail.client, mail.keys)) == 1

    await wait_until(registered)

    # When the admin reads the queue
    response = await client.get("/ojs/v1/admin/queues/mail")

    # Then it has its counts, its pause state, its worker and the hour's throughput
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["name"], body["state"], body["paused"]) == ("mail", "paused", True)
    assert body["counts"]["completed"] == await mail.get_completed_count()
    assert body["workers"] == 1
    assert body["throughput"]["processed_per_minute"] > 0
    assert body["throughput"]["failed_per_minute"] > 0


async def test_a_queue_lazarus_does_not_know_is_not_found(client: httpx.AsyncClient) -> None:
    response = await client.get("/ojs/v1/admin/queues/nothing-here")

    assert response.status_code == 404, response.text
    assert response.json()["error"]["code"] == "not_found"


@pytest.mark.parametrize("state", ["available", "active", "scheduled", "retryable", "pending",
                                   "completed", "discarded"])  # fmt: skip
async def test_the_job_list_filters_by_state_as_lazarus_keeps_its_jobs(
    client: httpx.AsyncClient, mail: Queue, state: str
) -> None:
    # Given 'mail' with a job in each state
    expected = await every_state(client, mail)

    # When the admin lists its jobs in one state
    response = await client.get("/ojs/v1/admin/jobs", params={"queue": "mail", "state": state})

    # Then the list holds those jobs, each with the envelope INFO shows, and lazarus holds
    # each in the list of that state
    assert response.status_code == 200, response.text
    body = response.json()
    assert sorted(ids(body)) == sorted(expected[state])
    assert body["pagination"]["total"] == len(expected[state])
    engine = {"available": ("waiting", "prioritized"), "active": ("active",),
              "scheduled": ("delayed",), "retryable": ("delayed",), "pending": ("delayed",),
              "completed": ("completed",), "discarded": ("failed",)}  # fmt: skip
    for item in body["items"]:
        assert item["state"] == state
        assert await mail.get_job_state(item["id"]) in engine[state]
        if item["id"] != expected["available"][-1]:  # not the one lazarus added
            assert item == await info(client, item["id"])


async def test_the_job_list_walks_every_queue_a_page_at_a_time(
    client: httpx.AsyncClient, mail: Queue, redis_url: str, prefix: str
) -> None:
    # Given jobs in two queues
    expected = await every_state(client, mail)
    other = [await enqueue(client, "other") for _ in range(3)]

    # When every page of the list is read, three jobs a page
    pages = [(await client.get(f"/ojs/v1/admin/jobs?per_page=3&page={n}")).json()
             for n in range(1, 5)]  # fmt: skip

    # Then each job lazarus holds in a queue comes once, in the order of the queues' names;
    # the dead letter is not among them (it is in the dead letter queue's store)
    listed = [job_id for page in pages for job_id in ids(page)]
    held = [i for state, found in expected.items() if state != "dead_letter" for i in found]
    assert sorted(listed) == sorted(held + other)
    assert listed[-3:] == other
    assert [len(page["items"]) for page in pages] == [3, 3, 3, 2]
    assert pages[0]["pagination"] == {"total": 11, "page": 1, "per_page": 3, "total_pages": 4}


async def test_past_the_split_budget_a_list_by_scheduled_says_its_total_is_not_exact(
    client: httpx.AsyncClient, mail: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given more delayed jobs than a request reads to tell scheduled from retryable
    monkeypatch.setattr(admin_jobs, "SPLIT_LIMIT", 2)
    added = [(await mail.add("later", i, delay=3_600_000)).id for i in range(3)]

    # When the scheduled jobs are listed
    body = (await client.get("/ojs/v1/admin/jobs?state=scheduled")).json()

    # Then the list has those it read, soonest due first, and says its total is a floor
    assert ids(body) == [job.id for job in await mail.get_delayed(0, 1)]
    assert set(ids(body)) < set(added)
    assert body["pagination"]["total"] == 2 and body["pagination"]["exact"] is False


@pytest.mark.parametrize(
    ("query", "field"),
    [("state=done", "state"), ("queue=Mail", "queue"), ("per_page=101", "per_page"),
     ("page=0", "page"), ("type=mail.send", "type"), ("since=2026-01-01T00:00:00Z", "since"),
     ("limit=10", "limit"), ("order=asc", "order")],
)  # fmt: skip
async def test_a_job_list_with_a_bad_or_unsupported_filter_is_refused_naming_it(
    client: httpx.AsyncClient, query: str, field: str
) -> None:
    response = await client.get(f"/ojs/v1/admin/jobs?{query}")

    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_request" and error["details"] == {"field": field}


async def test_a_job_s_detail_is_its_full_envelope(client: httpx.AsyncClient, mail: Queue) -> None:
    # Given a job that failed once and waits to be retried
    job_id = await enqueue(client, retry={"max_attempts": 3, "initial_interval": "PT1H"})
    assert await fetch(client) == [job_id]
    await nack(client, job_id)

    # When the admin reads it
    response = await client.get(f"/ojs/v1/admin/jobs/{job_id}")

    # Then it is the envelope INFO shows, its error history with it
    assert response.status_code == 200, response.text
    body = response.json()
    assert body == await info(client, job_id)
    assert (body["state"], body["errors"][0]["message"]) == ("retryable", "smtp down")


async def test_a_job_lazarus_added_is_read_in_full_by_naming_its_queue(
    client: httpx.AsyncClient, mail: Queue
) -> None:
    job = await mail.add("native", {"to": "bob"})

    unindexed = await client.get(f"/ojs/v1/admin/jobs/{job.id}")
    found = await client.get(f"/ojs/v1/admin/jobs/{job.id}", params={"queue": "mail"})
    elsewhere = await client.get(f"/ojs/v1/admin/jobs/{job.id}", params={"queue": "other"})

    assert unindexed.status_code == 404
    assert found.status_code == 200, found.text
    assert (found.json()["type"], found.json()["args"]) == ("native", {"to": "bob"})
    assert found.json()["state"] == "available"
    assert elsewhere.status_code == 404


async def test_the_stats_add_up_every_queue_with_its_workers_and_throughput(
    client: httpx.AsyncClient, mail: Queue, make_worker: Callable[..., Worker]
) -> None:
    # Given 'mail' with a job in each state, a job in another queue, and a worker
    await every_state(client, mail)
    await enqueue(client, "other")
    await mail.pause()
    make_worker(lambda job: None, queue_name="mail", name="w-1")

    async def registered() -> bool:
        return len(await list_workers(mail.client, mail.keys)) == 1

    await wait_until(registered)

    # When the admin reads the server's totals
    response = await client.get("/ojs/v1/admin/stats")

    # Then they add up the queues' counts, as each queue's own statistics give them
    assert response.status_code == 200, response.text
    body = response.json()
    states = ("available", "active", "scheduled", "retryable", "pending", "completed",
              "discarded", "total")  # fmt: skip
    per_queue = [(await client.get(f"/ojs/v1/queues/{name}/stats")).json()["stats"]
                 for name in ("mail", "other", DLQ)]  # fmt: skip
    assert body["jobs"] == {state: sum(q[state] for q in per_queue) for state in states}
    assert body["jobs"]["available"] == 3
    assert (body["queues"], body["workers"]) == (3, 1)
    assert body["throughput"]["processed_per_minute"] > 0
    assert body["computed_at"].endswith("Z")


async def test_the_worker_list_has_every_live_worker_of_every_queue(
    client: httpx.AsyncClient, mail: Queue, make_worker: Callable[..., Worker]
) -> None:
    # Given lazarus workers on two queues
    await mail.add("x", {})
    await mail.pause()
    make_worker(lambda job: None, queue_name="mail", name="w-1", concurrency=3)
    make_worker(lambda job: None, queue_name="reports", name="w-2")

    async def registered() -> bool:
        body = (await client.get("/ojs/v1/admin/workers")).json()
        return body["summary"]["total"] == 2

    # When the admin lists the workers
    await wait_until(registered)
    body = (await client.get("/ojs/v1/admin/workers?per_page=1")).json()

    # Then each is listed as lazarus's registry has it, a page at a time
    (w1,) = await list_workers(mail.client, mail.keys)
    assert body["items"] == [{
        "id": "w-1", "hostname": w1.host, "pid": w1.pid, "state": "running", "queues": ["mail"],
        "concurrency": 3, "active_jobs": 0, "started_at": body["items"][0]["started_at"],
        "last_heartbeat_at": body["items"][0]["last_heartbeat_at"], "remote": False,
    }]  # fmt: skip
    assert body["pagination"] == {"total": 2, "page": 1, "per_page": 1, "total_pages": 2}
    second = (await client.get("/ojs/v1/admin/workers?per_page=1&page=2")).json()
    assert [(w["id"], w["queues"]) for w in second["items"]] == [("w-2", ["reports"])]


async def test_the_admin_pause_and_resume_are_lazarus_s_and_record_events(
    client: httpx.AsyncClient, mail: Queue, raw: Any, prefix: str
) -> None:
    # Given a waiting job
    job_id = await enqueue(client)

    # When the admin pauses the queue
    paused = await client.post("/ojs/v1/admin/queues/mail/pause")

    # Then lazarus's queue is paused, and a fetch gets nothing
    assert paused.status_code == 200, paused.text
    assert paused.json()["paused"] is True and paused.json()["paused_at"].endswith("Z")
    assert await mail.is_paused()
    assert await fetch(client) == []

    # When it is resumed
    resumed = await client.post("/ojs/v1/admin/queues/mail/resume")

    # Then the job is fetched, and both changes are events
    assert resumed.json()["state"] == "active" and "resumed_at" in resumed.json()
    assert not await mail.is_paused()
    assert await fetch(client) == [job_id]
    events = (await client.get("/ojs/v1/events?types=queue.paused,queue.resumed")).json()
    assert [e["type"] for e in events["events"]] == ["queue.paused", "queue.resumed"]
    before = await stored(raw, prefix)
    bad = await client.post("/ojs/v1/admin/queues/Mail/pause")
    assert bad.status_code == 400 and bad.json()["error"]["details"] == {"field": "name"}
    assert await stored(raw, prefix) == before


async def test_the_manifest_declares_the_admin_api_at_the_same_level(
    client: httpx.AsyncClient,
) -> None:
    manifest = (await client.get("/ojs/manifest")).json()

    assert "admin-api" in manifest["extensions"]["official"]
    assert manifest["conformance_level"] == 4
    # Level 4 asks for the strength of the uniqueness guarantee (L4-UNIQ-003)
    assert manifest["unique_job_strength"] == "strong"
    capabilities = manifest["capabilities"]
    assert capabilities["priority_queues"] and capabilities["unique_jobs"]
    assert capabilities["rate_limiting"] is False
