"""The OJS queue routes: pause and resume are lazarus's own (FETCH and in-process workers
claim nothing from a paused queue, jobs may still be enqueued), and a queue's statistics
count its jobs by OJS state, whoever added them."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from lazarus import Queue, list_queues
from lazarus.http import create_app
from lazarus.ojs.queue_routes import SPLIT_LIMIT

from .test_input import stored

DLQ = "dead"
VIEWER = "viewer-token-0123456789"


async def enqueue(client: httpx.AsyncClient, **options: Any) -> str:
    response = await client.post("/ojs/v1/jobs", json={
        "type": "mail.send", "args": ["ada"], "options": {"queue": "mail", **options}})  # fmt: skip
    assert response.status_code == 201, response.text
    return str(response.json()["job"]["id"])


async def fetch(client: httpx.AsyncClient) -> list[str]:
    response = await client.post("/ojs/v1/workers/fetch", json={"queues": ["mail"], "count": 10})
    assert response.status_code == 200, response.text
    return [job["id"] for job in response.json()["jobs"]]


async def queue_events(client: httpx.AsyncClient) -> list[dict[str, Any]]:
    response = await client.get("/ojs/v1/events", params={"types": "queue.paused,queue.resumed"})
    events: list[dict[str, Any]] = response.json()["events"]
    return events


async def test_a_paused_queue_hands_nothing_to_fetch_until_it_is_resumed(
    client: httpx.AsyncClient, mail: Queue
) -> None:
    # Given a job waiting in 'mail'
    job_id = await enqueue(client)

    # When the queue is paused over OJS
    paused = await client.post("/ojs/v1/queues/mail/pause")

    # Then lazarus's queue is paused: a fetch claims nothing, the job is held by the pause
    assert paused.status_code == 200, paused.text
    body = paused.json()
    assert body["queue"] == {"name": "mail", "paused": True}
    assert body["status"] == "paused" and body["paused_at"].endswith("Z")
    assert await mail.is_paused()
    assert await fetch(client) == []
    assert await mail.get_job_state(job_id) == "paused"

    # When it is resumed
    resumed = await client.post("/ojs/v1/queues/mail/resume")

    # Then the queue runs again and the job is fetched
    assert resumed.status_code == 200, resumed.text
    assert resumed.json()["queue"] == {"name": "mail", "paused": False}
    assert resumed.json()["status"] == "active" and "resumed_at" in resumed.json()
    assert not await mail.is_paused()
    assert await fetch(client) == [job_id]
    assert await mail.get_job_state(job_id) == "active"
    assert [(e["type"], e["data"]["queue"]) for e in await queue_events(client)] == [
        ("queue.paused", "mail"), ("queue.resumed", "mail")]  # fmt: skip


async def test_a_queue_paused_before_its_first_job_takes_jobs_and_holds_them(
    client: httpx.AsyncClient, mail: Queue
) -> None:
    # Given a queue paused before anything was written to it
    assert (await client.post("/ojs/v1/queues/mail/pause")).status_code == 200

    # When jobs are enqueued into it
    first, second = await enqueue(client), await enqueue(client)

    # Then they are taken, available, and no fetch claims them until the queue is resumed
    assert (await client.get(f"/ojs/v1/jobs/{first}")).json()["job"]["state"] == "available"
    assert await fetch(client) == []
    assert (await mail.get_job_counts())["paused"] == 2
    assert (await client.post("/ojs/v1/queues/mail/resume")).status_code == 200
    assert await fetch(client) == [first, second]


async def test_a_pause_of_a_paused_queue_changes_nothing_and_claims_no_time(
    client: httpx.AsyncClient, mail: Queue
) -> None:
    # Given a paused queue
    assert "paused_at" in (await client.post("/ojs/v1/queues/mail/pause")).json()

    # When it is paused again, and a running queue is resumed
    again = await client.post("/ojs/v1/queues/mail/pause")
    await client.post("/ojs/v1/queues/mail/resume")
    running = await client.post("/ojs/v1/queues/mail/resume")

    # Then both answer the queue's state, without a time of a change that did not happen
    # now (lazarus keeps no time of a pause), and only the real changes are events
    assert again.json() == {"queue": {"name": "mail", "paused": True}, "status": "paused"}
    assert running.json() == {"queue": {"name": "mail", "paused": False}, "status": "active"}
    assert not await mail.is_paused()
    assert [e["type"] for e in await queue_events(client)] == ["queue.paused", "queue.resumed"]


async def test_pause_and_resume_need_an_operator_token(
    redis_url: str, prefix: str, raw: Any, mail: Queue
) -> None:
    # Given a server with tokens, and a running queue
    app = create_app(connection=redis_url, prefix=prefix, tokens=f"viewer:viewer:{VIEWER}")
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        before = await stored(raw, prefix)

        # When a pause comes without a token, or with a viewer's
        anonymous = await client.post("/ojs/v1/queues/mail/pause")
        viewer = await client.post(
            "/ojs/v1/queues/mail/pause", headers={"Authorization": f"Bearer {VIEWER}"}
        )

        # Then both are refused and the queue runs on
        assert (anonymous.status_code, viewer.status_code) == (401, 403)
        assert not await mail.is_paused()
        assert await stored(raw, prefix) == before
    await app.state.bulk.close()
    await app.state.ops.close()


@pytest.mark.parametrize("name", ["Mail", "mail_box", "-mail", "q" * 201])
async def test_a_queue_name_outside_ojs_pattern_is_refused(
    client: httpx.AsyncClient, raw: Any, prefix: str, name: str
) -> None:
    before = await stored(raw, prefix)

    answers = [await client.post(f"/ojs/v1/queues/{name}/pause"),
               await client.post(f"/ojs/v1/queues/{name}/resume"),
               await client.get(f"/ojs/v1/queues/{name}/stats")]  # fmt: skip

    assert [a.status_code for a in answers] == [400] * 3
    assert [a.json()["error"]["details"] for a in answers] == [{"field": "name"}] * 3
    assert await stored(raw, prefix) == before


async def test_the_stats_of_a_queue_never_written_to_are_not_found(
    client: httpx.AsyncClient,
) -> None:
    response = await client.get("/ojs/v1/queues/nothing-here/stats")

    assert response.status_code == 404, response.text
    assert response.json()["error"]["code"] == "not_found"


async def nack(client: httpx.AsyncClient, job_id: str) -> None:
    response = await client.post("/ojs/v1/workers/nack", json={
        "job_id": job_id, "error": {"code": "handler_error", "message": "smtp down"}})  # fmt: skip
    assert response.status_code == 200, response.text


async def test_the_stats_count_every_job_of_the_queue_by_ojs_state(
    client: httpx.AsyncClient, mail: Queue
) -> None:
    # Given, in 'mail': one job that completed, one that will be retried in an hour, one
    # discarded, one dead-lettered, one running, one due next century, one pending
    # activation, and two waiting (one of them added by lazarus itself)
    done = await enqueue(client)
    retried = await enqueue(client, retry={"max_attempts": 3, "initial_interval": "PT1H"})
    dropped = await enqueue(client, retry={"max_attempts": 1})
    buried = await enqueue(client, retry={"max_attempts": 1, "on_exhaustion": "dead_letter"})
    running = await enqueue(client)
    assert await fetch(client) == [done, retried, dropped, buried, running]
    ack = await client.post("/ojs/v1/workers/ack", json={"job_id": done})
    assert ack.status_code == 200, ack.text
    for job_id in (retried, dropped, buried):
        await nack(client, job_id)
    await enqueue(client, delay_until="2099-01-01T00:00:00Z")
    await enqueue(client, pending=True)
    await enqueue(client)
    await mail.add("native", {"to": "bob"})

    # When its statistics are read
    response = await client.get("/ojs/v1/queues/mail/stats")

    # Then they count the jobs by OJS state, in the shape of OJS's OpenAPI document (under
    # 'queue') and of its HTTP binding (under 'stats'), with the hour's throughput
    assert response.status_code == 200, response.text
    body = response.json()
    counts = {"available": 2, "active": 1, "scheduled": 1, "retryable": 1, "pending": 1,
              "completed": 1, "discarded": 2, "total": 9}  # fmt: skip
    assert body["queue"] == {"name": "mail", "paused": False, **counts}
    assert body["status"] == "active"
    stats = body["stats"]
    assert {k: stats[k] for k in counts} == counts
    assert stats["completed_last_hour"] == 1
    assert stats["failed_last_hour"] == 2
    assert 0 < stats["throughput_per_second"] <= 1 / 3540  # one job in 59 to 60 minutes
    assert body["computed_at"].endswith("Z")


async def test_the_stats_of_a_dead_letter_queue_count_its_dead_letters_where_they_came_from(
    client: httpx.AsyncClient,
) -> None:
    # Given a job dead-lettered from 'mail' into the server's dead letter queue
    job_id = await enqueue(client, retry={"max_attempts": 1, "on_exhaustion": "dead_letter"})
    assert await fetch(client) == [job_id]
    await nack(client, job_id)

    # When the dead letter queue's statistics are read
    dead = (await client.get(f"/ojs/v1/queues/{DLQ}/stats")).json()

    # Then its dead letter is not a job waiting there: it is a discarded job of 'mail'
    assert (dead["queue"]["available"], dead["queue"]["total"]) == (0, 0)
    mail = (await client.get("/ojs/v1/queues/mail/stats")).json()
    assert (mail["queue"]["discarded"], mail["queue"]["total"]) == (1, 1)


async def test_past_the_split_limit_the_stats_give_delayed_jobs_as_a_sum_only(
    client: httpx.AsyncClient, mail: Queue
) -> None:
    # Given more delayed jobs than a stats call reads to tell scheduled from retryable
    await mail.add_bulk(
        [{"name": "later", "data": i, "delay": 3_600_000} for i in range(SPLIT_LIMIT + 1)]
    )

    # When the queue's statistics are read
    queue = (await client.get("/ojs/v1/queues/mail/stats")).json()["queue"]

    # Then the split is not made, and their sum is given
    assert (queue["scheduled"], queue["retryable"]) == (None, None)
    assert (queue["delayed"], queue["total"]) == (SPLIT_LIMIT + 1, SPLIT_LIMIT + 1)


async def test_the_stats_of_a_paused_queue_say_so_and_count_its_held_jobs_available(
    client: httpx.AsyncClient,
) -> None:
    await enqueue(client)
    await client.post("/ojs/v1/queues/mail/pause")

    body = (await client.get("/ojs/v1/queues/mail/stats")).json()

    assert body["queue"]["paused"] is True and body["status"] == "paused"
    assert body["queue"]["available"] == 1


async def test_the_manifest_announces_batch_enqueue_and_pause_resume(
    client: httpx.AsyncClient,
) -> None:
    capabilities = (await client.get("/ojs/manifest")).json()["capabilities"]

    assert capabilities["batch_enqueue"] is True
    assert capabilities["pause_resume"] is True


async def test_the_list_of_queues_has_every_queue_lazarus_knows_with_its_pause_state(
    client: httpx.AsyncClient, redis_url: str, prefix: str, mail: Queue
) -> None:
    # Given 'mail' with an OJS job dead-lettered into the server's dead letter queue, a queue
    # only lazarus itself wrote to, and a paused one
    job_id = await enqueue(client, retry={"max_attempts": 1, "on_exhaustion": "dead_letter"})
    assert await fetch(client) == [job_id]
    await nack(client, job_id)
    async with Queue("native", connection=redis_url, prefix=prefix) as native:
        await native.add("native", {"to": "bob"})
        await native.pause()

    # When the queues are listed
    response = await client.get("/ojs/v1/queues")

    # Then every queue lazarus lists is there, and the dead letter queue, by name, with the
    # pause state lazarus keeps
    assert response.status_code == 200, response.text
    body = response.json()
    names = sorted({*await list_queues(redis_url, prefix=prefix), DLQ})
    assert names == [DLQ, "mail", "native"]
    assert body["queues"] == [{"name": DLQ, "status": "active"},
                              {"name": "mail", "status": "active"},
                              {"name": "native", "status": "paused"}]  # fmt: skip
    assert body["pagination"] == {"total": 3, "limit": 50, "offset": 0, "has_more": False}


async def test_the_list_of_queues_comes_a_page_at_a_time(
    client: httpx.AsyncClient, redis_url: str, prefix: str
) -> None:
    for name in ("q-a", "q-b", "q-c"):
        async with Queue(name, connection=redis_url, prefix=prefix) as queue:
            await queue.add("x", {})

    middle = (await client.get("/ojs/v1/queues", params={"limit": 1, "offset": 1})).json()
    last = (await client.get("/ojs/v1/queues", params={"limit": 2, "offset": 2})).json()

    assert [q["name"] for q in middle["queues"]] == ["q-b"]
    assert middle["pagination"] == {"total": 3, "limit": 1, "offset": 1, "has_more": True}
    assert [q["name"] for q in last["queues"]] == ["q-c"]
    assert last["pagination"]["has_more"] is False


@pytest.mark.parametrize(("params", "field"), [({"limit": 0}, "limit"),
                                               ({"limit": 1001}, "limit"),
                                               ({"offset": -1}, "offset"),
                                               ({"limit": "many"}, "limit")])  # fmt: skip
async def test_a_bad_page_of_the_list_of_queues_is_refused_naming_its_field(
    client: httpx.AsyncClient, params: dict[str, Any], field: str
) -> None:
    response = await client.get("/ojs/v1/queues", params=params)

    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_request" and error["details"] == {"field": field}
    assert field in error["message"]


async def test_a_fetch_honours_the_queues_global_concurrency(
    client: httpx.AsyncClient, mail: Queue
) -> None:
    # Given a queue that runs at most one job at a time, holding two
    await mail.set_global_concurrency(1)
    first, second = await enqueue(client), await enqueue(client)

    # When a worker fetches as many as it may
    fetched = await fetch(client)

    # Then it gets one; the other once the first has ended
    assert fetched == [first]
    acked = await client.post("/ojs/v1/workers/ack", json={"job_id": first, "result": None})
    assert acked.status_code == 200, acked.text
    assert await fetch(client) == [second]
