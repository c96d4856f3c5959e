"""What the OJS routes refuse: input that could be stored but not shown again, or that holds
a lease or a retry beyond any sane bound, is a 400 naming the field, and nothing is written."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from lazarus.http import create_app

JSON = {"content-type": "application/json"}


@pytest.fixture
async def app(redis_url: str, prefix: str) -> FastAPI:
    # Bodies may be larger than a job's data may be (1 MiB), as a server can be set up
    return create_app(connection=redis_url, prefix=prefix, auth=False, max_body_bytes=4 << 20)


async def stored(raw: Any, prefix: str) -> dict[str, bytes]:
    """Every key of the test's prefix with its serialized value, but the API's audit trail
    (which records refused requests too): what any write of a job changes."""
    return {
        key: await raw.dump(key) async for key in raw.scan_iter(match=f"{prefix}:*")
        if key != f"{prefix}:audit"
    }  # fmt: skip


def refused(response: httpx.Response, field: str) -> None:
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert field in error["message"]


@pytest.mark.parametrize(
    ("path", "body"),
    [("/ojs/v1/jobs", '{"type": "a.b", "args": []}'),
     ("/ojs/v1/workers/fetch", '{"queues": ["mail"]}'),
     ("/ojs/v1/workers/ack", '{"job_id": "j1"}'),
     ("/ojs/v1/workers/nack", '{"job_id": "j1", "error": {"message": "m"}}'),
     ("/ojs/v1/workers/heartbeat", '{"active_jobs": []}')],
)  # fmt: skip
async def test_every_route_with_a_body_refuses_nan_and_bodies_nested_too_deeply(
    client: httpx.AsyncClient, raw: Any, prefix: str, path: str, body: str
) -> None:
    # Given a body each route takes, with NaN beside its fields, or nested 100,000 deep
    with_nan = body[:-1] + ', "extra": NaN}'
    too_deep = body[:-1] + ', "extra": ' + "[" * 100_000 + "]" * 100_000 + "}"
    before = await stored(raw, prefix)

    # When they are sent
    nan = await client.post(path, content=with_nan, headers=JSON)
    deep = await client.post(path, content=too_deep, headers=JSON)

    # Then both are refused before anything is read or written
    refused(nan, "extra")
    refused(deep, "nested too deeply")
    assert await stored(raw, prefix) == before


@pytest.mark.parametrize(
    ("body", "field"),
    [('{"type": "a.b", "args": [], "meta": {"x": NaN}}', "meta.x"),
     ('{"type": "a.b", "args": [], "trace": Infinity}', "trace"),
     ('{"type": "a.b", "args": [1, -Infinity]}', "args[1]"),
     ('{"type": "a.b", "args": [], "meta": {"big": 1e400}}', "meta.big"),
     ('{"type": "a.b", "args": [], "options": {"retry": {"backoff_coefficient": NaN}}}',
      "options.retry.backoff_coefficient"),
     ('{"type": "a.b", "args": ' + "[" * 200 + "]" * 200 + "}", "args[0][0]"),
     ('{"type": "a.b", "args": [], "meta": {"who": "\\ud800"}}', "meta['who']"),
     ('{"type": "a.b", "args": [], "\\udfff": 1}', "a field name"),
     ('{"type": "a.b", "args": ["' + "x" * (1 << 20) + '"]}', "args is 1048580 bytes")],
    ids=["NaN", "Infinity", "-Infinity", "1e400", "NaN coefficient", "too deep",
         "lone surrogate", "in a field name", "args too large"],
)  # fmt: skip
async def test_a_job_the_engine_could_not_store_or_show_again_is_refused(
    client: httpx.AsyncClient, raw: Any, prefix: str, body: str, field: str
) -> None:
    # Given a store with nothing of OJS yet
    before = await stored(raw, prefix)

    # When a job is enqueued whose body holds NaN, an infinity or a number too large for a
    # float, args nested more than 128 deep, a lone surrogate (in a value or a field's name:
    # UTF-8 cannot hold it), or args over the engine's 1 MiB
    response = await client.post("/ojs/v1/jobs", content=body, headers=JSON)

    # Then it is refused, naming where, and nothing was written
    refused(response, field)
    assert await stored(raw, prefix) == before


async def fetched_job(client: httpx.AsyncClient) -> str:
    """The id of a job enqueued and then fetched: active, under a remote lease."""
    job = await client.post("/ojs/v1/jobs", json={
        "type": "a.b", "args": [], "options": {"queue": "mail"}})  # fmt: skip
    fetch = await client.post("/ojs/v1/workers/fetch", json={"queues": ["mail"]})
    assert [j["id"] for j in fetch.json()["jobs"]] == [job.json()["job"]["id"]]
    return str(job.json()["job"]["id"])


@pytest.mark.parametrize(
    ("path", "report", "field"),
    [("/ojs/v1/workers/ack", '"result": ' + "[" * 200 + "]" * 200, "result[0]"),
     ("/ojs/v1/workers/ack", '"result": {"to": "\\ud800"}', "result['to']"),
     ("/ojs/v1/workers/nack", '"error": {"message": "\\ud800"}', "error['message']"),
     ("/ojs/v1/workers/nack", '"error": {"details": ' + "[" * 200 + "]" * 200 + "}",
      "error['details']")],
    ids=["ack too deep", "ack lone surrogate", "nack lone surrogate", "nack too deep"],
)  # fmt: skip
async def test_a_result_or_error_that_could_not_be_stored_leaves_the_job_held(
    client: httpx.AsyncClient, raw: Any, prefix: str, path: str, report: str, field: str
) -> None:
    # Given a job a remote worker holds
    job_id = await fetched_job(client)
    before = await stored(raw, prefix)

    # When the worker reports a result or an error that could not be stored or shown again
    response = await client.post(path, content=f'{{"job_id": "{job_id}", {report}}}',
                                 headers=JSON)  # fmt: skip

    # Then it is refused, naming where; the job is still held, unchanged, and readable
    refused(response, field)
    assert await stored(raw, prefix) == before
    job = await client.get(f"/ojs/v1/jobs/{job_id}")
    assert job.status_code == 200
    assert job.json()["job"]["state"] == "active"


@pytest.mark.parametrize(
    ("options", "status", "field", "cap"),
    [({"visibility_timeout_ms": 10**30}, 400, "options.visibility_timeout_ms", "86400000"),
     ({"visibility_timeout_ms": 86_400_001}, 400, "options.visibility_timeout_ms", "86400000"),
     ({"timeout_ms": 7 * 86_400_000 + 1}, 400, "options.timeout_ms", "604800000"),
     ({"retry": {"max_attempts": 10**30}}, 422, "retry.max_attempts", "1000"),
     ({"retry": {"max_interval": "P99999999999999999999D"}}, 422, "retry.max_interval",
      "604800000")],
)  # fmt: skip
async def test_a_lease_timeout_or_retry_past_its_cap_is_refused_and_nothing_is_written(
    client: httpx.AsyncClient, raw: Any, prefix: str, options: dict[str, Any], status: int,
    field: str, cap: str,
) -> None:  # fmt: skip
    # Given a store with nothing of OJS yet
    before = await stored(raw, prefix)

    # When a job asks for a lease longer than a day (a crashed worker's job would be lost
    # that long), an attempt longer than a week, or a retry policy past its caps
    response = await client.post("/ojs/v1/jobs", json={
        "type": "a.b", "args": [], "options": {"queue": "mail", **options}})  # fmt: skip

    # Then it is refused, naming the field and its cap, and nothing was written
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert field in error["message"] and cap in error["message"]
    assert await stored(raw, prefix) == before


@pytest.mark.parametrize(
    ("job", "field"),
    [({"options": {"delay_until": "2020-01-01"}}, "options.delay_until"),
     ({"options": {"delay_until": "2030-01-01T09:30:00"}}, "options.delay_until"),
     ({"options": {"scheduled_at": "2030-01-01 09:30"}}, "options.scheduled_at"),
     ({"scheduled_at": "2030-01-01"}, "scheduled_at"),
     ({"options": {"delay_until": "9000-01-01T00:00:00Z"}}, "options.delay_until")],
    ids=["a date", "no offset", "no seconds", "scheduled_at", "beyond the engine's reach"],
)  # fmt: skip
async def test_a_due_time_that_is_not_rfc_3339_is_refused_and_nothing_is_written(
    client: httpx.AsyncClient, raw: Any, prefix: str, job: dict[str, Any], field: str
) -> None:
    # Given a store with nothing of OJS yet
    before = await stored(raw, prefix)

    # When a job is due at a date alone, or a time without its offset
    response = await client.post("/ojs/v1/jobs", json={"type": "a.b", "args": [], **job})

    # Then it is refused, naming the field it came in, and nothing was written
    refused(response, field)
    assert await stored(raw, prefix) == before


@pytest.mark.parametrize(
    "worker_id", [{"a": 1}, ["w1"], "w" * 256, "\ud800"],
    ids=["an object", "an array", "too long", "lone surrogate"],
)  # fmt: skip
async def test_a_fetch_with_a_worker_id_that_is_not_a_name_claims_nothing(
    client: httpx.AsyncClient, raw: Any, prefix: str, worker_id: object
) -> None:
    # Given a job waiting
    enqueued = await client.post("/ojs/v1/jobs", json={
        "type": "a.b", "args": [], "options": {"queue": "mail"}})  # fmt: skip
    before = await stored(raw, prefix)

    # When a worker fetches it under a worker_id that is no string of at most 255 characters
    body = json.dumps({"queues": ["mail"], "worker_id": worker_id})  # escapes the surrogate
    response = await client.post("/ojs/v1/workers/fetch", content=body, headers=JSON)

    # Then the fetch is refused, and the job still waits, unclaimed
    refused(response, "worker_id")
    assert await stored(raw, prefix) == before
    job = await client.get(f"/ojs/v1/jobs/{enqueued.json()['job']['id']}")
    assert job.json()["job"]["state"] == "available"


@pytest.mark.parametrize("path", ["/ojs/v1/workers/ack", "/ojs/v1/workers/heartbeat"])
async def test_an_ack_or_heartbeat_with_a_worker_id_that_is_not_a_name_is_refused(
    client: httpx.AsyncClient, raw: Any, prefix: str, path: str
) -> None:
    # Given a job a remote worker holds
    job_id = await fetched_job(client)
    before = await stored(raw, prefix)

    # When it reports on it under a worker_id that is not a string
    response = await client.post(path, json={
        "job_id": job_id, "active_jobs": [job_id], "worker_id": 7})  # fmt: skip

    # Then it is refused, and the job is still held as it was
    refused(response, "worker_id")
    assert await stored(raw, prefix) == before


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [("/ojs/v1/workers/ack", '{"job_id": "j\\ud800"}', "job_id"),
     ("/ojs/v1/workers/nack", '{"job_id": "j\\ud800", "error": {}}', "job_id"),
     ("/ojs/v1/workers/heartbeat", '{"active_jobs": ["j\\ud800"]}', "active_jobs[0]")],
)  # fmt: skip
async def test_a_job_id_no_key_can_be_made_of_is_refused(
    client: httpx.AsyncClient, raw: Any, prefix: str, path: str, body: str, field: str
) -> None:
    # Given a store with nothing of OJS yet
    before = await stored(raw, prefix)

    # When a worker reports on a job id with a lone surrogate (UTF-8 cannot hold it)
    response = await client.post(path, content=body, headers=JSON)

    # Then it is refused, naming the field, and nothing was written
    refused(response, field)
    assert await stored(raw, prefix) == before


@pytest.mark.parametrize(
    ("envelope", "field"),
    [({"type": "a.b\n", "args": []}, "type"),
     ({"type": "a.b", "args": [], "options": {"queue": "default\n"}}, "options.queue"),
     ({"type": "a.b", "args": [], "id": "0190b6d2-8f3a-7c4e-9a1b-2c3d4e5f6a7b\n"}, "id")],
)  # fmt: skip
async def test_a_name_with_a_trailing_newline_is_refused_and_nothing_is_written(
    client: httpx.AsyncClient, raw: Any, prefix: str, envelope: dict[str, Any], field: str
) -> None:
    # Given a store with nothing of OJS yet
    before = await stored(raw, prefix)

    # When a job is enqueued whose type, queue or id ends with a newline
    response = await client.post("/ojs/v1/jobs", json=envelope)

    # Then it is refused, naming the field, and nothing was written
    refused(response, field)
    assert await stored(raw, prefix) == before
