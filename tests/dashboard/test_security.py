"""Sign-in with a token, server-side sessions, roles, CSRF bound to the session, signed
notices, security headers and the static files, through ASGI."""

from __future__ import annotations

import hashlib

import httpx
import pytest
import redis

from lazarus import Queue
from lazarus._keys import session_key
from lazarus.dashboard.security import CSRF_COOKIE, SESSION_COOKIE
from lazarus.http import create_app

from .conftest import TOKEN, MakeWorker, client_of, csrf_of, dead_letter, sign_in

LIST = "/dashboard/queues/jobs-dlq/dead-letters"


@pytest.mark.parametrize(
    "page", ["/dashboard", LIST, f"{LIST}/abc", "/dashboard/queues/x/bulk/purge"]
)
async def test_every_page_redirects_to_sign_in_when_a_token_is_set(
    secured: httpx.AsyncClient, page: str
) -> None:
    response = await secured.get(page)
    assert response.status_code == 303
    assert response.headers["location"].startswith("/dashboard/login?next=%2Fdashboard")


async def test_sign_in_sets_a_random_session_id_kept_in_redis_not_the_token(
    secured: httpx.AsyncClient, redis_url: str, prefix: str
) -> None:
    # When the operator signs in with the right token
    response = await sign_in(secured)

    # Then they go where they were headed, with an HttpOnly, SameSite=Strict session cookie
    # holding a random id whose digest names a session in Redis (the token is in neither)
    assert response.status_code == 303
    assert response.headers["location"] == LIST + "?page=1"
    cookie = next(
        h for h in response.headers.get_list("set-cookie") if h.startswith(SESSION_COOKIE)
    )
    assert TOKEN not in cookie
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/dashboard" in cookie
    sid = secured.cookies[SESSION_COOKIE]
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    try:
        stored = client.hgetall(session_key(prefix, hashlib.sha256(sid.encode()).hexdigest()))
        assert stored["name"] == "token" and stored["role"] == "admin"
        assert TOKEN not in str(stored) and sid not in str(stored)
        assert client.ttl(session_key(prefix, hashlib.sha256(sid.encode()).hexdigest())) > 0
    finally:
        client.close()
    assert (await secured.get("/dashboard")).status_code == 200


async def test_signing_in_again_replaces_the_session(secured: httpx.AsyncClient) -> None:
    await sign_in(secured)
    first = secured.cookies[SESSION_COOKIE]
    csrf = await csrf_of(secured, "/dashboard")
    await secured.post("/dashboard/login", data={"csrf": csrf, "token": TOKEN, "next": LIST})
    second = secured.cookies[SESSION_COOKIE]

    assert first != second
    secured.cookies.set(SESSION_COOKIE, first, path="/dashboard")
    assert (await secured.get("/dashboard")).status_code == 303


async def test_wrong_token_is_refused_and_sets_no_session(secured: httpx.AsyncClient) -> None:
    response = await sign_in(secured, "guess")

    assert response.status_code == 401
    assert "That token is not one this server was given." in response.text
    assert SESSION_COOKIE not in secured.cookies
    assert (await secured.get("/dashboard")).status_code == 303


@pytest.mark.parametrize("value", [TOKEN, "0" * 43, "x" * 500])
async def test_a_forged_session_cookie_is_not_accepted(
    secured: httpx.AsyncClient, value: str
) -> None:
    secured.cookies.set(SESSION_COOKIE, value, path="/dashboard")
    assert (await secured.get("/dashboard")).status_code == 303


async def test_failed_sign_ins_are_throttled_per_client(secured: httpx.AsyncClient) -> None:
    for _ in range(10):
        assert (await sign_in(secured, "wrong-guess")).status_code == 401

    # Past ten failures in a minute even the right token is refused for a while
    response = await sign_in(secured)
    assert response.status_code == 429
    assert "Too many failed sign-ins" in response.text
    assert SESSION_COOKIE not in secured.cookies


async def test_sign_in_never_redirects_off_the_dashboard(secured: httpx.AsyncClient) -> None:
    csrf = await csrf_of(secured, "/dashboard/login")
    response = await secured.post(
        "/dashboard/login", data={"csrf": csrf, "token": TOKEN, "next": "//evil.example/"}
    )
    assert response.headers["location"] == "/dashboard"


async def test_sign_out_ends_the_session_on_the_server(secured: httpx.AsyncClient) -> None:
    await sign_in(secured)
    sid = secured.cookies[SESSION_COOKIE]
    csrf = await csrf_of(secured, "/dashboard")

    response = await secured.post("/dashboard/logout", data={"csrf": csrf})

    assert response.headers["location"] == "/dashboard/login"
    assert (await secured.get("/dashboard")).status_code == 303
    # A copy of the old cookie is worth nothing either
    secured.cookies.set(SESSION_COOKIE, sid, path="/dashboard")
    assert (await secured.get("/dashboard")).status_code == 303


async def test_a_session_ends_when_its_token_is_no_longer_configured(
    secured: httpx.AsyncClient, redis_url: str, prefix: str
) -> None:
    await sign_in(secured)
    sid = secured.cookies[SESSION_COOKIE]
    other = create_app(connection=redis_url, prefix=prefix, tokens=f"ops:operator:{'o' * 20}")
    try:
        async with client_of(other) as browser:
            browser.cookies.set(SESSION_COOKIE, sid, path="/dashboard")
            assert (await browser.get("/dashboard")).status_code == 303
    finally:
        await other.state.ops.close()


async def test_csrf_value_is_bound_to_the_session(
    secured: httpx.AsyncClient, queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    # Given a dead letter and a signed-in browser
    [dead_id] = await dead_letter(make_worker, queue, [("a", {})])
    await sign_in(secured)

    # When a page elsewhere plants its own CSRF cookie and posts the same value
    planted = "planted-by-another-page"
    secured.cookies.set(CSRF_COOKIE, planted, path="/dashboard")
    response = await secured.post(f"{LIST}/{dead_id}/delete", data={"csrf": planted})

    # Then the post is refused: only the session's own value counts
    assert response.status_code == 403
    assert await dlq.get_dead_letter_count() == 1
    csrf = await csrf_of(secured, f"{LIST}/{dead_id}")
    assert csrf != planted
    assert (await secured.post(f"{LIST}/{dead_id}/delete", data={"csrf": csrf})).status_code == 303
    assert await dlq.get_dead_letter_count() == 0


async def test_a_viewer_reads_but_cannot_act_and_sees_no_payloads(
    viewer: httpx.AsyncClient, queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    [dead_id] = await dead_letter(make_worker, queue, [("a", {"card": "4111-secret"})])
    page = await viewer.get(f"{LIST}/{dead_id}")
    assert page.status_code == 200
    assert "4111-secret" not in page.text
    assert "Payload hidden" in page.text
    csrf = await csrf_of(viewer, f"{LIST}/{dead_id}")
    response = await viewer.post(f"{LIST}/{dead_id}/delete", data={"csrf": csrf})
    assert response.status_code == 403
    assert "needs the operator role" in response.text
    assert await dlq.get_dead_letter_count() == 1


async def test_a_notice_in_a_link_is_not_shown_unless_the_server_signed_it(
    client: httpx.AsyncClient, queue: Queue, make_worker: MakeWorker
) -> None:
    forged = await client.get(f"{LIST}?flash=Your+account+is+locked,+call+555-0100")
    assert "555-0100" not in forged.text

    [dead_id] = await dead_letter(make_worker, queue, [("a", {})])
    csrf = await csrf_of(client, f"{LIST}/{dead_id}")
    response = await client.post(f"{LIST}/{dead_id}/delete", data={"csrf": csrf})
    shown = await client.get(response.headers["location"])
    assert f"Deleted dead letter {dead_id}." in shown.text


async def test_without_a_token_the_login_page_goes_straight_to_the_dashboard(
    client: httpx.AsyncClient,
) -> None:
    response = await client.get("/dashboard/login")
    assert response.status_code == 303
    assert response.headers["location"] == "/dashboard"


async def test_actions_without_a_session_are_forbidden_even_with_csrf(
    secured: httpx.AsyncClient, queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    [dead_id] = await dead_letter(make_worker, queue, [("a", {})])
    csrf = await csrf_of(secured, "/dashboard/login")

    response = await secured.post(f"{LIST}/{dead_id}/delete", data={"csrf": csrf})

    assert response.status_code == 403
    assert await dlq.get_dead_letter_count() == 1


@pytest.mark.parametrize("csrf", [None, "", "wrong"])
async def test_post_without_the_right_csrf_token_is_forbidden_and_changes_nothing(
    client: httpx.AsyncClient,
    queue: Queue,
    dlq: Queue,
    make_worker: MakeWorker,
    csrf: str | None,
) -> None:
    # Given a dead letter, and a browser that has the CSRF cookie
    [dead_id] = await dead_letter(make_worker, queue, [("a", {})])
    await client.get(LIST)

    # When forms are posted without the token, or with another one
    data = {} if csrf is None else {"csrf": csrf}
    responses = [
        await client.post(f"{LIST}/{dead_id}/replay", data=data),
        await client.post(f"{LIST}/{dead_id}/delete", data=data),
        await client.post("/dashboard/queues/jobs-dlq/bulk/purge", data=data),
    ]

    # Then each is refused with 403 and the dead letter is still there
    assert [r.status_code for r in responses] == [403, 403, 403]
    assert "CSRF token is missing or wrong" in responses[0].text
    assert await dlq.get_dead_letter_count() == 1


async def test_post_with_a_made_up_csrf_value_is_forbidden(
    client: httpx.AsyncClient, queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    [dead_id] = await dead_letter(make_worker, queue, [("a", {})])
    response = await client.post(f"{LIST}/{dead_id}/delete", data={"csrf": "anything"})
    assert response.status_code == 403
    assert await dlq.get_dead_letter_count() == 1


async def test_without_auth_a_browser_gets_one_session_on_its_first_page(
    client: httpx.AsyncClient,
) -> None:
    first = await client.get("/dashboard")
    cookie = next(h for h in first.headers.get_list("set-cookie") if h.startswith(SESSION_COOKIE))
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie
    second = await client.get("/dashboard/queues/jobs-dlq/bulk/replay")
    assert "set-cookie" not in second.headers  # the same session for the whole visit


async def test_pages_carry_security_headers(client: httpx.AsyncClient) -> None:
    response = await client.get("/dashboard")
    assert "default-src 'none'" in response.headers["content-security-policy"]
    assert response.headers["x-frame-options"] == "DENY"
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["cache-control"] == "no-store"


async def test_static_serves_only_the_whitelisted_stylesheet(client: httpx.AsyncClient) -> None:
    css = await client.get("/dashboard/static/dashboard.css")
    assert css.status_code == 200
    assert css.headers["content-type"].startswith("text/css")
    assert ".badge" in css.text
    for name in ("views.py", "..%2Fviews.py", "..%2F..%2F__init__.py", "missing.css"):
        assert (await client.get(f"/dashboard/static/{name}")).status_code == 404, name
