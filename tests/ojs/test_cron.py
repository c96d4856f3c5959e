"""OJS cron (Level 2): cron jobs registered over HTTP are lazarus schedules; the jobs they
produce are OJS jobs (read, fetched, acked, retried, dead-lettered as pushed ones are), and two
of one cron job never run side by side unless the client allows it.

The cron jobs are due once a year: a test makes an occurrence due by promoting it, instead of
waiting for its time."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import pytest
from fastapi import FastAPI
from redis.asyncio import Redis

from lazarus import Job, Queue, Worker
from lazarus.ojs import Backend
from lazarus.ojs.sweeper import Sweeper

from ..conftest import wait_until

DLQ = "dead"
YEARLY = "0 0 1 1 *"
UUIDV7 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


def backend_of(app: FastAPI) -> Backend:
    (mount,) = [r for r in app.routes if getattr(r, "path", "") == "/ojs"]
    backend: Backend = mount.app.state.ojs  # type: ignore[attr-defined]
    return backend


@pytest.fixture
async def reports(redis_url: str, prefix: str) -> AsyncIterator[Queue]:
    async with Queue("reports", connection=redis_url, prefix=prefix) as queue:
        yield queue


def cron_job(name: str = "daily-report", **fields: Any) -> dict[str, Any]:
    template = {"type": "report.generate", "args": ["daily"], "options": {"queue": "reports"}}
    return {"name": name, "expression": YEARLY, "job_template": template, **fields}


async def register(client: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    response = await client.post("/ojs/v1/cron", json=body)
    assert response.status_code == 201, response.text
    shown: dict[str, Any] = response.json()["cron"]
    return shown


async def due_now(queue: Queue) -> str:
    """Make the schedule's pending job due now; its id."""
    [pending] = [j.id for j in await queue.get_delayed() if j.repeat_key is not None]
    await queue.promote_job(pending)
    return pending


async def fetch(client: httpx.AsyncClient, worker: str = "w1") -> list[dict[str, Any]]:
    response = await client.post(
        "/ojs/v1/workers/fetch", json={"queues": ["reports"], "worker_id": worker}
    )
    assert response.status_code == 200, response.text
    jobs: list[dict[str, Any]] = response.json()["jobs"]
    return jobs


async def events(client: httpx.AsyncClient, *types: str) -> list[dict[str, Any]]:
    response = await client.get("/ojs/v1/events", params={"types": ",".join(types)})
    found: list[dict[str, Any]] = response.json()["events"]
    return found


async def stored(raw: Redis, prefix: str) -> dict[str, bytes]:
    """Every key of the test's prefix, but the API's audit trail."""
    return {k: await raw.dump(k) async for k in raw.scan_iter(match=f"{prefix}:*")
            if k != f"{prefix}:audit"}  # fmt: skip


@pytest.mark.parametrize("form", ["openapi", "binding"])
async def test_a_registered_cron_job_is_a_schedule_of_its_queue_and_is_listed(
    client: httpx.AsyncClient, reports: Queue, form: str
) -> None:
    # Given a cron job in the OpenAPI document's form, or in the HTTP binding text's
    if form == "openapi":
        body = cron_job(expression="0 9 * * *", timezone="America/New_York")
    else:
        body = {
            "name": "daily-report",
            "cron": "0 9 * * *",
            "timezone": "America/New_York",
            "type": "report.generate",
            "args": ["daily"],
            "options": {"queue": "reports"},
        }

    # When it is registered
    response = await client.post("/ojs/v1/cron", json=body)

    # Then its queue has a schedule at 09:00 New York time that skips overlaps, and the list
    # shows the cron job with that next run, in both documents' words
    assert response.status_code == 201, response.text
    assert response.json()["cron"] == response.json()["cron_job"]
    [schedule] = await reports.get_repeatable_jobs()
    assert (schedule.pattern, schedule.tz, schedule.overlap) == (
        "0 9 * * *",
        "America/New_York",
        "skip",
    )
    listed = (await client.get("/ojs/v1/cron")).json()
    assert listed["pagination"] == {"total": 1, "limit": 50, "offset": 0, "has_more": False}
    [shown] = listed["crons"]
    assert listed["cron_jobs"] == listed["crons"]
    assert (shown["name"], shown["expression"], shown["cron"]) == (
        "daily-report",
        "0 9 * * *",
        "0 9 * * *",
    )
    assert (shown["enabled"], shown["status"], shown["overlap_policy"]) == (True, "active", "skip")
    assert shown["job_template"]["type"] == shown["type"] == "report.generate"
    assert shown["args"] == ["daily"] and shown["options"] == {"queue": "reports"}
    next_run = datetime.fromisoformat(shown["next_run_at"].replace("Z", "+00:00"))
    assert int(next_run.timestamp() * 1000) == schedule.next
    local = next_run.astimezone(ZoneInfo("America/New_York"))
    assert (local.hour, local.minute) == (9, 0)


async def test_shorthands_and_a_seconds_field_are_cron_expressions(
    client: httpx.AsyncClient, reports: Queue
) -> None:
    daily = await register(client, cron_job("d", expression="@daily", timezone="Asia/Tokyo"))
    await register(client, cron_job("s", expression="*/10 * * * * *"))

    patterns = {s.key: s.pattern for s in await reports.get_repeatable_jobs()}
    assert patterns == {"ojs-cron.d": "0 0 * * *", "ojs-cron.s": "*/10 * * * * *"}
    midnight = datetime.fromisoformat(daily["next_run_at"].replace("Z", "+00:00"))
    local = midnight.astimezone(ZoneInfo("Asia/Tokyo"))
    assert (local.hour, local.minute, daily["expression"]) == (0, 0, "@daily")


async def test_a_name_that_is_taken_is_refused_and_the_cron_job_kept(
    client: httpx.AsyncClient, reports: Queue
) -> None:
    await register(client, cron_job())

    again = await client.post("/ojs/v1/cron", json=cron_job(expression="@hourly"))

    assert again.status_code == 409
    assert again.json()["error"]["code"] == "duplicate"
    [schedule] = await reports.get_repeatable_jobs()
    assert schedule.pattern == YEARLY


TEMPLATE = {"type": "report.generate", "args": [], "options": {"queue": "reports"}}


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"expression": YEARLY, "job_template": TEMPLATE}, 400, "name"),
        ({**cron_job(), "name": "a/b"}, 400, "name"),
        ({"name": "n", "job_template": TEMPLATE}, 400, "expression"),
        (cron_job(expression="not a valid cron"), 400, "expression"),
        (cron_job(expression="0 0 0 0 0 0 0"), 400, "expression"),
        (cron_job(expression="99 25 32 13 8"), 400, "expression"),
        (cron_job(expression="0 9 * * *", cron="0 8 * * *"), 400, "expression and cron"),
        (cron_job(timezone="Mars/Olympus_Mons"), 400, "timezone"),
        (cron_job(timezone="+05:30"), 400, "timezone"),
        (cron_job(timezone="localtime"), 400, "timezone"),
        (cron_job(expression="* " * 500), 400, "expression"),
        (cron_job(overlap_policy="cancel"), 400, "overlap_policy"),
        (cron_job(enabled=False), 400, "enabled"),
        (cron_job(job_template="report"), 400, "job_template"),
        (cron_job(job_template={"args": []}), 400, "job_template.type"),
        (cron_job(job_template={"type": "Report", "args": []}), 400, "job_template.type"),
        (cron_job(job_template={"type": "a.b", "args": {}}), 400, "job_template.args"),
        (cron_job(job_template={**TEMPLATE, "id": "0194d6e2-7c3a-7b1e-8f00-000000000001"}),
         400, "job_template.id"),
        (cron_job(job_template={**TEMPLATE, "options": {"delay_until": "2030-01-01T00:00:00Z"}}),
         400, "job_template.options.delay_until"),
        (cron_job(job_template={**TEMPLATE, "expires_at": "2030-01-01T00:00:00Z"}),
         400, "job_template.expires_at"),
        (cron_job(job_template={**TEMPLATE, "options": {"queue": "Bad Queue"}}),
         400, "job_template.options.queue"),
        (cron_job(job_template={**TEMPLATE, "options": {"queue": "reports", "pending": True}}),
         400, "job_template.options.pending"),
        (cron_job(job_template={**TEMPLATE, "options": {"retry": {"max_attempts": -1}}}),
         422, "job_template.retry.max_attempts"),
        ({**cron_job(), "type": "a.b"}, 400, "job_template, or type"),
        ({"name": "n", "cron": YEARLY, "args": []}, 400, "type"),
    ],
)  # fmt: skip
async def test_a_bad_registration_is_refused_naming_the_field_and_writes_nothing(
    client: httpx.AsyncClient, raw: Redis, prefix: str, body: dict[str, Any], status: int,
    field: str,
) -> None:  # fmt: skip
    before = await stored(raw, prefix)

    response = await client.post("/ojs/v1/cron", json=body)

    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert field in error["message"]
    named = error["details"]["field"]  # the path in the request
    assert named.rpartition(".")[2] in error["message"]
    assert named.startswith("job_template.") == field.startswith("job_template.")
    assert await stored(raw, prefix) == before


@pytest.mark.parametrize("form", ["openapi", "binding"])
async def test_a_template_whose_args_break_its_schema_is_refused_as_a_push_is(
    client: httpx.AsyncClient, raw: Redis, prefix: str, form: str
) -> None:
    # Given a schema that wants one string argument
    schema = {"uri": "urn:ojs:schema:report.generate:v1", "type": "report.generate",
              "version": 1, "schema": {"type": "array", "prefixItems": [{"type": "string"}],
                                       "minItems": 1, "maxItems": 1}}  # fmt: skip
    assert (await client.post("/ojs/v1/schemas", json=schema)).status_code == 201
    before = await stored(raw, prefix)
    where = "job_template." if form == "openapi" else ""

    def body(args: list[Any], uri: str = schema["uri"]) -> dict[str, Any]:
        template = {"type": "report.generate", "args": args, "schema": uri,
                    "options": {"queue": "reports"}}  # fmt: skip
        if form == "openapi":
            return cron_job(job_template=template)
        return {"name": "daily-report", "cron": YEARLY, **template}

    # When a cron job's template breaks it, or names a schema not registered
    cases = [(body([7]), "schema_validation", f"{where}args[0]"),
             (body(["a", "b"]), "schema_validation", f"{where}args"),
             (body(["a"], "urn:nope"), "invalid_request", f"{where}schema")]  # fmt: skip
    for sent, code, field in cases:
        response = await client.post("/ojs/v1/cron", json=sent)

        # Then it is refused as a PUSH is, naming the field, and nothing is written
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert (error["code"], error["details"]["field"]) == (code, field), response.text
        assert error["message"].startswith(field), response.text
        assert await stored(raw, prefix) == before

    # And a template that conforms is registered
    shown = await register(client, body(["daily"]))
    assert shown["job_template"]["schema"] == schema["uri"]


async def test_an_unregistered_cron_job_is_gone_with_its_pending_job(
    client: httpx.AsyncClient, reports: Queue
) -> None:
    # Given two cron jobs of one queue
    await register(client, cron_job("a"))
    await register(client, cron_job("b"))

    # When one is unregistered
    response = await client.delete("/ojs/v1/cron/a")

    # Then it is no longer listed, its schedule and pending job are gone, the other stays
    assert response.status_code == 200
    assert response.json()["deleted"] is True and response.json()["name"] == "a"
    assert response.json()["cron"]["name"] == "a"
    assert [c["name"] for c in (await client.get("/ojs/v1/cron")).json()["crons"]] == ["b"]
    assert [s.key for s in await reports.get_repeatable_jobs()] == ["ojs-cron.b"]
    assert len(await reports.get_delayed()) == 1
    again = await client.delete("/ojs/v1/cron/a")
    assert again.status_code == 404 and again.json()["error"]["code"] == "not_found"


async def test_the_jobs_of_a_cron_job_are_ojs_jobs_retried_and_dead_lettered(
    client: httpx.AsyncClient, reports: Queue
) -> None:
    # Given a cron job whose jobs may run twice, then go to the dead letter queue
    retry = {"max_attempts": 2, "initial_interval": "PT0.05S", "jitter": False,
             "on_exhaustion": "dead_letter"}  # fmt: skip
    template = {**cron_job()["job_template"], "meta": {"owner": "analytics"}}
    template["options"] = {**template["options"], "retry": retry}
    await register(client, cron_job(job_template=template))

    # When its job falls due, and a remote worker fetches it
    pending = await due_now(reports)
    [job] = await fetch(client)

    # Then it is an OJS job: a UUIDv7 id, the template's fields, read back by its id
    assert job["id"] == pending and UUIDV7.fullmatch(job["id"])
    read = (await client.get(f"/ojs/v1/jobs/{pending}")).json()["job"]
    assert (read["state"], read["type"], read["args"]) == ("active", "report.generate", ["daily"])
    assert (read["meta"], read["max_attempts"], read["queue"]) == (
        {"owner": "analytics"},
        2,
        "reports",
    )
    assert read["scheduled_at"] and read["attempt"] == 1

    # And a failure is retried under its policy, and the last one dead-letters it
    error = {"code": "handler_error", "message": "db down"}
    nack = await client.post("/ojs/v1/workers/nack", json={"job_id": pending, "error": error})
    assert nack.json()["state"] == "retryable"

    async def fetched_again() -> bool:
        return [j["id"] for j in await fetch(client)] == [pending]

    await wait_until(fetched_again, message="the retry to be fetched")
    nack = await client.post("/ojs/v1/workers/nack", json={"job_id": pending, "error": error})
    assert nack.json()["state"] == "discarded"
    letter = await client.get(f"/ojs/v1/dead-letter/{pending}")
    assert letter.status_code == 200
    assert [e["message"] for e in letter.json()["job"]["errors"]] == ["db down", "db down"]
    # and it was told as enqueued by its cron job
    [triggered] = await events(client, "cron.triggered")
    assert triggered["data"]["job_id"] == pending
    assert triggered["data"]["cron_name"] == "daily-report"


async def test_a_job_due_while_the_last_one_runs_is_skipped_not_handed_out(
    client: httpx.AsyncClient, reports: Queue
) -> None:
    # Given a cron job (overlaps are skipped by default) whose job a worker holds
    await register(client, cron_job())
    first = await due_now(reports)
    assert [j["id"] for j in await fetch(client, "w1")] == [first]

    # When its next job falls due while that one runs
    second = await due_now(reports)

    # Then a fetch hands out nothing: the job was skipped, never an OJS job, and told of
    assert await fetch(client, "w2") == []
    assert await reports.get_job(second) is None
    assert (await client.get(f"/ojs/v1/jobs/{second}")).status_code == 404
    [skipped] = await events(client, "cron.skipped")
    assert skipped["data"]["existing_job_id"] == first
    assert skipped["data"]["reason"] == "overlap_prevention"

    # And once the first is acked, the next one due runs
    ack = await client.post("/ojs/v1/workers/ack", json={"job_id": first})
    assert ack.status_code == 200
    third = await due_now(reports)
    assert [j["id"] for j in await fetch(client, "w2")] == [third]


async def test_a_cron_job_that_allows_overlaps_hands_out_a_job_while_the_last_one_runs(
    client: httpx.AsyncClient, reports: Queue
) -> None:
    await register(client, cron_job(overlap_policy="allow"))
    first = await due_now(reports)
    assert [j["id"] for j in await fetch(client, "w1")] == [first]

    second = await due_now(reports)

    assert [j["id"] for j in await fetch(client, "w2")] == [second]
    assert {(await client.get(f"/ojs/v1/jobs/{i}")).json()["job"]["state"]
            for i in (first, second)} == {"active"}  # fmt: skip


MakeWorker = Callable[..., Worker]


async def test_jobs_an_in_process_worker_runs_and_skips_are_seen_by_the_server(
    client: httpx.AsyncClient, app: FastAPI, reports: Queue, make_worker: MakeWorker
) -> None:
    # Given a cron job whose first job an in-process worker runs until it is let go
    await register(client, cron_job())
    let_go = asyncio.Event()
    started: list[str] = []

    async def process(job: Job) -> str:
        started.append(job.id)
        await let_go.wait()
        return "done"

    make_worker(process, "reports", concurrency=2)
    first = await due_now(reports)
    await wait_until(lambda: _true(started), message="the first job to start")

    # When the next job falls due meanwhile, and the server's upkeep runs
    second = await due_now(reports)
    await wait_until(lambda: _skipped(reports, second), message="the second job to be skipped")
    sweeper = Sweeper(backend_of(app))
    await sweeper.tick()

    # Then the running job is an OJS job, and the skip was told
    read = (await client.get(f"/ojs/v1/jobs/{first}")).json()["job"]
    assert (read["state"], read["type"]) == ("active", "report.generate")
    [skipped] = await events(client, "cron.skipped")
    assert (skipped["data"]["job_id"], skipped["data"]["existing_job_id"]) == (second, first)
    let_go.set()

    async def completed() -> bool:
        job = (await client.get(f"/ojs/v1/jobs/{first}")).json()["job"]
        return bool(job["state"] == "completed" and job.get("result") == "done")

    await wait_until(completed, message="the job to complete")
    await sweeper.tick()  # told once, whoever looks again
    assert len(await events(client, "cron.skipped")) == 1
    assert started == [first]


async def _true(items: list[str]) -> bool:
    return bool(items)


async def _skipped(queue: Queue, job_id: str) -> bool:
    [schedule] = await queue.get_repeatable_jobs()
    return schedule.last_skipped == job_id


async def test_a_fetch_advances_a_plain_lazarus_schedule(
    client: httpx.AsyncClient, reports: Queue
) -> None:
    # Given a schedule lazarus itself added, whose pending job falls due
    await reports.add("tick", {"n": 1}, repeat={"pattern": YEARLY})
    pending = await due_now(reports)

    # When a remote worker fetches it
    assert [j["id"] for j in await fetch(client)] == [pending]

    # Then the schedule goes on: its next job is pending
    [schedule] = await reports.get_repeatable_jobs()
    assert schedule.last_run == pending
    [following] = await reports.get_delayed()
    assert following.id == f"repeat:{schedule.key}:{schedule.next}"


async def test_a_registration_holding_nan_is_refused_naming_where(
    client: httpx.AsyncClient, raw: Redis, prefix: str
) -> None:
    body = '{"name": "n", "expression": "@daily", "job_template": {"type": "a.b", "args": [NaN]}}'

    response = await client.post("/ojs/v1/cron", content=body,
                                 headers={"content-type": "application/json"})  # fmt: skip

    assert response.status_code == 400
    assert "job_template.args[0]" in response.json()["error"]["message"]
    assert await stored(raw, prefix) == {}


@pytest.mark.parametrize("name", ["nope", "no%20such", "%C3%A9t%C3%A9", "a" * 300])
async def test_unregistering_a_name_never_registered_is_not_found(
    client: httpx.AsyncClient, name: str
) -> None:
    response = await client.delete(f"/ojs/v1/cron/{name}")

    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
