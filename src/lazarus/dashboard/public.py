"""The pages anyone may load: ``/`` (a redirect), sign-in and sign-out, and the static files."""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from .render import render
from .routing import CsrfRoute
from .security import SESSION_COOKIE, operators, safe_next, session_value, set_cookie, signed_in

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
    """The sign-in form; straight on to the dashboard when no token is needed."""
    target = safe_next(request.query_params.get("next"))
    if operators(request).token is None or signed_in(request):
        return RedirectResponse(target, status_code=303)
    return render(request, "login.html", {"next": target, "error": ""})


@router.post("/dashboard/login")
async def login(request: Request) -> Response:
    """Check the pasted token; on success set the session cookie (an HMAC, not the token)."""
    form = await request.form()
    target = safe_next(str(form.get("next", "")))
    presented = str(form.get("token", "")).strip()
    ops = operators(request)
    if ops.token is None:
        return RedirectResponse(target, status_code=303)
    if not presented or not ops.token_matches(presented):
        context = {"next": target, "error": "That token is not the one this server was given."}
        return render(request, "login.html", context, status_code=401)
    response = RedirectResponse(target, status_code=303)
    set_cookie(request, response, SESSION_COOKIE, session_value(ops.token))
    return response


@router.post("/dashboard/logout")
async def logout(request: Request) -> Response:
    """Forget the session cookie."""
    response = RedirectResponse("/dashboard/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/dashboard", httponly=True, samesite="strict")
    return response
