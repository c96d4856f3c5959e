"""A queue's limits over HTTP: GET /api/queues/{name}/limits, and PUT and DELETE of
/limits/concurrency and /limits/rate."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
import redis.asyncio as aioredis
from fastapi import FastAPI

from lazarus import Job, Queue
from lazarus._keys import QueueKeys
from lazarus._limiter import RateLimit
from lazarus.http import create_app
from tests.conftest import wait_for_state

from .conftest import MakeWorker

LIMITS = "/api/queues/jobs/limits"
NONE = {"concurrency": None, "rateLimit": None}
VIEWER = "viewer-token-0123456789"
OPERATOR = "operator-token-0123456789"


@pytest.fixture
async def roles_app(redis_url: str, prefix: str) -> AsyncIterator[FastAPI]:
    tokens = f"eve:viewer:{VIEWER},olga:operator:{OPERATOR}"
    app = create_app(connection=redis_url, prefix=prefix, tokens=tokens)
    yield app
    await app.state.bulk.close()
    await app.state.ops.close()


def client_of(app: FastAPI, token: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost",
                             headers={"Authorization": f"Bearer {token}"})  # fmt: skip


async def test_each_limit_is_set_and_removed_and_the_library_sees_it(
    client: httpx.AsyncClient, queue: Queue, raw: aioredis.Redis
) -> None:
    await queue.add("n", None)  # the queue is known
    assert (await client.get(LIMITS)).json() == NONE

    capped = await client.put(f"{LIMITS}/concurrency", json={"limit": 20})
    assert capped.status_code == 200, capped.text
    assert capped.json() == {"concurrency": 20, "rateLimit": None}
    assert await queue.get_global_concurrency() == 20
    assert await raw.hget(queue.keys.meta, "concurrency") == "20"

    limited = await client.put(f"{LIMITS}/rate", json={"max": 50, "duration": 1000})
    both = {"concurrency": 20, "rateLimit": {"max": 50, "duration": 1000, "ttl": 0}}
    assert (limited.status_code, limited.json()) == (200, both)
    assert await queue.get_global_rate_limit() == RateLimit(50, 1000)
    assert (await client.get(LIMITS)).json() == both

    uncapped = await client.delete(f"{LIMITS}/concurrency")
    assert uncapped.json() == {**both, "concurrency": None}
    assert await queue.get_global_concurrency() is None
    unlimited = await client.delete(f"{LIMITS}/rate")
    assert (unlimited.status_code, unlimited.json()) == (200, NONE)
    assert await queue.get_global_rate_limit() is None
    assert not await raw.hexists(queue.keys.meta, "limiter:max")


async def test_a_reached_window_shows_its_ttl_and_removing_the_limit_ends_it(
    client: httpx.AsyncClient, queue: Queue, make_worker: MakeWorker, raw: aioredis.Redis
) -> None:
    # Given a limit of one job a minute, and a worker that started one
    added = await queue.add("n", None)
    limited = await client.put(f"{LIMITS}/rate", json={"max": 1, "duration": 60_000})
    assert limited.json()["rateLimit"]["ttl"] == 0

    async def ok(job: Job) -> None:
        return None

    worker = make_worker(ok)

    await wait_for_state(queue, added.id, "completed")
    await worker.close()

    # Then the window is spent until it ends
    limit = (await client.get(LIMITS)).json()["rateLimit"]
    assert (limit["max"], limit["duration"]) == (1, 60_000)
    assert 0 < limit["ttl"] <= 60_000
    # And removing the limit removes its window
    assert (await client.delete(f"{LIMITS}/rate")).json() == NONE
    assert not await raw.exists(queue.keys.limiter)


@pytest.mark.parametrize(
    ("route", "content", "field", "says"),
    [
        ("concurrency", "{}", "limit", "Field required"),
        ("concurrency", '{"limit": 0}', "limit", "greater than or equal to 1"),
        ("concurrency", '{"limit": 2147483648}', "limit", "less than or equal to 2147483647"),
        ("concurrency", '{"limit": true}', "limit", "valid integer"),
        ("concurrency", '{"limit": 5.0}', "limit", "valid integer"),
        ("concurrency", '{"limit": "5"}', "limit", "valid integer"),
        ("concurrency", '{"limit": null}', "limit", "valid integer"),
        ("concurrency", '{"limit": 5, "max": 1}', "max", "Extra inputs"),
        ("concurrency", '{"limit": 5,', "body", "not valid JSON"),
        ("concurrency", "[5]", "body", "valid dictionary"),
        ("rate", '{"max": 5}', "duration", "Field required"),
        ("rate", '{"max": 0, "duration": 1000}', "max", "greater than or equal to 1"),
        ("rate", '{"max": 2147483648, "duration": 1000}', "max", "less than or equal to"),
        ("rate", '{"max": 5, "duration": 0}', "duration", "greater than or equal to 1"),
        ("rate", '{"max": 5, "duration": 10000000000001}', "duration",
         "less than or equal to 10000000000000"),
        ("rate", '{"max": true, "duration": 1000}', "max", "valid integer"),
        ("rate", '{"max": 5, "duration": 1000.0}', "duration", "valid integer"),
        ("rate", '{"max": 5, "duration": 1000, "ttl": 3}', "ttl", "Extra inputs"),
        ("rate", "", "body", "Field required"),
    ],
)  # fmt: skip
async def test_a_bad_body_is_a_422_naming_the_field_and_writes_nothing(
    client: httpx.AsyncClient,
    queue: Queue,
    raw: aioredis.Redis,
    route: str,
    content: str,
    field: str,
    says: str,
) -> None:
    await queue.add("n", None)
    await queue.set_global_concurrency(3)
    await queue.set_global_rate_limit(3, 500)
    meta = await raw.hgetall(queue.keys.meta)

    response = await client.put(
        f"{LIMITS}/{route}", content=content, headers={"content-type": "application/json"}
    )

    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert (error["code"], error["field"]) == ("invalid_parameter", field)
    assert says in error["message"]
    assert await raw.hgetall(queue.keys.meta) == meta


async def test_an_unknown_queue_is_a_404_and_nothing_is_written(
    client: httpx.AsyncClient, raw: aioredis.Redis, prefix: str
) -> None:
    for method, path, body in [
        ("GET", "", None), ("PUT", "/concurrency", {"limit": 5}), ("DELETE", "/concurrency", None),
        ("PUT", "/rate", {"max": 5, "duration": 1000}), ("DELETE", "/rate", None),
    ]:  # fmt: skip
        response = await client.request(method, f"/api/queues/nope/limits{path}", json=body)
        assert response.status_code == 404, (method, path, response.text)
        assert response.json()["error"]["code"] == "not_found"
        assert "no queue 'nope'" in response.json()["error"]["message"]
    assert [k async for k in raw.scan_iter(match=f"{prefix}:*")] == [f"{prefix}:audit"]
    assert not await raw.exists(QueueKeys(prefix, "nope").meta)


async def test_a_viewer_reads_the_limits_but_only_an_operator_changes_them_and_each_is_audited(
    roles_app: FastAPI, anonymous: httpx.AsyncClient, queue: Queue, raw: aioredis.Redis
) -> None:
    await queue.add("n", None)
    await queue.set_global_concurrency(4)
    meta = await raw.hgetall(queue.keys.meta)

    async with client_of(roles_app, VIEWER) as viewer, client_of(roles_app, OPERATOR) as operator:
        shown = await viewer.get(LIMITS)
        refused = [
            await viewer.put(f"{LIMITS}/concurrency", json={"limit": 9}),
            await viewer.delete(f"{LIMITS}/concurrency"),
            await viewer.put(f"{LIMITS}/rate", json={"max": 9, "duration": 9}),
            await viewer.delete(f"{LIMITS}/rate"),
        ]
        unsigned = await anonymous.put(f"{LIMITS}/concurrency", json={"limit": 9})
        assert await raw.hgetall(queue.keys.meta) == meta

        changed = await operator.put(f"{LIMITS}/rate", json={"max": 9, "duration": 900})

    assert (shown.status_code, shown.json()) == (200, {"concurrency": 4, "rateLimit": None})
    codes = [(r.status_code, r.json()["error"]["code"]) for r in refused]
    assert codes == [(403, "forbidden")] * 4
    assert unsigned.status_code == 401
    assert changed.status_code == 200, changed.text
    assert await queue.get_global_rate_limit() == RateLimit(9, 900)
    trail = await roles_app.state.audit.read(limit=10)
    newest = trail[0]
    assert (newest.actor, newest.method, newest.path) == ("olga", "PUT", f"{LIMITS}/rate")
    assert (newest.outcome, newest.status) == ("ok", 200)
    assert '"duration": 900' in newest.detail
    refusals = [(e.actor, e.method, e.status) for e in trail[1:6]]
    assert refusals == [("unauthenticated", "PUT", 401),
                        *[("eve", "DELETE", 403), ("eve", "PUT", 403)] * 2]  # fmt: skip
