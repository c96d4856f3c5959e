"""Sign-in, CSRF protection and signed notices of the dashboard, enforced by the route classes
of its routers.

Sign-in: the operator pastes a token into ``/dashboard/login`` once; the dashboard creates a
server-side session (:mod:`lazarus.dashboard.sessions`) and sets the ``lazarus_session`` cookie
to its random id. The token never leaves the server and is never stored.

CSRF: every form echoes the session's own CSRF value in a hidden ``csrf`` field, and a POST
whose field differs is refused with 403; the value lives on the server, so another page cannot
plant one. Before sign-in (the sign-in form itself) a ``lazarus_csrf`` cookie is echoed instead
(double submit). All cookies are ``HttpOnly`` and ``SameSite=Strict``, and the guard
(:mod:`lazarus.http.guard`) refuses unsafe requests from another origin before any of this.

Notices: the message shown after an action travels in the redirect's query string with an HMAC
under a key of the app's, so a link cannot put words in the dashboard's mouth.

The checks are applied by the route classes in :mod:`lazarus.dashboard.routing`, so that no
page can forget one.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from starlette.requests import Request
from starlette.responses import Response

from ..http.auth import ANONYMOUS
from ..operators import Operators
from .sessions import Session

SESSION_COOKIE = "lazarus_session"
CSRF_COOKIE = "lazarus_csrf"
CSRF_FIELD = "csrf"
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


def current_session(request: Request) -> Session | None:
    """The request's session, as the route class loaded it."""
    session: Session | None = getattr(request.state, "session", None)
    return session


def signed_in(request: Request) -> bool:
    """Whether the request belongs to a live session."""
    return current_session(request) is not None


def csrf_token(request: Request) -> str:
    """The value this browser's forms must echo: its session's, or before sign-in the CSRF
    cookie's (a new one is set on the response)."""
    session = current_session(request)
    if session is not None:
        return session.csrf
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
    """Whether a POST's ``csrf`` field equals its session's CSRF value (before sign-in: the
    browser's CSRF cookie)."""
    session = current_session(request)
    expected = session.csrf if session is not None else request.cookies.get(CSRF_COOKIE, "")
    field = (await request.form()).get(CSRF_FIELD, "")
    if not expected or not isinstance(field, str) or not field:
        return False
    return hmac.compare_digest(expected.encode(), field.encode())


def _flash_mac(request: Request, message: str, kind: str) -> str:
    key: bytes = request.app.state.flash_key
    return hmac.new(key, f"{kind}:{message}".encode(), hashlib.sha256).hexdigest()[:32]


def flash_params(request: Request, message: str, *, error: bool = False) -> dict[str, str]:
    """The query parameters that show ``message`` on the next page."""
    kind = "error" if error else "ok"
    return {"flash": message, "kind": kind, "fsig": _flash_mac(request, message, kind)}


def flash_of(request: Request) -> tuple[str, str]:
    """The notice the query string carries, ``(message, kind)``, when its signature holds."""
    message = request.query_params.get("flash", "")
    kind = "error" if request.query_params.get("kind") == "error" else "ok"
    signature = request.query_params.get("fsig", "")
    if not message or not hmac.compare_digest(signature, _flash_mac(request, message, kind)):
        return "", "ok"
    return message, kind


def actor(request: Request, typed: str = "") -> str:
    """Who the timeline and the audit name for an action: ``operator:<name>`` of the signed-in
    credential; without authentication, the name typed in the form (else ``dashboard``)."""
    session = current_session(request)
    return (session.principal if session is not None else ANONYMOUS).actor(typed, "dashboard")
