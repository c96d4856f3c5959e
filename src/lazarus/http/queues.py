"""Queues (list, one, a job of one, pause, resume, drain) and the health check."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field

from ..job import JobState
from ..operators import Operators, QueueSummary
from ..queue import Queue
from ._deps import (
    AUTH_ERRORS,
    ERRORS,
    NOT_FOUND,
    REDIS_DOWN,
    ApiError,
    JobId,
    Ops,
    QueueName,
    require_token,
)
from .schemas import (
    ErrorDetail,
    Health,
    HealthQueue,
    JobOut,
    QueueList,
    QueueOut,
    RedisHealth,
    job_out,
    queue_out,
)

router = APIRouter(prefix="/api/queues", tags=["queues"], responses=ERRORS)
health_router = APIRouter(tags=["health"])
_AUTH = [Depends(require_token)]


async def existing_queue(ops: Operators, name: str) -> QueueSummary:
    """The summary of queue ``name``; 404 unless it is in the prefix's queue registry."""
    if name not in await ops.queue_names():
        raise ApiError(404, "not_found", f"no queue {name!r}")
    return await ops.summary(name)


async def job_of(queue: Queue, id: str, state: JobState | None = None) -> JobOut:
    """Job ``id`` of ``queue`` in the API's shape: in ``state`` (what a call that just moved
    or changed it answered) or as it is now; 404 when there is no such job (or someone else
    removed it the moment after the call)."""
    job = await queue.get_job(id)
    if job is None:
        raise ApiError(404, "not_found", f"no job {id!r} in {queue.name!r}")
    return job_out(job, state or await queue.get_job_state(id))


@router.get("", summary="Every queue with its counts and dead-letter depth")
async def list_queue_summaries(ops: Ops) -> QueueList:
    """Every queue under the prefix, by name."""
    return QueueList(queues=[queue_out(s) for s in await ops.summaries()])


@router.get("/{name}", summary="One queue", responses=NOT_FOUND)
async def get_queue(ops: Ops, name: QueueName) -> QueueOut:
    """Counts, pause flag and dead-letter depth of one queue."""
    return queue_out(await existing_queue(ops, name))


@router.get("/{name}/jobs/{id}", summary="One job of a queue", responses=NOT_FOUND)
async def get_job(ops: Ops, name: QueueName, id: JobId) -> JobOut:
    """One job with its state (and ``deadLetter`` metadata for a dead letter)."""
    return await job_of(ops.queue(name), id)


@router.post("/{name}/pause", summary="Pause a queue", dependencies=_AUTH,
             responses={**AUTH_ERRORS, **NOT_FOUND})  # fmt: skip
async def pause_queue(ops: Ops, name: QueueName) -> QueueOut:
    """Stop workers from claiming jobs of the queue; running jobs finish."""
    await existing_queue(ops, name)
    await ops.queue(name).pause()
    return queue_out(await ops.summary(name))


@router.post("/{name}/resume", summary="Resume a queue", dependencies=_AUTH,
             responses={**AUTH_ERRORS, **NOT_FOUND})  # fmt: skip
async def resume_queue(ops: Ops, name: QueueName) -> QueueOut:
    """Let workers claim jobs of the queue again."""
    await existing_queue(ops, name)
    await ops.queue(name).resume()
    return queue_out(await ops.summary(name))


class DrainResult(BaseModel):
    """How many jobs a drain removed."""

    drained: int = Field(
        description="Waiting and prioritized jobs removed (and delayed ones); with dryRun, "
        "the jobs that wait now."
    )
    delayed: bool = Field(description="Whether delayed jobs were drained too.")
    dry_run: bool = Field(serialization_alias="dryRun")


@router.post("/{name}/drain", summary="Remove the jobs that wait to run", dependencies=_AUTH,
             responses={**AUTH_ERRORS, **NOT_FOUND}, response_model_by_alias=True)  # fmt: skip
async def drain_queue(
    ops: Ops,
    name: QueueName,
    delayed: bool = Query(False, description="Remove the delayed jobs too."),
    dry_run: bool = Query(False, alias="dryRun", description="Count only; change nothing."),
) -> DrainResult:
    """Remove the waiting and prioritized jobs (with ``delayed=true``, the delayed ones too)
    added before the call; running and finished jobs stay, and so do dead letters."""
    await existing_queue(ops, name)
    drained = await ops.queue(name).drain(delayed=delayed, dry_run=dry_run)
    return DrainResult(drained=drained, delayed=delayed, dry_run=dry_run)


def _health_queue(summary: QueueSummary) -> HealthQueue:
    counts = summary.counts
    return HealthQueue(
        name=summary.name,
        active=counts.get("active", 0),
        waiting=sum(counts.get(s, 0) for s in ("waiting", "prioritized", "paused")),
        delayed=counts.get("delayed", 0),
        failed=counts.get("failed", 0),
        paused=summary.paused,
        deadLetters=summary.dead_letters,
    )


@health_router.get(
    "/api/health",
    summary="Redis reachability and per-queue statistics",
    response_model=Health,
    responses={503: {"model": Health, "description": "Redis is unreachable."}},
)
async def health(ops: Ops) -> Response | Health:
    """``ok`` with active, waiting, failed and dead-letter counts per queue; 503 when Redis
    cannot be reached."""
    try:
        await ops.ping()
        summaries = await ops.summaries()
    except REDIS_DOWN as exc:
        body = Health(
            status="unavailable",
            redis=RedisHealth(reachable=False, error=str(exc)),
            queues=[],
            error=ErrorDetail(code="redis_unavailable", message=str(exc)),
        )
        return JSONResponse(body.model_dump(), status_code=503)
    return Health(
        status="ok", redis=RedisHealth(reachable=True), queues=[_health_queue(s) for s in summaries]
    )


@health_router.get(
    "/health",
    summary="Liveness: whether the server can reach Redis (no credentials needed)",
    responses={503: {"description": "Redis is unreachable."}},
)
async def liveness(ops: Ops) -> JSONResponse:
    """``{"status": "ok"}``, or 503 ``{"status": "unavailable"}``: nothing more, since anyone
    may ask. ``/api/health`` has the details."""
    try:
        await ops.ping()
    except REDIS_DOWN:
        return JSONResponse({"status": "unavailable"}, status_code=503)
    return JSONResponse({"status": "ok"})
