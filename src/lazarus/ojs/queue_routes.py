"""The OJS queue routes (Level 4): a queue's statistics, pause and resume, over lazarus's own
``Queue.get_job_counts``, ``get_metrics``, ``pause``, ``resume`` and ``is_paused``.

A pause is lazarus's: workers, in-process or remote (FETCH), claim nothing from the queue, the
jobs they hold run on, and jobs may still be enqueued (they wait, ``available``).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request, Response

from .._codec import text
from ..dead_letter import DeadLetterFilter, DeadLetterView
from ..http._deps import require_token
from ..queue import Queue
from .backend import Backend
from .dead_letter_routes import Dead
from .envelope import queue_name
from .errors import OjsError, ojs_json
from .routes import OjsBackend
from .states import iso

router = APIRouter()
_AUTH = [Depends(require_token)]
STATS_MINUTES = 60  # the window of completed_last_hour, failed_last_hour and the throughput
SPLIT_LIMIT = 10_000
"""The most delayed jobs a stats call reads to tell ``scheduled`` from ``retryable`` (one
field of each); past it both are ``null`` and ``delayed`` has their sum."""


@router.get("/v1/queues/{name}/stats")
async def queue_stats(name: str, backend: OjsBackend, dead: Dead) -> Response:
    """The queue's jobs by OJS state, its pause flag and its throughput; 404 for a queue that
    was never written to, used as a dead letter queue, nor paused."""
    queue = backend.queue(queue_name(name, "name"))
    paused = await queue.is_paused()
    if not paused and not await _known(backend, queue):
        raise OjsError(404, "not_found", f"queue {queue.name!r} not found")
    now = backend.now()
    counts = await _counts(backend, queue, dead.view)
    metrics = await queue.get_metrics(STATS_MINUTES, now=now)
    window_ms = now - metrics.completed_per_minute[0][0]  # whole minutes, the current one too
    completed = sum(n for _, n in metrics.completed_per_minute)
    throughput = {
        "completed_last_hour": completed,
        "failed_last_hour": sum(n for _, n in metrics.failed_per_minute),
        "throughput_per_second": round(completed * 1000 / window_ms, 6),
    }
    return ojs_json({
        "queue": {"name": queue.name, "paused": paused, **counts},
        "status": "paused" if paused else "active",
        "stats": {**counts, **throughput},
        "computed_at": iso(now),
    })  # fmt: skip


async def _known(backend: Backend, queue: Queue) -> bool:
    """Whether lazarus knows the queue: jobs were added to it, or it holds dead letters."""
    for registry in (queue.keys.registry, queue.keys.dead_letter_registry):
        if await backend.client.sismember(registry, queue.name):
            return True
    return False


async def _counts(backend: Backend, queue: Queue, view: DeadLetterView) -> dict[str, int | None]:
    """The queue's jobs by OJS state (lazarus's counts; delayed jobs split by whether they
    ran before), and their total."""
    counts = await queue.get_job_counts()
    # lazarus counts a dead letter queue's dead letters as waiting; to OJS they are
    # discarded jobs of the queues they came from, and are counted there.
    held = await queue.count_dead_letters()
    from_here = await view.count(DeadLetterFilter(source_queue=queue.name))
    ready = counts["waiting"] + counts["prioritized"] + counts["paused"]
    found: dict[str, int | None] = {
        "available": max(ready - held, 0),
        "active": counts["active"],
        "scheduled": None,
        "retryable": None,
        "completed": counts["completed"],
        "discarded": counts["failed"] + from_here,
    }
    split = await _split_delayed(backend, queue, counts["delayed"])
    if split is None:
        found["delayed"] = counts["delayed"]
    else:
        found["scheduled"], found["retryable"] = split
    found["total"] = sum(n for n in found.values() if n is not None)
    return found


async def _split_delayed(backend: Backend, queue: Queue, delayed: int) -> tuple[int, int] | None:
    """How many delayed jobs wait to run for the first time (``scheduled``) and how many to
    run again after a failure (``retryable``), as a job's own view tells them; ``None`` for
    more than :data:`SPLIT_LIMIT` of them."""
    if delayed > SPLIT_LIMIT:
        return None
    keys = queue.keys
    ids = await backend.client.zrange(keys.delayed, 0, SPLIT_LIMIT - 1)
    async with backend.client.pipeline(transaction=False) as pipe:
        for job_id in ids:
            pipe.hget(keys.job(text(job_id)), "ats")  # attempts started
        started = await pipe.execute()
    retryable = sum(1 for n in started if n is not None and int(n) > 0)
    return len(ids) - retryable, retryable


@router.post("/v1/queues/{name}/pause", dependencies=_AUTH)
async def pause_queue(name: str, request: Request, backend: OjsBackend) -> Response:
    """Stop every worker, in-process or remote, from claiming the queue's jobs; the jobs they
    hold run on. A queue may be paused before its first job."""
    queue = backend.queue(queue_name(name, "name"))
    changed = not await queue.is_paused()
    await queue.pause()
    body: dict[str, Any] = {"queue": {"name": queue.name, "paused": True}, "status": "paused"}
    if changed:  # else it was paused before, at a time lazarus does not keep
        body["paused_at"] = iso(backend.now())
        await backend.records.emit("queue.paused", {"queue": queue.name,
                                                    "paused_by": _actor(request)})  # fmt: skip
    return ojs_json(body)


@router.post("/v1/queues/{name}/resume", dependencies=_AUTH)
async def resume_queue(name: str, request: Request, backend: OjsBackend) -> Response:
    """Let workers claim the queue's jobs again."""
    queue = backend.queue(queue_name(name, "name"))
    changed = await queue.is_paused()
    await queue.resume()
    body: dict[str, Any] = {"queue": {"name": queue.name, "paused": False}, "status": "active"}
    if changed:
        body["resumed_at"] = iso(backend.now())
        await backend.records.emit("queue.resumed", {"queue": queue.name,
                                                     "resumed_by": _actor(request)})  # fmt: skip
    return ojs_json(body)


def _actor(request: Request) -> str:
    """Who asked, as lazarus's audit trail names them (``operator:<token name>``)."""
    principal = getattr(request.state, "principal", None)
    return principal.actor() if principal is not None else "operator:api"
