"""Sign-in with the API token, the session cookie, CSRF protection, security headers and the
static files, through ASGI."""

from __future__ import annotations

import hashlib
import hmac

import httpx
import pytest

from lazarus import Queue
from lazarus.dashboard.security import CSRF_COOKIE, SESSION_COOKIE, SESSION_MESSAGE

from .conftest import TOKEN, MakeWorker, csrf_of, dead_letter

LIST = "/dashboard/queues/jobs-dlq/dead-letters"


async def sign_in(client: httpx.AsyncClient, token: str = TOKEN) -> httpx.Response:
    csrf = await csrf_of(client, "/dashboard/login")
    return await client.post(
        "/dashboard/login", data={"csrf": csrf, "token": token, "next": LIST + "?page=1"}
    )


@pytest.mark.parametrize(
    "page", ["/dashboard", LIST, f"{LIST}/abc", "/dashboard/queues/x/bulk/purge"]
)
async def test_every_page_redirects_to_sign_in_when_a_token_is_set(
    secured: httpx.AsyncClient, page: str
) -> None:
    response = await secured.get(page)
    assert response.status_code == 303
    assert response.headers["location"].startswith("/dashboard/login?next=%2Fdashboard")


async def test_sign_in_sets_an_httponly_strict_cookie_holding_an_hmac_not_the_token(
    secured: httpx.AsyncClient,
) -> None:
    # When the operator signs in with the right token
    response = await sign_in(secured)

    # Then they go where they were headed, with a session cookie that is the HMAC of a fixed
    # message keyed by the token, HttpOnly and SameSite=Strict
    assert response.status_code == 303
    assert response.headers["location"] == LIST + "?page=1"
    cookie = next(
        h for h in response.headers.get_list("set-cookie") if h.startswith(SESSION_COOKIE)
    )
    expected = hmac.new(TOKEN.encode(), SESSION_MESSAGE, hashlib.sha256).hexdigest()
    assert cookie.startswith(f"{SESSION_COOKIE}={expected};")
    assert TOKEN not in cookie
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/dashboard" in cookie
    assert (await secured.get("/dashboard")).status_code == 200


async def test_wrong_token_is_refused_and_sets_no_session(secured: httpx.AsyncClient) -> None:
    response = await sign_in(secured, "guess")

    assert response.status_code == 401
    assert "That token is not the one this server was given." in response.text
    assert SESSION_COOKIE not in secured.cookies
    assert (await secured.get("/dashboard")).status_code == 303


async def test_a_forged_session_cookie_is_not_accepted(secured: httpx.AsyncClient) -> None:
    secured.cookies.set(SESSION_COOKIE, TOKEN, path="/dashboard")
    assert (await secured.get("/dashboard")).status_code == 303


async def test_sign_in_never_redirects_off_the_dashboard(secured: httpx.AsyncClient) -> None:
    csrf = await csrf_of(secured, "/dashboard/login")
    response = await secured.post(
        "/dashboard/login", data={"csrf": csrf, "token": TOKEN, "next": "//evil.example/"}
    )
    assert response.headers["location"] == "/dashboard"


async def test_sign_out_forgets_the_session(secured: httpx.AsyncClient) -> None:
    await sign_in(secured)
    csrf = secured.cookies[CSRF_COOKIE]

    response = await secured.post("/dashboard/logout", data={"csrf": csrf})

    assert response.headers["location"] == "/dashboard/login"
    assert (await secured.get("/dashboard")).status_code == 303


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
    await csrf_of(client, LIST)

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


async def test_post_without_the_csrf_cookie_is_forbidden(
    client: httpx.AsyncClient, queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    [dead_id] = await dead_letter(make_worker, queue, [("a", {})])
    response = await client.post(f"{LIST}/{dead_id}/delete", data={"csrf": "anything"})
    assert response.status_code == 403
    assert await dlq.get_dead_letter_count() == 1


async def test_csrf_cookie_is_set_once_and_echoed_in_every_form(
    client: httpx.AsyncClient,
) -> None:
    first = await client.get("/dashboard")
    cookie = next(h for h in first.headers.get_list("set-cookie") if h.startswith(CSRF_COOKIE))
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie
    second = await client.get("/dashboard/queues/jobs-dlq/bulk/replay")
    assert "set-cookie" not in second.headers  # the same token for the whole session


async def test_pages_carry_security_headers(client: httpx.AsyncClient) -> None:
    response = await client.get("/dashboard")
    assert "default-src 'none'" in response.headers["content-security-policy"]
    assert response.headers["x-frame-options"] == "DENY"
    assert response.headers["x-content-type-options"] == "nosniff"


async def test_static_serves_only_the_whitelisted_stylesheet(client: httpx.AsyncClient) -> None:
    css = await client.get("/dashboard/static/dashboard.css")
    assert css.status_code == 200
    assert css.headers["content-type"].startswith("text/css")
    assert ".badge" in css.text
    for name in ("views.py", "..%2Fviews.py", "..%2F..%2F__init__.py", "missing.css"):
        assert (await client.get(f"/dashboard/static/{name}")).status_code == 404, name
