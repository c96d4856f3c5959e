"""The OJS HTTP routes: manifest, health, jobs, workers and events (Level 0 and 1)."""

from __future__ import annotations

import json
import math
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response

from .. import __version__
from ..http._deps import require_token
from . import job_actions, jobs, nack, workers
from .backend import Backend
from .envelope import (
    DEFAULT_VISIBILITY_MS,
    MAX_NAME,
    MAX_VISIBILITY_MS,
    UUIDV7_RE,
    parse_submission,
    queue_name,
    storable,
)
from .errors import MEDIA_TYPE, OjsError, ojs_json

router = APIRouter()
_AUTH = [Depends(require_token)]
_JSON_TYPES = ("application/openjobspec+json", "application/json")


def backend_of(request: Request) -> Backend:
    """The OJS backend of the app serving ``request``."""
    backend: Backend = request.app.state.ojs
    return backend


OjsBackend = Annotated[Backend, Depends(backend_of)]


async def json_body(request: Request, *, optional: bool = False) -> Any:
    """The request's JSON body: 400 ``invalid_request`` for another content type, a body
    nested too deeply to parse or a number that is not finite (naming where), 400
    ``invalid_payload`` for a body that is not JSON."""
    raw = await request.body()
    if not raw and optional:
        return {}
    kind = request.headers.get("content-type", "application/json").split(";")[0].strip()
    if kind not in _JSON_TYPES:
        raise OjsError(
            400, "invalid_request", f"unsupported content type {kind!r}; use {MEDIA_TYPE}"
        )
    numbers = _Numbers()
    try:
        body = json.loads(raw, parse_float=numbers.parse, parse_constant=numbers.constant)
    except RecursionError:
        raise OjsError(400, "invalid_request", "the request body is nested too deeply") from None
    except ValueError:
        raise OjsError(400, "invalid_payload", "the request body is not valid JSON") from None
    if numbers.odd:
        raise OjsError(400, "invalid_request", f"{_non_finite_path(body)} is {numbers.odd[0]}, "
                       "but a JSON number must be finite")  # fmt: skip
    return body


class _Numbers:
    """Hooks for ``json.loads``, which lets NaN, Infinity and numbers too large for a float
    (``1e400``) through: they note them, for nothing can store or show them again."""

    def __init__(self) -> None:
        self.odd: list[str] = []

    def parse(self, text: str) -> float:
        value = float(text)
        if math.isinf(value):
            self.odd.append(text)
        return value

    def constant(self, text: str) -> float:
        self.odd.append(text)
        return float(text)


def _non_finite_path(body: Any) -> str:
    """Where in ``body`` its first NaN or infinity is: ``meta.x``, ``args[0]``."""
    stack: list[tuple[str, Any]] = [("", body)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            return path or "the request body"
        if isinstance(value, dict):
            children = [(f"{path}.{k}" if path else k, v) for k, v in value.items()]
        elif isinstance(value, list):
            children = [(f"{path}[{i}]", v) for i, v in enumerate(value)]
        else:
            continue
        stack.extend(reversed(children))  # the first child on top: in the body's order
    return "the request body"


def _object(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise OjsError(400, "invalid_request", "the request body must be a JSON object")
    return body


def _worker_id(body: dict[str, Any]) -> str | None:
    """The ``worker_id`` the body names, or ``None``."""
    value = body.get("worker_id")
    if value is None or value == "":
        return None
    if not isinstance(value, str) or len(value) > MAX_NAME:
        raise OjsError(
            400, "invalid_request", f"worker_id must be a string of at most {MAX_NAME} characters"
        )
    storable(value, "worker_id")  # kept in the job's record
    return value


def _job_id(value: object, field: str = "job_id") -> str:
    if not isinstance(value, str) or not value or len(value) > 200 or " " in value:
        raise OjsError(400, "invalid_request", f"{field} must be a job id string")
    storable(value, field)  # a lone surrogate: no key can be made of it
    return value


@router.get("/manifest")
async def manifest() -> Response:
    """What this server implements."""
    return ojs_json({
        "specversion": "1.0",
        "implementation": {"name": "lazarus", "version": __version__, "language": "python",
                           "homepage": "https://github.com/lazarus-queue/lazarus"},
        "conformance_level": 4,
        "protocols": ["http"],
        "backend": "redis",
        # The unique key is checked and taken in the script that adds the job, on the queue's
        # hash slot: no two pushes of one key both add a job (lazarus.ojs.unique).
        "unique_job_strength": "strong",
        "extensions": {"official": ["dead-letter", "admin-api"], "experimental": []},
        "capabilities": {"dead_letter": True, "retry": True, "heartbeat": True,
                         "visibility_timeout": True, "events": True, "batch_enqueue": True,
                         "pause_resume": True, "cron_jobs": True, "scheduled_jobs": True,
                         "job_expiration": True, "pending_jobs": True,
                         "workflows": True, "schema_validation": True,
                         "priority_queues": True, "unique_jobs": True,
                         "rate_limiting": False},
    })  # fmt: skip


@router.get("/v1/health")
async def health(backend: OjsBackend) -> Response:
    """``ok`` when Redis answers, else 503 ``error``."""
    try:
        await backend.client.ping()
    except Exception as exc:
        return ojs_json({"status": "error", "backend": {"type": "redis", "status": "down",
                                                        "error": str(exc)}}, 503)  # fmt: skip
    return ojs_json({"status": "ok", "version": "1.0",
                     "backend": {"type": "redis", "status": "connected"}})  # fmt: skip


@router.post("/v1/jobs", dependencies=_AUTH, status_code=201)
async def enqueue(request: Request, backend: OjsBackend) -> Response:
    """PUSH one job: 201, or 200 with the job that holds its unique key (``use_existing``)."""
    submission = parse_submission(await json_body(request))
    view, added = await jobs.enqueue(backend, submission)
    response = ojs_json({"job": view}, 201 if added else 200)
    response.headers["Location"] = f"/ojs/v1/jobs/{view['id']}"
    return response


@router.post("/v1/jobs/batch", dependencies=_AUTH, status_code=201)
async def enqueue_batch(request: Request, backend: OjsBackend) -> Response:
    """PUSH a batch: every job checked first, then all enqueued or none."""
    submissions = jobs.parse_batch(await json_body(request))
    views = await jobs.enqueue_all(backend, submissions, batch=True)
    return ojs_json({"jobs": views, "count": len(views)}, 201)


@router.get("/v1/jobs/{job_id}")
async def info(job_id: str, backend: OjsBackend) -> Response:
    """INFO: the job's envelope."""
    return ojs_json({"job": (await backend.load(_job_id(job_id, "id"))).view()})


@router.post("/v1/jobs/{job_id}/activate", dependencies=_AUTH)
async def activate(job_id: str, backend: OjsBackend) -> Response:
    """ACTIVATE a pending job."""
    return ojs_json({"job": await job_actions.activate(backend, _job_id(job_id, "id"))})


@router.delete("/v1/jobs/{job_id}", dependencies=_AUTH)
async def cancel(job_id: str, backend: OjsBackend) -> Response:
    """CANCEL a job that has not ended."""
    return ojs_json({"job": await job_actions.cancel(backend, _job_id(job_id, "id"))})


def _queues(body: dict[str, Any]) -> list[str]:
    queues = body.get("queues")
    if not isinstance(queues, list) or not queues:
        raise OjsError(400, "invalid_request", "queues must be a non-empty array of queue names")
    for name in queues:
        queue_name(name, "queues")
    return queues


def _positive(body: dict[str, Any], field: str, default: int, maximum: int) -> int:
    value = body.get(field, default)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum:
        raise OjsError(400, "invalid_request", f"{field} must be an integer from 1 to {maximum}")
    return value


@router.post("/v1/workers/fetch", dependencies=_AUTH)
async def fetch(request: Request, backend: OjsBackend) -> Response:
    """FETCH: claim jobs, each under a lease of its visibility timeout."""
    body = _object(await json_body(request))
    queues = _queues(body)
    count = _positive(body, "count", 1, 1000)
    visibility = _positive(body, "visibility_timeout_ms", DEFAULT_VISIBILITY_MS, MAX_VISIBILITY_MS)
    worker_id = _worker_id(body) or workers.ANONYMOUS
    jobs = await workers.fetch(backend, queues, count, worker_id, visibility, _host(request))
    return ojs_json({"jobs": jobs})


@router.post("/v1/workers/ack", dependencies=_AUTH)
async def ack(request: Request, backend: OjsBackend) -> Response:
    """ACK: the job completed, with an optional ``result``."""
    body = _object(await json_body(request))
    job_id = _job_id(body.get("job_id"))
    storable(body.get("result"), "result")
    return ojs_json(await workers.ack(backend, job_id, body.get("result"), _worker_id(body)))


@router.post("/v1/workers/nack", dependencies=_AUTH)
async def fail(request: Request, backend: OjsBackend) -> Response:
    """NACK: the attempt failed with ``error``; retried, discarded or dead-lettered."""
    body = _object(await json_body(request))
    job_id = _job_id(body.get("job_id"))
    storable(body.get("error"), "error")  # kept in the job's error history, shown on reads
    requeue = body.get("requeue") is True
    return ojs_json(await nack.nack(backend, job_id, body.get("error"), requeue, _worker_id(body)))


@router.post("/v1/workers/heartbeat", dependencies=_AUTH)
async def heartbeat(request: Request, backend: OjsBackend) -> Response:
    """BEAT: extend the leases of the worker's jobs; the answer carries its directive."""
    body = _object(await json_body(request))
    ids = body.get("active_jobs", body.get("job_ids", []))
    if isinstance(body.get("job_id"), str):
        ids = [*ids, body["job_id"]]
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise OjsError(400, "invalid_request", "active_jobs must be an array of job ids")
    storable(ids, "active_jobs")
    visibility = body.get("visibility_timeout_ms")
    if visibility is not None:
        visibility = _positive(body, "visibility_timeout_ms", 1, MAX_VISIBILITY_MS)
    worker_id = _worker_id(body) or workers.ANONYMOUS
    return ojs_json(await workers.heartbeat(backend, worker_id, ids, visibility, _host(request)))


def _host(request: Request) -> str | None:
    """The address a worker's request came from: its host in the workers registry."""
    return request.client.host if request.client is not None else None


@router.get("/v1/events")
async def events(
    backend: OjsBackend,
    types: str | None = None,
    queues: str | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> Response:
    """Recent OJS events, oldest first, filtered by comma-separated ``types`` and ``queues``."""
    wanted_types = set(types.split(",")) if types else None
    wanted_queues = set(queues.split(",")) if queues else None
    found = [
        e for e in await backend.records.read_events(10 * limit)
        if (wanted_types is None or e["type"] in wanted_types)
        and (wanted_queues is None or e["data"].get("queue") in wanted_queues)
    ]  # fmt: skip
    return ojs_json({"events": found[-limit:]})


__all__ = ["UUIDV7_RE", "router"]
