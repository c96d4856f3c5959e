"""The OJS admin API extension (``ojs-admin-api``) under ``/ojs/v1/admin/``: queues with their
jobs counted by state, pause, resume and purge; jobs listed, read, cancelled, retried, and
retried, cancelled or deleted in bulk; the server's totals; the live workers. The dead letter
routes of the extension are in :mod:`~lazarus.ojs.dead_letter_routes`, but for the purge.

Reads need a viewer's token (when the server has tokens), writes an operator's. Every write
over many jobs needs ``"confirm": true`` and acts on at most
:data:`~lazarus.ojs.admin_bulk.BULK_LIMIT` jobs a request.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response

from ..http._deps import require_token
from . import admin, admin_bulk, admin_jobs, job_actions, remote_workers
from .dead_letter_routes import Dead
from .envelope import invalid, parse_time, queue_name
from .errors import OjsError, ojs_json
from .queue_routes import known_queue, queue_names, set_paused
from .routes import OjsBackend, _job_id, json_body
from .states import iso

router = APIRouter(prefix="/v1/admin")
_AUTH = [Depends(require_token)]
MAX_PAGE = 10_000
MAX_PER_PAGE = 100
Page = Annotated[int, Query(ge=1, le=MAX_PAGE)]
PerPage = Annotated[int, Query(ge=1, le=MAX_PER_PAGE)]
# Filters of the spec's job list that lazarus has no index for: refused, never ignored (a list
# that ignored one would pass for filtered).
_UNSUPPORTED = {
    "type": "lazarus lists jobs by queue and state only",
    "since": "lazarus lists jobs by queue and state only",
    "until": "lazarus lists jobs by queue and state only",
    "sort": "jobs come in the order of lazarus's lists",
    "order": "jobs come in the order of lazarus's lists",
    "limit": "use page and per_page",
    "offset": "use page and per_page",
}


@router.get("/queues")
async def admin_queues(
    backend: OjsBackend, dead: Dead, page: Page = 1, per_page: PerPage = 20
) -> Response:
    """A page of the queues lazarus knows, by name, with their jobs counted by OJS state."""
    return ojs_json(await admin.queue_page(backend, dead.view, page, per_page))


@router.get("/queues/{name}")
async def admin_queue(name: str, backend: OjsBackend, dead: Dead) -> Response:
    """One queue: counts, pause state, live workers, last hour's throughput; 404 if unknown."""
    queue, paused = await known_queue(backend, name)
    return ojs_json(await admin.queue_detail(backend, dead.view, queue, paused))


@router.post("/queues/{name}/pause", dependencies=_AUTH)
async def admin_pause(name: str, request: Request, backend: OjsBackend) -> Response:
    """Pause a queue, as ``POST /ojs/v1/queues/{name}/pause`` does."""
    return ojs_json(await _set_paused(name, request, backend, True))


@router.post("/queues/{name}/resume", dependencies=_AUTH)
async def admin_resume(name: str, request: Request, backend: OjsBackend) -> Response:
    """Resume a queue, as ``POST /ojs/v1/queues/{name}/resume`` does."""
    return ojs_json(await _set_paused(name, request, backend, False))


async def _set_paused(
    name: str, request: Request, backend: OjsBackend, paused: bool
) -> dict[str, Any]:
    queue = backend.queue(queue_name(name, "name"))
    at = await set_paused(request, backend, queue, paused)
    body: dict[str, Any] = {"name": queue.name, "state": "paused" if paused else "active",
                            "paused": paused}  # fmt: skip
    if at is not None:  # else it was so already, since a time lazarus does not keep
        body["paused_at" if paused else "resumed_at"] = iso(at)
    return body


@router.delete("/queues/{name}/jobs", dependencies=_AUTH)
async def admin_purge(name: str, request: Request, backend: OjsBackend) -> Response:
    """Remove a queue's jobs that ended in ``states`` before ``older_than``, with their OJS
    records: ``{"states": [...], "older_than", "confirm": true}``."""
    states, cutoff = admin_bulk.parse_purge(await json_body(request), backend.now())
    queue, _ = await known_queue(backend, name)
    return ojs_json(await admin_bulk.purge(backend, queue.name, states, cutoff))


@router.get("/jobs")
async def admin_jobs_page(
    request: Request,
    backend: OjsBackend,
    dead: Dead,
    queue: str | None = None,
    state: str | None = None,
    page: Page = 1,
    per_page: PerPage = 20,
) -> Response:
    """A page of jobs, of one queue or of every queue by name, in one OJS state or any."""
    for field, why in _UNSUPPORTED.items():
        if field in request.query_params:
            raise invalid(f"{field} is not supported: {why}", field=field)
    if state is not None and state not in admin_jobs.STATES:
        raise invalid(f"state must be one of {', '.join(admin_jobs.STATES)}, got {state!r}",
                      field="state")  # fmt: skip
    if queue is not None:
        names = [queue_name(queue, "queue")]
    else:
        names = await queue_names(backend, dead.view)
    return ojs_json(await admin_jobs.job_page(backend, names, state, page, per_page))


async def _bulk(action: str, request: Request, backend: OjsBackend, dead: Dead) -> Response:
    flt = admin_bulk.parse_bulk(action, await json_body(request))
    return ojs_json(await admin_bulk.bulk(backend, dead, action, flt))


@router.post("/jobs/bulk/retry", dependencies=_AUTH)
async def admin_bulk_retry(request: Request, backend: OjsBackend, dead: Dead) -> Response:
    """Retry the discarded jobs a filter selects (``state`` ``discarded``; ``queue``), their
    attempts reset, and then the dead letters they became."""
    return await _bulk("retry", request, backend, dead)


@router.post("/jobs/bulk/cancel", dependencies=_AUTH)
async def admin_bulk_cancel(request: Request, backend: OjsBackend, dead: Dead) -> Response:
    """Cancel the jobs a filter selects that have not ended."""
    return await _bulk("cancel", request, backend, dead)


@router.post("/jobs/bulk/delete", dependencies=_AUTH)
async def admin_bulk_delete(request: Request, backend: OjsBackend, dead: Dead) -> Response:
    """Delete for good the ended jobs a filter selects, and the dead letters of discarded ones."""
    return await _bulk("delete", request, backend, dead)


@router.get("/jobs/{job_id}")
async def admin_job(job_id: str, backend: OjsBackend, queue: str | None = None) -> Response:
    """A job's full envelope, as ``GET /ojs/v1/jobs/{id}`` has it; with ``queue``, also a job
    lazarus itself added, which OJS does not index."""
    job_id = _job_id(job_id, "id")
    if queue is None:
        return ojs_json((await backend.load(job_id)).view())
    loaded = await backend.load_in(queue_name(queue, "queue"), job_id)
    if loaded.job is None and not loaded.record:
        raise OjsError(404, "not_found", f"job {job_id!r} not found in {queue!r}")
    return ojs_json(loaded.view())


@router.post("/jobs/{job_id}/cancel", dependencies=_AUTH)
async def admin_cancel(job_id: str, backend: OjsBackend) -> Response:
    """Cancel a job, as ``DELETE /ojs/v1/jobs/{id}`` does."""
    return ojs_json({"job": await job_actions.cancel(backend, _job_id(job_id, "id"))})


@router.post("/jobs/{job_id}/retry", dependencies=_AUTH)
async def admin_retry(job_id: str, backend: OjsBackend, dead: Dead) -> Response:
    """Retry a discarded job under its own id, its attempts reset."""
    return ojs_json({"job": await admin_bulk.retry_one(backend, dead, _job_id(job_id, "id"))})


@router.delete("/dead-letter", dependencies=_AUTH)
async def admin_purge_dead_letters(request: Request, backend: OjsBackend, dead: Dead) -> Response:
    """Delete for good the dead letters, oldest first, dead-lettered before ``older_than`` (or
    every one): ``{"older_than", "confirm": true}``."""
    body = admin_bulk.confirmed(await json_body(request), ("older_than", "confirm"))
    before = None
    if body.get("older_than") is not None:
        before = min(parse_time(body["older_than"], "older_than"), backend.now())
    purged, more = await dead.purge(before, admin_bulk.BULK_LIMIT)
    return ojs_json({"purged_count": purged, "has_more": more})


@router.get("/stats")
async def admin_stats(backend: OjsBackend, dead: Dead) -> Response:
    """The server's totals: queues, live workers, jobs by OJS state, last hour's throughput."""
    return ojs_json(await admin.totals(backend, dead.view))


@router.get("/workers")
async def admin_workers(
    backend: OjsBackend, dead: Dead, page: Page = 1, per_page: PerPage = 20
) -> Response:
    """A page of the live workers of every queue, by id."""
    return ojs_json(await admin.worker_page(backend, dead.view, page, per_page))


@router.get("/workers/{worker_id}")
async def admin_worker(worker_id: str, backend: OjsBackend, dead: Dead) -> Response:
    """One live worker, with its active jobs (a remote worker's, as its heartbeat named them)."""
    return ojs_json(await admin.worker_detail(backend, dead.view, worker_id))


@router.delete("/workers/{worker_id}", dependencies=_AUTH)
async def admin_deregister_worker(worker_id: str, backend: OjsBackend, dead: Dead) -> Response:
    """Deregister a worker that missed its heartbeat deadline: the jobs it still holds go back
    to their queues at once. 409 for a live worker (quiet it first), 404 for one no queue knows
    that holds nothing."""
    names = (await queue_names(backend, dead.view))[: admin.MAX_QUEUES]
    try:
        await admin.worker_detail(backend, dead.view, worker_id)
    except OjsError:
        pass  # not live: what a deregistration asks for
    else:
        raise OjsError(409, "conflict", f"worker {worker_id!r} is live: quiet it, and "
                       "deregister it once it stops beating",
                       details={"worker_id": worker_id})  # fmt: skip
    known, released = await remote_workers.release(backend, names, worker_id)
    if not known and not released:
        raise OjsError(404, "not_found", f"no worker {worker_id!r}",
                       details={"worker_id": worker_id})  # fmt: skip
    return ojs_json({"id": worker_id, "deregistered": True, "rescheduled_job_ids": released})


@router.post("/workers/{worker_id}/quiet", dependencies=_AUTH)
async def admin_quiet_worker(worker_id: str, backend: OjsBackend, dead: Dead) -> Response:
    """Tell a live remote worker to fetch no more jobs: its next heartbeat answers ``quiet``.
    An in-process lazarus worker hears no directive: refused with 409, nothing written."""
    worker = await admin.worker_detail(backend, dead.view, worker_id)  # 404 when not live
    if not worker["remote"]:
        raise OjsError(409, "conflict", f"worker {worker_id!r} is an in-process lazarus worker, "
                       "which hears no directive: stop it with SIGTERM (it finishes its jobs)",
                       details={"worker_id": worker_id})  # fmt: skip
    await remote_workers.quiet(backend, worker_id)
    return ojs_json({**worker, "state": "quiet"})
