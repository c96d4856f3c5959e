"""Who may call what: every route of the OpenAPI document against no credentials, a wrong
token, a viewer, an operator and an admin. A route missing from :data:`REQUIRED` fails the
test, so no route ships without a decision."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI
from starlette.routing import Mount

from lazarus.http import create_app
from lazarus.http.auth import Role

PUBLIC = None
V, OP, A = Role.VIEWER, Role.OPERATOR, Role.ADMIN
# (method, path) -> the lowest role that may call it; PUBLIC for anyone.
REQUIRED: dict[tuple[str, str], Role | None] = {
    ("GET", "/health"): PUBLIC,
    ("GET", "/api/health"): V,
    ("GET", "/metrics"): V,
    ("GET", "/api/audit"): A,
    ("GET", "/api/queues"): V,
    ("GET", "/api/queues/{name}"): V,
    ("GET", "/api/queues/{name}/jobs/{id}"): V,
    ("POST", "/api/queues/{name}/pause"): OP,
    ("POST", "/api/queues/{name}/resume"): OP,
    ("POST", "/api/queues/{name}/drain"): OP,
    ("GET", "/api/dead-letters"): V,
    ("GET", "/api/dead-letters/queues"): V,
    ("GET", "/api/dead-letters/original/{id}"): V,
    ("POST", "/api/dead-letters/bulk"): OP,
    ("GET", "/api/dead-letters/bulk/{operation_id}"): V,
    ("DELETE", "/api/dead-letters/bulk/{operation_id}"): OP,
    **{
        (method, f"/api/dlq{tail}"): role
        for method, tail, role in [
            ("GET", "", V), ("DELETE", "", OP), ("GET", "/count", V), ("GET", "/stats", V),
            ("POST", "/retry", OP), ("GET", "/{id}", V), ("DELETE", "/{id}", OP),
            ("POST", "/{id}/retry", OP),
        ]
    },
    # the dead letter lifecycle, retention and health
    ("POST", "/api/dead-letters/settle"): OP,
    ("POST", "/api/dead-letters/{id}/archive"): OP,
    ("POST", "/api/dead-letters/{id}/flag"): OP,
    ("POST", "/api/dead-letters/{id}/reopen"): OP,
    ("POST", "/api/dead-letters/{id}/replay"): OP,
    ("POST", "/api/dead-letters/{id}/status"): OP,
    ("GET", "/api/queues/{name}/dead-letter-health"): V,
    ("GET", "/api/queues/{name}/retention"): V,
    ("PUT", "/api/queues/{name}/retention"): A,
    ("POST", "/api/queues/{name}/prune"): OP,
    # failed jobs and workers of every queue
    ("POST", "/api/queues/{name}/jobs/{id}/retry"): OP,
    ("POST", "/api/queues/{name}/jobs/{id}/promote"): OP,
    ("POST", "/api/queues/{name}/retry"): OP,
    ("POST", "/api/queues/{name}/promote"): OP,
    ("PATCH", "/api/queues/{name}/jobs/{id}"): OP,
    ("POST", "/api/queues/{name}/jobs/{id}/cancel"): OP,
    ("GET", "/api/queues/{name}/workers"): V,
    ("GET", "/api/queues/{name}/metrics"): V,
    # a queue's limits across its workers
    ("GET", "/api/queues/{name}/limits"): V,
    ("PUT", "/api/queues/{name}/limits/concurrency"): OP,
    ("DELETE", "/api/queues/{name}/limits/concurrency"): OP,
    ("PUT", "/api/queues/{name}/limits/rate"): OP,
    ("DELETE", "/api/queues/{name}/limits/rate"): OP,
    # seed 003's API over the record, and the webhook delivery log
    ("GET", "/api/v1/dead-letter"): V,
    ("GET", "/api/v1/dead-letter/stats"): V,
    ("GET", "/api/v1/dead-letter/{id}"): V,
    ("DELETE", "/api/v1/dead-letter/{id}"): OP,
    ("POST", "/api/v1/dead-letter/{id}/retry"): OP,
    ("GET", "/api/v1/webhooks/deliveries"): A,
    # Open Job Spec, mounted at /ojs: remote workers need an operator's token
    ("GET", "/ojs/manifest"): V,
    ("GET", "/ojs/v1/health"): V,
    ("POST", "/ojs/v1/jobs"): OP,
    ("POST", "/ojs/v1/jobs/batch"): OP,
    ("GET", "/ojs/v1/jobs/{job_id}"): V,
    ("DELETE", "/ojs/v1/jobs/{job_id}"): OP,
    ("POST", "/ojs/v1/jobs/{job_id}/activate"): OP,
    ("POST", "/ojs/v1/workers/fetch"): OP,
    ("POST", "/ojs/v1/workers/ack"): OP,
    ("POST", "/ojs/v1/workers/nack"): OP,
    ("POST", "/ojs/v1/workers/heartbeat"): OP,
    ("GET", "/ojs/v1/events"): V,
    ("GET", "/ojs/v1/queues"): V,
    ("GET", "/ojs/v1/queues/{name}/stats"): V,
    ("POST", "/ojs/v1/queues/{name}/pause"): OP,
    ("POST", "/ojs/v1/queues/{name}/resume"): OP,
    ("GET", "/ojs/v1/cron"): V,
    ("POST", "/ojs/v1/cron"): OP,
    ("DELETE", "/ojs/v1/cron/{name}"): OP,
    ("GET", "/ojs/v1/dead-letter"): V,
    ("GET", "/ojs/v1/dead-letter/{job_id}"): V,
    ("DELETE", "/ojs/v1/dead-letter/{job_id}"): OP,
    ("POST", "/ojs/v1/dead-letter/{job_id}/retry"): OP,
    ("GET", "/ojs/v1/admin/dead-letter"): V,
    ("GET", "/ojs/v1/admin/dead-letter/stats"): V,
    ("GET", "/ojs/v1/admin/dead-letter/{job_id}"): V,
    ("DELETE", "/ojs/v1/admin/dead-letter/{job_id}"): OP,
    ("POST", "/ojs/v1/admin/dead-letter/{job_id}/retry"): OP,
    # the OJS admin API: reads a viewer's, every write an operator's
    ("DELETE", "/ojs/v1/admin/dead-letter"): OP,
    ("GET", "/ojs/v1/admin/queues"): V,
    ("GET", "/ojs/v1/admin/queues/{name}"): V,
    ("POST", "/ojs/v1/admin/queues/{name}/pause"): OP,
    ("POST", "/ojs/v1/admin/queues/{name}/resume"): OP,
    ("DELETE", "/ojs/v1/admin/queues/{name}/jobs"): OP,
    ("GET", "/ojs/v1/admin/jobs"): V,
    ("GET", "/ojs/v1/admin/jobs/{job_id}"): V,
    ("POST", "/ojs/v1/admin/jobs/{job_id}/cancel"): OP,
    ("POST", "/ojs/v1/admin/jobs/{job_id}/retry"): OP,
    ("POST", "/ojs/v1/admin/jobs/bulk/retry"): OP,
    ("POST", "/ojs/v1/admin/jobs/bulk/cancel"): OP,
    ("POST", "/ojs/v1/admin/jobs/bulk/delete"): OP,
    ("GET", "/ojs/v1/admin/stats"): V,
    ("GET", "/ojs/v1/admin/workers"): V,
    ("GET", "/ojs/v1/admin/workers/{worker_id}"): V,
    ("POST", "/ojs/v1/admin/workers/{worker_id}/quiet"): OP,
    ("DELETE", "/ojs/v1/admin/workers/{worker_id}"): OP,
    ("POST", "/ojs/v1/workflows"): OP,
    ("GET", "/ojs/v1/workflows/{workflow_id}"): V,
    ("DELETE", "/ojs/v1/workflows/{workflow_id}"): OP,
    # the OJS schema registry: reads a viewer's, writes an operator's
    ("GET", "/ojs/v1/schemas"): V,
    ("POST", "/ojs/v1/schemas"): OP,
    ("GET", "/ojs/v1/schemas/{uri}"): V,
    ("DELETE", "/ojs/v1/schemas/{uri}"): OP,
}  # fmt: skip

TOKENS = {"viewer": "viewer-token-0123456789", "operator": "operator-token-0123456789",
          "admin": "admin-token-0123456789"}  # fmt: skip
CALLERS: dict[str, str | None] = {"nobody": None, "wrong": "wrong-token-0123456789", **TOKENS}
ROLE_OF = {"viewer": V, "operator": OP, "admin": A}


def routes(app: FastAPI) -> list[tuple[str, str]]:
    """``(method, path)`` of every operation in the OpenAPI documents of the app and of the
    apps it mounts (Open Job Spec at ``/ojs``)."""
    found = [
        (method.upper(), path) for path, item in app.openapi()["paths"].items() for method in item
    ]
    for route in app.routes:
        if isinstance(route, Mount) and isinstance(route.app, FastAPI):
            found += [
                (method.upper(), route.path + path)
                for path, item in route.app.openapi()["paths"].items()
                for method in item
            ]
    return sorted(found)


@pytest.fixture
async def app(redis_url: str, prefix: str) -> AsyncIterator[FastAPI]:
    spec = ",".join(f"{name}:{name}:{token}" for name, token in TOKENS.items())
    application = create_app(
        connection=redis_url, prefix=prefix, tokens=spec, failed_tokens_per_minute=1000
    )
    yield application
    await application.state.bulk.close()
    await application.state.ops.close()


def test_every_route_has_a_decided_role(app: FastAPI) -> None:
    missing = [route for route in routes(app) if route not in REQUIRED]
    assert missing == [], "add these routes to REQUIRED with the role they need"
    stale = [route for route in REQUIRED if route not in routes(app)]
    assert stale == []


async def test_every_route_answers_each_caller_as_its_role_allows(app: FastAPI) -> None:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        for method, path in routes(app):
            url = re.sub(r"\{[^}]+\}", "some-id", path) + "?dlq=jobs-dlq"
            needed = REQUIRED[(method, path)]
            for caller, token in CALLERS.items():
                headers = {"Authorization": f"Bearer {token}"} if token else {}
                body = {} if method in ("POST", "PATCH") else None
                response = await client.request(method, url, headers=headers, json=body)
                where = f"{method} {path} as {caller}: {response.status_code} {response.text}"
                if needed is PUBLIC:
                    assert response.status_code not in (401, 403), where
                elif token is None or caller == "wrong":
                    assert response.status_code == 401, where
                    assert response.headers["www-authenticate"] == "Bearer", where
                elif ROLE_OF[caller] < needed:
                    assert response.status_code == 403, where
                    assert response.json()["error"]["code"] == "forbidden", where
                else:
                    assert response.status_code not in (401, 403), where
