"""The guard in front of every route: Host and Origin checks, the body limit, throttled
tokens, masked payloads for viewers, security headers, and the audit trail."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
import redis.asyncio as aioredis
from fastapi import FastAPI

from lazarus import Queue
from lazarus.http import create_app
from lazarus.masking import MASKED

from .conftest import AUTH, DLQ

VIEWER = "viewer-token-0123456789"
ADMIN = "admin-token-0123456789"
BASE = "/api/dlq"


@pytest.fixture
async def roles_app(redis_url: str, prefix: str) -> AsyncIterator[FastAPI]:
    app = create_app(
        connection=redis_url,
        prefix=prefix,
        tokens=f"eve:viewer:{VIEWER},root:admin:{ADMIN}",
        max_body_bytes=4096,
    )
    yield app
    await app.state.bulk.close()
    await app.state.ops.close()


def client_of(app: FastAPI, token: str | None = None, base: str = "http://localhost"):  # type: ignore[no-untyped-def]
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base,
                             headers=headers)  # fmt: skip


@pytest.mark.parametrize("host", ["evil.example", "rebind.attacker.test:8000", "10.0.0.7"])
async def test_a_host_header_that_is_not_served_is_refused_before_anything_runs(
    client: httpx.AsyncClient, seeded: dict[str, str], dlq: Queue, host: str
) -> None:
    # A DNS-rebinding page reaches the server under its own name
    response = await client.delete(
        f"{BASE}/{seeded['a']}", params={"dlq": DLQ}, headers={"Host": host}
    )
    assert response.status_code == 421
    assert response.json()["error"]["code"] == "misdirected_request"
    assert await dlq.get_dead_letter_count() == 4


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1:8000", "[::1]:8000", "LOCALHOST"])
async def test_loopback_host_names_are_served(client: httpx.AsyncClient, host: str) -> None:
    response = await client.get("/api/queues", headers={"Host": host})
    assert response.status_code == 200


@pytest.mark.parametrize(
    "headers",
    [{"Origin": "http://evil.example"}, {"Origin": "http://localhost:9999"},
     {"Origin": "null"}, {"Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Site": "same-site"}],
)  # fmt: skip
async def test_unsafe_requests_from_another_origin_change_nothing(
    client: httpx.AsyncClient, seeded: dict[str, str], dlq: Queue, headers: dict[str, str]
) -> None:
    response = await client.delete(f"{BASE}/{seeded['a']}", params={"dlq": DLQ}, headers=headers)
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "cross_origin"
    assert await dlq.get_dead_letter_count() == 4


async def test_same_origin_requests_pass(
    client: httpx.AsyncClient, seeded: dict[str, str], dlq: Queue
) -> None:
    headers = {"Origin": "http://localhost", "Sec-Fetch-Site": "same-origin"}
    response = await client.delete(f"{BASE}/{seeded['a']}", params={"dlq": DLQ}, headers=headers)
    assert response.status_code == 204
    assert await dlq.get_dead_letter_count() == 3


async def test_a_body_over_the_limit_is_refused_by_its_length_before_it_is_read(
    roles_app: FastAPI, raw: aioredis.Redis, prefix: str
) -> None:
    async with client_of(roles_app, ADMIN) as client:
        declared = await client.post(
            "/api/dead-letters/bulk", content=b"{" + b" " * 5000 + b"}",
            headers={"Content-Type": "application/json"},
        )  # fmt: skip

        async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted as it comes
            for _ in range(10):
                yield b" " * 1000

        streamed = await client.post(
            "/api/dead-letters/bulk", content=chunks(), headers={"Content-Type": "application/json"}
        )
    for response in (declared, streamed):
        assert response.status_code == 413, response.text
        assert response.json()["error"]["code"] == "body_too_large"
    assert [k async for k in raw.scan_iter(match=f"{prefix}:bulkops:*")] == []


async def test_wrong_tokens_are_throttled_per_client_and_odd_tokens_never_500(
    roles_app: FastAPI,
) -> None:
    async with client_of(roles_app) as client:
        for token in ["é-not-ascii-token-0123", "x" * 10_000, "", "\t", *["guess"] * 6]:
            header = f"Bearer {token}".encode()
            response = await client.get("/api/queues", headers={"Authorization": header})
            assert response.status_code == 401, token
        # the next wrong one is the tenth (empty ones do not count): then even the right one waits
        assert (
            await client.get("/api/queues", headers={"Authorization": "Bearer no"})
        ).status_code == 401
        refused = await client.get("/api/queues", headers={"Authorization": f"Bearer {ADMIN}"})
    assert refused.status_code == 429
    assert int(refused.headers["retry-after"]) > 0


async def test_a_viewer_reads_dead_letters_with_payloads_masked_and_cannot_search_them(
    roles_app: FastAPI, seeded: dict[str, str]
) -> None:
    async with client_of(roles_app, VIEWER) as client:
        one = await client.get(f"{BASE}/{seeded['a']}", params={"dlq": DLQ})
        page = await client.get("/api/dead-letters")
        search = await client.get(BASE, params={"dlq": DLQ, "payload_contains": "ada"})
        write = await client.delete(f"{BASE}/{seeded['a']}", params={"dlq": DLQ})
    assert one.status_code == 200 and one.json()["payload"] == MASKED
    assert "ada@x.io" not in one.text and "ada@x.io" not in page.text
    assert all(d["payload"] == MASKED for d in page.json()["data"])
    assert search.status_code == 403
    assert write.status_code == 403
    async with client_of(roles_app, ADMIN) as client:
        assert (await client.get(f"{BASE}/{seeded['a']}", params={"dlq": DLQ})).json()["payload"][
            "to"
        ] == "ada@x.io"


async def test_responses_carry_no_store_nosniff_and_a_strict_csp(client: httpx.AsyncClient) -> None:
    for path in ("/api/queues", "/health", "/api/nope"):
        response = await client.get(path)
        assert response.headers["cache-control"] == "no-store", path
        assert response.headers["x-content-type-options"] == "nosniff", path
        assert response.headers["content-security-policy"].startswith("default-src 'none'"), path


async def test_docs_are_off_unless_asked_for(client: httpx.AsyncClient) -> None:
    assert (await client.get("/docs")).status_code == 404
    assert (await client.get("/redoc")).status_code == 404


async def test_every_unsafe_request_is_audited_with_actor_outcome_and_count(
    roles_app: FastAPI, seeded: dict[str, str], dlq: Queue
) -> None:
    async with client_of(roles_app, ADMIN) as admin, client_of(roles_app, VIEWER) as viewer:
        # an admin purges the dead letters of one source queue; a viewer tries to
        purged = await admin.delete(BASE, params={"dlq": DLQ, "queue": "other"})
        refused = await viewer.delete(f"{BASE}/{seeded['a']}", params={"dlq": DLQ})
        trail = (await admin.get("/api/audit")).json()["entries"]
        viewer_reads_audit = await viewer.get("/api/audit")
    assert purged.status_code == 200 and refused.status_code == 403
    assert viewer_reads_audit.status_code == 403
    newest, oldest = trail[0], trail[1]
    assert (newest["actor"], newest["role"], newest["method"]) == ("eve", "viewer", "DELETE")
    assert newest["outcome"] == "refused" and newest["status"] == 403
    assert newest["path"] == f"{BASE}/{seeded['a']}"
    assert (oldest["actor"], oldest["outcome"], oldest["count"]) == ("root", "ok", 1)
    assert "queue=other" in oldest["query"]
    assert await dlq.get_dead_letter_count() == 3


async def test_the_audit_keeps_tokens_and_csrf_values_out(
    client: httpx.AsyncClient, raw: aioredis.Redis, prefix: str
) -> None:
    await client.post(
        "/api/dead-letters/bulk",
        json={"action": "purge", "dlq": DLQ, "token": "leaked-token", "csrf": "leaked-csrf",
              "filter": {"name": "x"}},
    )  # fmt: skip
    entries = await raw.xrange(f"{prefix}:audit")
    assert entries
    text = str(entries)
    assert "leaked-token" not in text and "leaked-csrf" not in text
    assert AUTH["Authorization"].split()[1] not in text


async def _drain(stop: object) -> None:
    """A drainer: the coroutine function create_app's ``drainers`` take."""


@pytest.mark.parametrize(
    ("settings", "error", "name"),
    [
        ({"allowed_hosts": "example.com"}, TypeError, "allowed_hosts"),
        ({"allowed_hosts": []}, ValueError, "allowed_hosts"),
        ({"allowed_hosts": ["example.com", 5]}, TypeError, "allowed_hosts"),
        ({"tokens": [f"ci:viewer:{VIEWER}"]}, TypeError, "tokens"),
        ({"token": ADMIN.encode()}, TypeError, "token"),
        ({"session_ttl": "3600"}, TypeError, "session_ttl"),
        ({"session_ttl": True}, TypeError, "session_ttl"),
        ({"max_body_bytes": 2048.5}, TypeError, "max_body_bytes"),
        ({"failed_tokens_per_minute": "10"}, TypeError, "failed_tokens_per_minute"),
        ({"drainers": _drain}, TypeError, "drainers"),
    ],
)
def test_create_app_refuses_a_setting_of_the_wrong_kind_naming_it(
    redis_url: str, settings: dict[str, object], error: type[Exception], name: str
) -> None:
    # Given a setting of the wrong kind: one host name where a collection belongs (its
    # characters would become the allowed hosts), a list where text belongs, a str or a
    # float where an int belongs, one drainer where a sequence of them belongs
    # When the app is built with it, Then the error names the setting
    with pytest.raises(error, match=rf"^{name}: "):
        create_app(connection=redis_url, auth=False, **settings)  # type: ignore[arg-type]
