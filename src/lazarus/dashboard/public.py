"""The pages anyone may load: ``/`` (a redirect), sign-in and sign-out, and the static files."""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from . import sessions
from .render import render
from .routing import CsrfRoute
from .security import SESSION_COOKIE, current_session, safe_next, set_cookie, signed_in

router = APIRouter(route_class=CsrfRoute, include_in_schema=False)

# The only files /dashboard/static/ serves, by name: nothing else in the package is reachable.
STATIC_FILES = {"dashboard.css": "text/css; charset=utf-8"}


@router.get("/")
async def root() -> RedirectResponse:
    """The dashboard is the app's home page."""
    return RedirectResponse("/dashboard", status_code=307)


@router.get("/dashboard/static/{name}")
async def static(request: Request, name: str) -> Response:
    """A vendored static file, from the whitelist :data:`STATIC_FILES`."""
    media_type = STATIC_FILES.get(name)
    if media_type is None:
        return Response("not found", status_code=404, media_type="text/plain")
    body = resources.files("lazarus.dashboard").joinpath("static").joinpath(name).read_bytes()
    return Response(body, media_type=media_type, headers={"Cache-Control": "max-age=300"})


@router.get("/dashboard/login")
async def login_form(request: Request) -> Response:
    """The sign-in form. ``?token=`` signs in at once (the link ``lazarus serve`` prints), and
    a browser already signed in goes straight on."""
    target = safe_next(request.query_params.get("next"))
    token = request.query_params.get("token")
    if token:
        return await _sign_in(request, token, target)
    if signed_in(request):
        return RedirectResponse(target, status_code=303)
    return render(request, "login.html", {"next": target, "error": ""})


@router.post("/dashboard/login")
async def login(request: Request) -> Response:
    """Check the pasted token; on success start a new session."""
    form = await request.form()
    target = safe_next(str(form.get("next", "")))
    return await _sign_in(request, str(form.get("token", "")).strip(), target)


async def _sign_in(request: Request, presented: str, target: str) -> Response:
    settings = sessions.settings_of(request)
    if not settings.auth:
        return RedirectResponse(target, status_code=303)
    client = request.client.host if request.client else "unknown"
    wait = settings.throttle.retry_after(client)
    if wait:
        context = {"next": target, "error": f"Too many failed sign-ins. Try again in {wait} s."}
        return render(request, "login.html", context, status_code=429)
    principal = settings.credentials.authenticate(presented) if presented else None
    if principal is None:
        settings.throttle.failed(client)
        context = {"next": target, "error": "That token is not one this server was given."}
        return render(request, "login.html", context, status_code=401)
    previous = current_session(request)
    if previous is not None:
        await sessions.revoke(request, previous.sid)
    session = await sessions.create(request, principal)
    response = RedirectResponse(target, status_code=303)
    set_cookie(request, response, SESSION_COOKIE, session.sid)
    return response


@router.post("/dashboard/logout")
async def logout(request: Request) -> Response:
    """End the session, on the server and in the browser."""
    session = current_session(request)
    if session is not None:
        await sessions.revoke(request, session.sid)
    response = RedirectResponse("/dashboard/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/dashboard", httponly=True, samesite="strict")
    return response
