"""The JSON API: queues and their limits, jobs, dead letters (of one dead letter queue, and
across every dead letter queue), background bulk operations, health and metrics.

``router`` assembles the route modules; :func:`install_error_handlers` makes every error a
JSON body ``{"error": {"code": ..., "message": ...}}`` with a stable code:

=====  ======================  ==============================================================
422    ``invalid_parameter``   a bad path, query or body value; the message names the field
422    ``filter_required``     a bulk operation without a filter (pass ``all=true``)
401    ``unauthorized``        missing or wrong bearer token on a state-changing route
404    ``not_found``           no such job, dead letter, queue or route
405    ``method_not_allowed``  the route exists, the method does not
409    ``not_a_dead_letter``   the job exists but is not a dead letter
409    ``job_state_conflict``  the job is not in a state that allows the operation
409    ``job_exists``          a job with this id already exists
409    ``lock_lost``           the job's lock is held by someone else
503    ``redis_unavailable``   Redis cannot be reached
500    ``internal_error``      a bug: anything else
=====  ======================  ==============================================================
"""

from __future__ import annotations

import logging

from fastapi import APIRouter, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from redis.exceptions import RedisClusterException
from starlette.exceptions import HTTPException as StarletteHTTPException

from .._connection import cluster_unreachable
from ..errors import (
    JobExistsError,
    JobNotFoundError,
    JobStateError,
    LazarusError,
    LockLostError,
    NotADeadLetterError,
)
from . import (
    all_dead_letters,
    audit,
    bulk,
    cancel,
    changes,
    dead_letters,
    lifecycle,
    limits,
    metrics,
    queues,
    retry,
    throughput,
    upkeep,
    workers,
)
from ._deps import REDIS_DOWN, ApiError

log = logging.getLogger("lazarus.http")

router = APIRouter()
router.include_router(dead_letters.router, prefix="/api/dlq")
router.include_router(all_dead_letters.router)
router.include_router(bulk.router)
router.include_router(lifecycle.router)
router.include_router(queues.router)
router.include_router(retry.router)
router.include_router(changes.router)
router.include_router(cancel.router)
router.include_router(limits.router)
router.include_router(workers.router)
router.include_router(throughput.router)
router.include_router(queues.health_router)
router.include_router(metrics.router)
router.include_router(audit.router)
router.include_router(upkeep.router)

_LIBRARY_ERRORS: list[tuple[type[LazarusError], int, str]] = [
    (JobNotFoundError, 404, "not_found"),
    (NotADeadLetterError, 409, "not_a_dead_letter"),
    (JobStateError, 409, "job_state_conflict"),
    (JobExistsError, 409, "job_exists"),
    (LockLostError, 409, "lock_lost"),
]
_HTTP_CODES = {404: "not_found", 405: "method_not_allowed"}


def error_response(
    status: int,
    code: str,
    message: str,
    *,
    field: str | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    """The JSON error body every error of the API has."""
    detail: dict[str, str] = {"code": code, "message": message}
    if field is not None:
        detail["field"] = field
    return JSONResponse({"error": detail}, status_code=status, headers=headers)


async def _api_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return error_response(exc.status, exc.code, exc.message, field=exc.field, headers=exc.headers)


async def _validation_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    parts, field = [], None
    for error in exc.errors():
        loc = [str(p) for p in error.get("loc", ())]
        if error.get("type") == "json_invalid":  # its loc is ("body", <character position>)
            reason = error.get("ctx", {}).get("error", "cannot be parsed")
            at = f" at character {loc[1]}" if len(loc) > 1 else ""
            parts.append(f"body: not valid JSON: {reason}{at}")
            field = field or "body"
            continue
        name = ".".join(loc[1:]) or (loc[0] if loc else "request")
        where = f" ({loc[0]})" if len(loc) > 1 else ""
        parts.append(f"{name}{where}: {error.get('msg', 'invalid')}")
        field = field or name
    message = "; ".join(parts) or "invalid request"
    return error_response(422, "invalid_parameter", message, field=field)


async def _library_error(_request: Request, exc: Exception) -> JSONResponse:
    for kind, status, code in _LIBRARY_ERRORS:
        if isinstance(exc, kind):
            return error_response(status, code, str(exc))
    if isinstance(exc, REDIS_DOWN):
        return error_response(503, "redis_unavailable", str(exc))
    log.error("unexpected lazarus error", exc_info=exc)
    return error_response(500, "internal_error", f"{type(exc).__name__}: {exc}")


async def _http_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 400:  # FastAPI's "error parsing the body": a bad parameter too
        return error_response(422, "invalid_parameter", f"body: {exc.detail}", field="body")
    code = _HTTP_CODES.get(exc.status_code, f"http_{exc.status_code}")
    headers = dict(exc.headers) if exc.headers else None
    return error_response(exc.status_code, code, str(exc.detail), headers=headers)


async def _internal_error(_request: Request, exc: Exception) -> JSONResponse:
    if cluster_unreachable(exc):  # a Redis Cluster with no node reachable: Redis is down
        return error_response(503, "redis_unavailable", str(exc))
    if isinstance(exc, RedisClusterException):  # handled here, so not logged on the way out
        log.error("unexpected Redis Cluster error", exc_info=exc)
    return error_response(500, "internal_error", "internal error; see the server's log")


def install_error_handlers(app: FastAPI) -> None:
    """Map lazarus errors, bad parameters, unknown routes and Redis outages to JSON error
    responses ``{"error": {"code", "message"}}`` (see the module's table)."""
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(LazarusError, _library_error)
    for kind in REDIS_DOWN:
        app.add_exception_handler(kind, _library_error)
    app.add_exception_handler(RedisClusterException, _internal_error)  # handled, not re-raised
    app.add_exception_handler(Exception, _internal_error)
