"""Sign-in and CSRF protection of the dashboard, enforced by the route classes of its routers.

Sign-in: when the app has a token, the operator pastes it into ``/dashboard/login`` once; the
dashboard then sets the ``lazarus_session`` cookie to ``HMAC-SHA256(key=token,
msg=SESSION_MESSAGE)`` in hex. The token itself never leaves the server, and changing the
token signs every browser out.

CSRF: the ``lazarus_csrf`` cookie holds a random value set on the first page view; every form
echoes it in a hidden ``csrf`` field, and every POST whose field and cookie differ is refused
with 403 (double-submit cookie; both cookies are also ``SameSite=Strict``).

The checks are applied by the route classes in :mod:`lazarus.dashboard.routing`, so that no
page can forget one.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from starlette.requests import Request
from starlette.responses import Response

from ..operators import Operators

SESSION_COOKIE = "lazarus_session"
CSRF_COOKIE = "lazarus_csrf"
CSRF_FIELD = "csrf"
SESSION_MESSAGE = b"lazarus-dashboard-session-v1"
COOKIE_PATH = "/dashboard"
LOGIN_PATH = "/dashboard/login"
HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
}


def operators(request: Request) -> Operators:
    """The app's :class:`~lazarus.operators.Operators`."""
    ops: Operators = request.app.state.ops
    return ops


def session_value(token: str) -> str:
    """The session cookie's value for ``token``: an HMAC of a fixed message, keyed by it."""
    return hmac.new(token.encode(), SESSION_MESSAGE, hashlib.sha256).hexdigest()


def signed_in(request: Request) -> bool:
    """Whether the request carries a valid session cookie (always true without a token)."""
    token = operators(request).token
    if token is None:
        return True
    presented = request.cookies.get(SESSION_COOKIE, "")
    return hmac.compare_digest(presented.encode(), session_value(token).encode())


def csrf_token(request: Request) -> str:
    """This browser's CSRF value: the cookie's, or a new one set on the response."""
    value: str | None = getattr(request.state, "csrf", None)
    if value is None:
        value = request.cookies.get(CSRF_COOKIE) or secrets.token_urlsafe(32)
        request.state.csrf = value
    return value


def set_cookie(request: Request, response: Response, name: str, value: str) -> None:
    """Set a dashboard cookie: HttpOnly, SameSite=Strict, Secure over HTTPS."""
    response.set_cookie(
        name,
        value,
        path=COOKIE_PATH,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


def safe_next(target: str | None) -> str:
    """``target`` if it is a dashboard path (no open redirects), else the overview."""
    if (
        target
        and target.startswith("/dashboard")
        and not target.startswith("//")
        and "\\" not in target
    ):
        return target
    return "/dashboard"


async def csrf_ok(request: Request) -> bool:
    """Whether a POST's ``csrf`` field equals the browser's CSRF cookie."""
    cookie = request.cookies.get(CSRF_COOKIE, "")
    field = (await request.form()).get(CSRF_FIELD, "")
    if not cookie or not isinstance(field, str) or not field:
        return False
    return hmac.compare_digest(cookie.encode(), field.encode())
