"""OJS error bodies and the headers every OJS response carries.

An error is ``{"error": {"code", "message", "retryable", "request_id", "type", "hint",
"docs_url"}}`` with the content type ``application/openjobspec+json``; every response has
``OJS-Version`` and ``X-Request-Id``.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from .._connection import cluster_unreachable
from ..http._deps import REDIS_DOWN, ApiError

log = logging.getLogger("lazarus.ojs")

MEDIA_TYPE = "application/openjobspec+json"
SPEC_VERSION = "1.0"
DOCS_URL = "https://openjobspec.org/spec/ojs-http-binding#error-handling"

# The error type a client can switch on, by code: validation errors share one.
_TYPES = {
    "invalid_request": "validation_error",
    "invalid_payload": "validation_error",
    "schema_validation": "validation_error",
    "not_found": "not_found",
    "duplicate": "conflict",
    "conflict": "conflict",
    "unauthorized": "authentication_error",
    "backend_error": "backend_error",
    "internal_error": "backend_error",
}
_HINTS = {
    "not_found": "Check the id; jobs removed by retention or purged are gone for good.",
    "conflict": "The job is not in a state that allows this operation; GET it to see why.",
    "duplicate": "A job with this id, or this unique key, exists already (the details say "
    "which); omit the id to get a new one.",
}


class OjsError(Exception):
    """An OJS error response an endpoint chose to send."""

    def __init__(
        self, status: int, code: str, message: str, *, retryable: bool = False,
        details: dict[str, Any] | None = None, hint: str | None = None,
    ) -> None:  # fmt: skip
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.retryable = retryable
        self.details = details
        self.hint = hint  # else the code's


def ojs_json(body: Any, status: int = 200) -> JSONResponse:
    """A JSON response with OJS's media type."""
    return JSONResponse(body, status_code=status, media_type=MEDIA_TYPE)


def error_body(request: Request, error: OjsError) -> JSONResponse:
    """The OJS error body of ``error`` for ``request``."""
    detail: dict[str, Any] = {
        "code": error.code,
        "type": _TYPES.get(error.code, error.code),
        "message": error.message,
        "retryable": error.retryable,
        "request_id": request_id(request),
        "hint": error.hint or _HINTS.get(error.code, "See the OJS HTTP binding's error catalog."),
        "docs_url": DOCS_URL,
    }
    if error.details:
        detail["details"] = error.details
    return ojs_json({"error": detail}, error.status)


def request_id(request: Request) -> str:
    """This request's id, made on first use."""
    rid: str | None = getattr(request.state, "ojs_request_id", None)
    if rid is None:
        rid = f"req_{uuid.uuid4()}"
        request.state.ojs_request_id = rid
    return rid


async def _ojs_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, OjsError)
    return error_body(request, exc)


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)  # the token check shared with the rest of the API
    response = error_body(request, OjsError(exc.status, exc.code, exc.message))
    response.headers.update(exc.headers or {})
    return response


async def _validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    fields = [".".join(str(p) for p in e.get("loc", ())[1:]) for e in exc.errors()]
    message = "; ".join(
        f"{field or 'request'}: {e.get('msg')}" for field, e in zip(fields, exc.errors())
    )
    details = {"field": fields[0]} if fields and fields[0] else None
    return error_body(request, OjsError(400, "invalid_request", message or "invalid request",
                                        details=details))  # fmt: skip


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    code = {404: "not_found", 405: "invalid_request"}.get(exc.status_code, "invalid_request")
    return error_body(request, OjsError(exc.status_code, code, str(exc.detail)))


async def _unexpected(request: Request, exc: Exception) -> Response:
    if isinstance(exc, REDIS_DOWN) or cluster_unreachable(exc):
        error = OjsError(503, "backend_error", str(exc), retryable=True)
    else:
        log.error("unexpected error in an OJS route", exc_info=exc)
        error = OjsError(500, "internal_error", "internal error; see the server's log")
    return error_body(request, error)


def install(app: FastAPI) -> None:
    """Give ``app`` OJS error bodies and OJS's response headers."""
    app.add_exception_handler(OjsError, _ojs_error)
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)

    @app.middleware("http")
    async def headers(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        """OJS's headers on every response of the binding."""
        response = await call_next(request)
        response.headers["OJS-Version"] = SPEC_VERSION
        response.headers["X-Request-Id"] = request_id(request)
        return response
