"""Route classes that apply the dashboard's checks to every route of a router.

:class:`CsrfRoute` (public pages: sign-in, static files) refuses POSTs without the CSRF token;
:class:`SignedInRoute` (everything else) also sends a browser that is not signed in to the
sign-in page. Both add the security headers, set the CSRF cookie when a page created it, and
turn an unreachable Redis into a 503 page instead of a traceback.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any
from urllib.parse import quote

from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from .._connection import TRANSIENT_ERRORS
from ..http.auth import ANONYMOUS, Role
from ..queue import Queue
from . import sessions
from .render import render
from .security import (
    CSRF_COOKIE,
    HEADERS,
    LOGIN_PATH,
    SESSION_COOKIE,
    csrf_ok,
    current_session,
    operators,
    set_cookie,
    signed_in,
)
from .sessions import Session

Handler = Callable[[Request], Coroutine[Any, Any, Response]]


def error_page(request: Request, status_code: int, title: str, message: str) -> Response:
    """An HTML error page with the dashboard's header."""
    context = {"title": title, "message": message, "status_code": status_code}
    return render(request, "error.html", context, status_code=status_code)


def no_such(request: Request, what: str) -> Response:
    """A 404 page naming what was not found."""
    return error_page(request, 404, "Not found", what)


def find_queue(request: Request, name: str) -> Queue | None:
    """The queue called ``name``, or ``None`` when that is not a valid queue name."""
    try:
        return operators(request).queue(name)
    except (ValueError, TypeError):
        return None


async def existing_queue(request: Request, name: str) -> Queue | None:
    """The queue called ``name`` if it exists (a job was added or a worker started on it),
    else ``None``: a mistyped address gets a "no such queue" page, not an empty one."""
    queue = find_queue(request, name)
    if queue is None or not await queue.client.sismember(queue.keys.registry, name):
        return None
    return queue


def _finish(request: Request, response: Response) -> Response:
    for header, text in HEADERS.items():
        response.headers.setdefault(header, text)
    csrf: str | None = getattr(request.state, "csrf", None)
    if csrf is not None and request.cookies.get(CSRF_COOKIE) != csrf:
        set_cookie(request, response, CSRF_COOKIE, csrf)
    fresh: Session | None = getattr(request.state, "fresh_session", None)
    if fresh is not None:
        set_cookie(request, response, SESSION_COOKIE, fresh.sid)
    return response


async def _load_session(request: Request) -> None:
    """Find the request's session (an anonymous one is made when authentication is off) and
    record who is asking, for the pages and the audit trail."""
    session = await sessions.load(request, request.cookies.get(SESSION_COOKIE, ""))
    if session is None and not sessions.settings_of(request).auth:
        session = await sessions.create(request, ANONYMOUS)
        request.state.fresh_session = session
    request.state.session = session
    if session is not None:
        request.state.principal = session.principal


class CsrfRoute(APIRoute):
    """A dashboard route whose POSTs must carry the CSRF token."""

    requires_sign_in = False
    minimum_role = Role.VIEWER
    """The role a GET needs; a POST needs at least ``operator``."""

    def get_route_handler(self) -> Handler:
        handler = super().get_route_handler()

        async def guarded(request: Request) -> Response:
            return _finish(request, await self._checked(request, handler))

        return guarded

    async def _checked(self, request: Request, handler: Handler) -> Response:
        try:
            await _load_session(request)
        except TRANSIENT_ERRORS as exc:
            request.state.session = None
            return error_page(request, 503, "Redis is unavailable", str(exc))
        if self.requires_sign_in and not signed_in(request):
            if request.method != "GET":
                return error_page(request, 403, "Forbidden", "Sign in first.")
            here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            return RedirectResponse(f"{LOGIN_PATH}?next={quote(here, safe='')}", 303)
        if request.method == "POST" and not await csrf_ok(request):
            message = "The form's CSRF token is missing or wrong. Reload the page and try again."
            return error_page(request, 403, "Forbidden", message)
        session = current_session(request)
        needed = max(self.minimum_role, Role.VIEWER if request.method == "GET" else Role.OPERATOR)
        if self.requires_sign_in and session is not None and not session.principal.may(needed):
            message = (
                f"This needs the {needed} role; you are signed in as {session.principal.role}."
            )
            return error_page(request, 403, "Forbidden", message)
        try:
            return await handler(request)
        except TRANSIENT_ERRORS as exc:
            # RedisUnavailableError, or a raw redis-py error from a call that does not map it
            return error_page(request, 503, "Redis is unavailable", str(exc))


class SignedInRoute(CsrfRoute):
    """A dashboard route that also requires the operator to be signed in."""

    requires_sign_in = True


class AdminRoute(SignedInRoute):
    """A dashboard route for admins only."""

    minimum_role = Role.ADMIN
