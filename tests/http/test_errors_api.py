"""Every error path of the API: the JSON shape, the stable codes, the token, and hostile
names and ids that must never reach a key outside the configured prefix."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest
import redis.asyncio as aioredis
from fastapi import FastAPI

from lazarus import Job, Queue
from lazarus.http import create_app

from .conftest import AUTH, DLQ, TOKEN, MakeWorker

BASE = "/api/dlq"
HOSTILE = ["a{b", "a}b", "{jobs}:x", "a b", " ", "\t", "x" * 201]
MUTATIONS = [
    ("POST", f"{BASE}/some-id/retry"),
    ("DELETE", f"{BASE}/some-id"),
    ("POST", f"{BASE}/retry"),
    ("DELETE", BASE),
    ("POST", "/ojs/v1/jobs"),
    ("DELETE", "/ojs/v1/jobs/some-id"),
    ("POST", "/ojs/v1/workers/fetch"),
    ("POST", "/ojs/v1/workers/nack"),
    ("POST", "/ojs/v1/dead-letter/some-id/retry"),
    ("DELETE", "/ojs/v1/admin/dead-letter/some-id"),
    ("POST", "/api/queues/jobs/pause"),
    ("POST", "/api/queues/jobs/resume"),
]


def error_of(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """The error body of ``response``, after checking its status, shape and code."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}
    assert body["error"]["code"] == code
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    error: dict[str, Any] = body["error"]
    return error


async def all_keys(raw: aioredis.Redis) -> set[str]:
    """Every key but the audit trail's (which records refused requests too)."""
    return {k async for k in raw.scan_iter(match="*", count=1000) if not k.endswith(":audit")}


# -- bad parameters --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"limit": 501}, "limit"),
        ({"limit": 0}, "limit"),
        ({"page": 0}, "page"),
        ({"page": "first"}, "page"),
        ({"reason": "bored"}, "reason"),
        ({"since": "yesterday"}, "since"),
        ({"until": "2025-13-45"}, "until"),
        ({"since": 2000, "until": 1000}, "until"),
        ({"since": "2025-01-02", "until": "2025-01-01T23:59:59Z"}, "until"),
        ({"queue": "a{b"}, "queue"),
        ({"job_type": "x" * 1001}, "job_type"),
    ],
)
async def test_bad_filter_is_422_naming_the_field(
    client: httpx.AsyncClient, params: dict[str, Any], field: str
) -> None:
    response = await client.get(BASE, params={"dlq": DLQ, **params})

    error = error_of(response, 422, "invalid_parameter")
    assert error["field"] == field
    assert field in error["message"]


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("POST", f"{BASE}/retry?dlq={DLQ}", {"filter": {"since": "2000", "until": "1000"}},
         "filter.until"),
        ("DELETE", f"{BASE}?dlq={DLQ}", {"filter": {"since": "yesterday"}}, "filter.since"),
        ("POST", "/api/dead-letters/bulk",
         {"action": "purge", "dlq": DLQ, "filter": {"since": "2000", "until": "1000"}},
         "filter.until"),
    ],
)  # fmt: skip
async def test_a_bad_time_in_a_body_filter_is_422_naming_it_in_the_filter(
    client: httpx.AsyncClient,
    seeded: dict[str, str],
    raw: aioredis.Redis,
    method: str,
    path: str,
    body: Any,
    field: str,
) -> None:
    # Given four dead letters and the keys in Redis
    before = await all_keys(raw)

    # When a bulk operation's body filter has a bad time, or its times the wrong way round
    response = await client.request(method, path, json=body)

    # Then the error names the field inside the filter, and nothing changed
    error = error_of(response, 422, "invalid_parameter")
    assert error["field"] == field
    assert error["message"].startswith(field)
    assert await all_keys(raw) == before


@pytest.mark.parametrize("body", [b"{bad", b'{"priority": 1,}', b'{"priority": 1} x'])
async def test_a_body_that_is_not_json_is_422_naming_the_body(
    client: httpx.AsyncClient, seeded: dict[str, str], dlq: Queue, body: bytes
) -> None:
    # Given four dead letters
    # When a retry's body is not valid JSON
    response = await client.post(
        f"{BASE}/{seeded['a']}/retry", params={"dlq": DLQ}, content=body,
        headers={"Content-Type": "application/json"},
    )  # fmt: skip

    # Then the error names the body and says what is wrong, and nothing was replayed
    error = error_of(response, 422, "invalid_parameter")
    assert error["field"] == "body"
    assert error["message"].startswith("body: not valid JSON: ")
    assert await dlq.get_dead_letter_count() == 4


async def test_missing_dlq_is_422_naming_it(client: httpx.AsyncClient) -> None:
    error = error_of(await client.get(BASE), 422, "invalid_parameter")
    assert error["field"] == "dlq"
    assert "dlq" in error["message"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"priority": -1}, "priority"),
        ({"retry": {"max_attempts": 0}}, "max_attempts"),
        ({"retry": {"max_attempts": True}}, "max_attempts"),
        ({"priority": True}, "priority"),
        ({"priority": 1.0}, "priority"),
        ({"queue": "a b"}, "queue"),
        ({"queue": "x" * 201}, "queue"),
        ({"unknown": 1}, "unknown"),
    ],
)
async def test_bad_retry_changes_are_422_naming_the_field(
    client: httpx.AsyncClient, seeded: dict[str, str], dlq: Queue, body: Any, field: str
) -> None:
    response = await client.post(f"{BASE}/{seeded['a']}/retry", params={"dlq": DLQ}, json=body)

    error = error_of(response, 422, "invalid_parameter")
    assert field in error["message"]
    assert await dlq.get_dead_letter_count() == 4


async def test_a_misspelt_filter_of_a_bulk_delete_is_422_naming_it_and_deletes_nothing(
    client: httpx.AsyncClient, seeded: dict[str, str], dlq: Queue, raw: aioredis.Redis
) -> None:
    # Given four dead letters, three from jobs, one of those a report.generate
    before = await all_keys(raw)

    # When a bulk delete spells the job type filter as the v1 API does (jobType, not job_type)
    response = await client.delete(
        BASE, params={"dlq": DLQ, "queue": "jobs", "jobType": "report.generate"}
    )

    # Then it is refused naming the parameter and the route's own names, and nothing is gone
    error = error_of(response, 422, "invalid_parameter")
    assert error["field"] == "jobType"
    assert error["message"].startswith("jobType: unknown query parameter")
    assert "job_type" in error["message"]
    assert await dlq.get_dead_letter_count() == 4
    assert await all_keys(raw) == before


@pytest.mark.parametrize(
    ("method", "path", "params", "unknown"),
    [
        ("GET", BASE, {"dlq": DLQ, "jobtype": "email.send"}, "jobtype"),
        ("GET", f"{BASE}/count", {"dlq": DLQ, "jobType": "email.send"}, "jobType"),
        ("GET", f"{BASE}/stats", {"dlq": DLQ, "source_queue": "jobs"}, "source_queue"),
        ("POST", f"{BASE}/retry", {"dlq": DLQ, "queue": "jobs", "jobType": "x"}, "jobType"),
        ("POST", f"{BASE}/retry", {"dlq": DLQ, "queue": "jobs", "dryRun": "true"}, "dryRun"),
        ("DELETE", BASE, {"dlq": DLQ, "queue": "jobs", "dryRun": "true"}, "dryRun"),
        ("POST", f"{BASE}/{{a}}/retry", {"dlq": DLQ, "queue": "other"}, "queue"),
        ("DELETE", f"{BASE}/{{a}}", {"dlq": DLQ, "dry_run": "true"}, "dry_run"),
        ("GET", "/api/dead-letters", {"jobType": "email.send"}, "jobType"),
        ("POST", "/api/dead-letters/{a}/archive", {"dlq": DLQ, "note": "n"}, "note"),
        ("POST", "/api/queues/jobs/retry", {"dry_run": "true"}, "dry_run"),
        ("POST", "/api/queues/jobs/pause", {"dlq": DLQ}, "dlq"),
        ("GET", "/api/v1/dead-letter", {"job_type": "email.send"}, "job_type"),
        ("GET", "/api/v1/webhooks/deliveries", {"dead_letter_id": "x"}, "dead_letter_id"),
    ],
)
async def test_an_unknown_query_parameter_is_422_naming_it_and_changes_nothing(
    client: httpx.AsyncClient,
    seeded: dict[str, str],
    raw: aioredis.Redis,
    method: str,
    path: str,
    params: dict[str, str],
    unknown: str,
) -> None:
    # Given four dead letters and the keys in Redis
    before = await all_keys(raw)

    # When a route gets a query parameter it does not take, beside the ones it does
    response = await client.request(method, path.format(**seeded), params=params)

    # Then it is refused naming that parameter, and no key changed
    error = error_of(response, 422, "invalid_parameter")
    assert error["field"] == unknown
    assert error["message"].startswith(f"{unknown}: unknown query parameter")
    assert await all_keys(raw) == before


# -- unknown ids, not a dead letter, state conflicts -----------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", f"{BASE}/no-such-id"), ("DELETE", f"{BASE}/no-such-id"),
     ("POST", f"{BASE}/no-such-id/retry"), ("GET", "/api/queues/jobs/jobs/no-such-id"),
     ("GET", "/api/queues/no-such-queue"), ("GET", "/no/such/route")],
)  # fmt: skip
async def test_unknown_ids_are_404_not_found(
    client: httpx.AsyncClient, queue: Queue, method: str, path: str
) -> None:
    await queue.add("registers-the-queue")
    params = {"dlq": DLQ} if path.startswith(BASE) else {}
    response = await client.request(method, path, params=params)
    error_of(response, 404, "not_found")


async def test_wrong_method_is_405(client: httpx.AsyncClient) -> None:
    error_of(await client.put("/api/queues"), 405, "method_not_allowed")


@pytest.mark.parametrize(("method", "suffix"), [("GET", ""), ("DELETE", ""), ("POST", "/retry")])
async def test_a_job_that_is_not_a_dead_letter_is_409(
    client: httpx.AsyncClient, dlq: Queue, method: str, suffix: str
) -> None:
    # Given an ordinary job added straight to the queue used as a DLQ
    job = await dlq.add("ordinary", {"n": 1})

    # When it is read, deleted or retried as a dead letter
    response = await client.request(method, f"{BASE}/{job.id}{suffix}", params={"dlq": DLQ})

    # Then the answer is 409 and the job is untouched
    error_of(response, 409, "not_a_dead_letter")
    assert await dlq.get_job(job.id) is not None


async def test_deleting_a_dead_letter_a_worker_holds_is_a_409_state_conflict(
    client: httpx.AsyncClient, seeded: dict[str, str], make_worker: MakeWorker, dlq: Queue
) -> None:
    # Given a worker that took a dead letter off the DLQ and is still running it
    release, started = asyncio.Event(), asyncio.Event()

    async def hold(_job: Job) -> None:
        started.set()
        await release.wait()

    make_worker(hold, DLQ)
    await asyncio.wait_for(started.wait(), 10)
    held = (await dlq.get_active())[0]

    # When it is deleted
    response = await client.delete(f"{BASE}/{held.id}", params={"dlq": DLQ})
    release.set()

    # Then the answer is a state conflict
    error_of(response, 409, "job_state_conflict")


# -- the token -------------------------------------------------------------------------------


@pytest.mark.parametrize(("method", "path"), MUTATIONS)
@pytest.mark.parametrize("authorization", [None, "Bearer wrong", f"Basic {TOKEN}", TOKEN])
async def test_mutations_without_the_right_token_are_401(
    anonymous: httpx.AsyncClient,
    seeded: dict[str, str],
    dlq: Queue,
    method: str,
    path: str,
    authorization: str | None,
) -> None:
    headers = {} if authorization is None else {"Authorization": authorization}
    response = await anonymous.request(
        method, path, params={"dlq": DLQ, "all": "true"}, headers=headers
    )

    error_of(response, 401, "unauthorized")
    assert response.headers["www-authenticate"] == "Bearer"
    assert await dlq.get_dead_letter_count() == 4


async def test_reads_need_a_token_too(anonymous: httpx.AsyncClient, seeded: dict[str, str]) -> None:
    for path in ("/metrics", "/api/queues", "/api/health", "/openapi.json", f"{BASE}?dlq={DLQ}",
                 f"{BASE}/{seeded['a']}?dlq={DLQ}"):  # fmt: skip
        response = await anonymous.get(path)
        error_of(response, 401, "unauthorized")
        assert "ada@x.io" not in response.text
    assert (await anonymous.get("/health")).status_code == 200


async def test_the_right_token_is_accepted(
    anonymous: httpx.AsyncClient, seeded: dict[str, str], dlq: Queue
) -> None:
    response = await anonymous.delete(f"{BASE}/{seeded['a']}", params={"dlq": DLQ}, headers=AUTH)
    assert response.status_code == 204


@pytest.fixture
async def open_app(redis_url: str, prefix: str) -> AsyncIterator[FastAPI]:
    app = create_app(connection=redis_url, prefix=prefix, auth=False)
    yield app
    await app.state.ops.close()


async def test_without_a_configured_token_mutations_need_none(
    open_app: FastAPI, seeded: dict[str, str], dlq: Queue
) -> None:
    transport = httpx.ASGITransport(app=open_app)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as c:
        response = await c.delete(f"{BASE}/{seeded['a']}", params={"dlq": DLQ})
    assert response.status_code == 204


# -- hostile names and ids -------------------------------------------------------------------


def hostile_requests(value: str) -> list[tuple[str, str, dict[str, Any], Any]]:
    """``(method, path, params, json)`` that each carry ``value`` as a name or an id."""
    quoted = quote(value, safe="")
    return [
        ("GET", BASE, {"dlq": value}, None),
        ("GET", f"{BASE}/stats", {"dlq": value}, None),
        ("GET", BASE, {"dlq": DLQ, "queue": value}, None),
        ("GET", f"{BASE}/{quoted}", {"dlq": DLQ}, None),
        ("DELETE", f"{BASE}/{quoted}", {"dlq": DLQ}, None),
        ("POST", f"{BASE}/{quoted}/retry", {"dlq": DLQ}, None),
        ("POST", f"{BASE}/some-id/retry", {"dlq": value}, None),
        ("POST", f"{BASE}/retry", {"dlq": DLQ}, {"filter": {"queue": value}}),
        ("DELETE", BASE, {"dlq": value, "all": "true"}, None),
        ("GET", f"/api/queues/{quoted}", {}, None),
        ("GET", f"/api/queues/{quoted}/jobs/x", {}, None),
        ("GET", f"/api/queues/jobs/jobs/{quoted}", {}, None),
        ("POST", f"/api/queues/{quoted}/pause", {}, None),
        ("POST", f"/api/queues/{quoted}/resume", {}, None),
    ]


@pytest.mark.parametrize("value", HOSTILE, ids=["open-brace", "close-brace", "hash-tag",
                                                "space", "blank", "tab", "too-long"])  # fmt: skip
async def test_hostile_names_and_ids_are_422_and_touch_nothing(
    client: httpx.AsyncClient, seeded: dict[str, str], raw: aioredis.Redis, value: str
) -> None:
    # Given the keys in Redis before
    before = await all_keys(raw)

    # When every route is given the hostile value as a queue name or an id
    for method, path, params, body in hostile_requests(value):
        response = await client.request(method, path, params=params, json=body)

        # Then each is refused with a 422 and no key anywhere changed
        error = error_of(response, 422, "invalid_parameter")
        assert error["field"] in {"dlq", "queue", "id", "name", "filter.queue"}, (path, error)
    assert await all_keys(raw) == before


@pytest.mark.parametrize("value", ["*", "..", "jobs*", "?", "[a-z]"])
async def test_glob_and_dot_names_are_literal_names_and_reach_nothing_else(
    client: httpx.AsyncClient, seeded: dict[str, str], raw: aioredis.Redis, value: str
) -> None:
    # Given keys in Redis, among them four dead letters in jobs-dlq
    before = await all_keys(raw)

    # When names that would be patterns or paths elsewhere are used
    quoted = quote(value, safe="").replace(".", "%2E")  # or httpx would resolve ".."
    listed = await client.get(BASE, params={"dlq": value})
    stats = await client.get(f"{BASE}/stats", params={"dlq": value})
    one = await client.get(f"/api/queues/{quoted}")
    pause = await client.post(f"/api/queues/{quoted}/pause")
    purge = await client.delete(BASE, params={"dlq": value, "all": "true"})

    # Then they name a queue of that exact name, which is empty or unknown
    assert listed.json()["total"] == 0
    assert stats.json()["total"] == 0
    error_of(one, 404, "not_found")
    error_of(pause, 404, "not_found")
    assert purge.json() == {"count": 0, "dryRun": False}
    assert await all_keys(raw) == before


async def test_an_id_with_a_slash_matches_no_route(client: httpx.AsyncClient) -> None:
    response = await client.get(f"{BASE}/a%2F..%2Fb", params={"dlq": DLQ})
    error_of(response, 404, "not_found")
