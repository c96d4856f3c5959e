"""The OJS queue routes: the list of queues (Level 0), and a queue's statistics, pause and
resume (Level 4), over lazarus's own ``list_queues``, ``Queue.get_job_counts``,
``get_metrics``, ``pause``, ``resume`` and ``is_paused``. The admin API
(:mod:`~lazarus.ojs.admin_routes`) shares the helpers.

A pause is lazarus's: workers, in-process or remote (FETCH), claim nothing from the queue, the
jobs they hold run on, and jobs may still be enqueued (they wait, ``available``).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response

from .._codec import text
from ..dead_letter import DeadLetterFilter, DeadLetterView
from ..http._deps import require_token
from ..queue import Queue, list_queues
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
"""The most delayed jobs a request reads to tell ``scheduled``, ``retryable`` and ``pending``
apart (a field of each and of its OJS record); past it the three are ``null`` and
``delayed`` has their sum."""
DELAYED_STATES = ("scheduled", "retryable", "pending")
"""The OJS states of the jobs lazarus holds as delayed."""
MAX_QUEUE_PAGE = 1000


async def queue_names(backend: Backend, view: DeadLetterView) -> list[str]:
    """Every queue lazarus knows under the prefix, sorted: those jobs were ever added to
    (:func:`lazarus.list_queues`) and the dead letter queues."""
    names = await list_queues(backend.client, prefix=backend.prefix)
    return sorted({*names, *await view.dead_letter_queues()})


async def paused_flags(backend: Backend, names: list[str]) -> list[bool]:
    """Whether each queue of ``names`` is paused, in one round trip."""
    async with backend.client.pipeline(transaction=False) as pipe:
        for name in names:
            pipe.hexists(backend.keys(name).meta, "paused")
        return [bool(flag) for flag in await pipe.execute()]


@router.get("/v1/queues")
async def list_all_queues(
    backend: OjsBackend,
    dead: Dead,
    limit: Annotated[int, Query(ge=1, le=MAX_QUEUE_PAGE)] = 50,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> Response:
    """Every queue lazarus knows, by name, with whether it is paused, a page at a time."""
    names = await queue_names(backend, dead.view)
    page = names[offset : offset + limit]
    flags = await paused_flags(backend, page)
    queues = [{"name": name, "status": "paused" if paused else "active"}
              for name, paused in zip(page, flags, strict=True)]  # fmt: skip
    return ojs_json({"queues": queues, "pagination": {
        "total": len(names), "limit": limit, "offset": offset,
        "has_more": offset + len(page) < len(names),
    }})  # fmt: skip


@router.get("/v1/queues/{name}/stats")
async def queue_stats(name: str, backend: OjsBackend, dead: Dead) -> Response:
    """The queue's jobs by OJS state, its pause flag and its throughput; 404 for a queue that
    was never written to, used as a dead letter queue, nor paused."""
    queue, paused = await known_queue(backend, name)
    now = backend.now()
    counts = await job_counts(backend, queue, dead.view)
    completed, failed, window_ms = await last_hour(queue, now)
    throughput = {
        "completed_last_hour": completed,
        "failed_last_hour": failed,
        "throughput_per_second": round(completed * 1000 / window_ms, 6),
    }
    return ojs_json({
        "queue": {"name": queue.name, "paused": paused, **counts},
        "status": "paused" if paused else "active",
        "stats": {**counts, **throughput},
        "computed_at": iso(now),
    })  # fmt: skip


async def known_queue(backend: Backend, name: str) -> tuple[Queue, bool]:
    """The queue ``name`` (a 400 naming ``name`` for a bad one) and whether it is paused; 404
    unless lazarus knows it: jobs were added to it, it holds dead letters, or it is paused."""
    queue = backend.queue(queue_name(name, "name"))
    paused = await queue.is_paused()
    if not paused and not await _known(backend, queue):
        raise OjsError(404, "not_found", f"queue {queue.name!r} not found")
    return queue, paused


async def _known(backend: Backend, queue: Queue) -> bool:
    """Whether lazarus knows the queue: jobs were added to it, or it holds dead letters."""
    for registry in (queue.keys.registry, queue.keys.dead_letter_registry):
        if await backend.client.sismember(registry, queue.name):
            return True
    return False


async def last_hour(queue: Queue, now: int) -> tuple[int, int, int]:
    """The queue's jobs completed and failed for good over the last :data:`STATS_MINUTES`
    minutes (lazarus's per-minute metrics), and that window in milliseconds."""
    metrics = await queue.get_metrics(STATS_MINUTES, now=now)
    window_ms = now - metrics.completed_per_minute[0][0]  # whole minutes, the current one too
    completed = sum(n for _, n in metrics.completed_per_minute)
    return completed, sum(n for _, n in metrics.failed_per_minute), window_ms


async def job_counts(
    backend: Backend, queue: Queue, view: DeadLetterView, *, split_limit: int = SPLIT_LIMIT
) -> dict[str, int | None]:
    """The queue's jobs by OJS state (lazarus's counts; delayed jobs split by OJS state when
    there are at most ``split_limit`` of them), and their total."""
    counts = await queue.get_job_counts()
    # lazarus counts a dead letter queue's dead letters as waiting; to OJS they are
    # discarded jobs of the queues they came from, and are counted there.
    held = await queue.count_dead_letters()
    from_here = await view.count(DeadLetterFilter(source_queue=queue.name))
    ready = counts["waiting"] + counts["prioritized"] + counts["paused"]
    found: dict[str, int | None] = {
        "available": max(ready - held, 0),
        "active": counts["active"],
        **dict.fromkeys(DELAYED_STATES),
        "completed": counts["completed"],
        "discarded": counts["failed"] + from_here,
    }
    if counts["delayed"] > split_limit:
        found["delayed"] = counts["delayed"]
    else:
        split = await split_delayed(backend, queue, split_limit)
        found.update({state: len(ids) for state, ids in split.items()})
    found["total"] = sum(n for n in found.values() if n is not None)
    return found


async def split_delayed(backend: Backend, queue: Queue, limit: int) -> dict[str, list[str]]:
    """The ids of the queue's first ``limit`` delayed jobs, soonest due first, by OJS state, as
    a job's own view tells them: ``retryable`` those that ran before (waiting out a backoff),
    ``pending`` those pushed with ``options.pending`` and not activated, ``scheduled`` the
    others."""
    split: dict[str, list[str]] = {state: [] for state in DELAYED_STATES}
    if limit < 1:
        return split
    keys = queue.keys
    ids = [text(i) for i in await backend.client.zrange(keys.delayed, 0, limit - 1)]
    async with backend.client.pipeline(transaction=False) as pipe:
        for job_id in ids:
            pipe.hget(keys.job(job_id), "ats")  # attempts started
            pipe.hget(backend.records.key(queue.name, job_id), "pending")
        replies = await pipe.execute()
    for job_id, started, pending in zip(ids, replies[::2], replies[1::2], strict=True):
        if started is not None and int(started) > 0:
            split["retryable"].append(job_id)
        else:
            split["pending" if pending else "scheduled"].append(job_id)
    return split


async def set_paused(request: Request, backend: Backend, queue: Queue, paused: bool) -> int | None:
    """Pause or resume the queue; the time it changed, or ``None`` when it was so already (a
    change records a ``queue.paused`` or ``queue.resumed`` event naming who asked)."""
    changed = await queue.is_paused() != paused
    await (queue.pause() if paused else queue.resume())
    if not changed:  # it was so before, since a time lazarus does not keep
        return None
    kind, by = ("queue.paused", "paused_by") if paused else ("queue.resumed", "resumed_by")
    await backend.records.emit(kind, {"queue": queue.name, by: actor(request)})
    return backend.now()


@router.post("/v1/queues/{name}/pause", dependencies=_AUTH)
async def pause_queue(name: str, request: Request, backend: OjsBackend) -> Response:
    """Stop every worker, in-process or remote, from claiming the queue's jobs; the jobs they
    hold run on. A queue may be paused before its first job."""
    return await _paused_answer(request, backend, name, True)


@router.post("/v1/queues/{name}/resume", dependencies=_AUTH)
async def resume_queue(name: str, request: Request, backend: OjsBackend) -> Response:
    """Let workers claim the queue's jobs again."""
    return await _paused_answer(request, backend, name, False)


async def _paused_answer(request: Request, backend: Backend, name: str, paused: bool) -> Response:
    """Pause or resume queue ``name``; the answer says so, and when, if this call changed it."""
    queue = backend.queue(queue_name(name, "name"))
    at = await set_paused(request, backend, queue, paused)
    status, field = ("paused", "paused_at") if paused else ("active", "resumed_at")
    body: dict[str, Any] = {"queue": {"name": queue.name, "paused": paused}, "status": status}
    if at is not None:
        body[field] = iso(at)
    return ojs_json(body)


def actor(request: Request) -> str:
    """Who asked, as lazarus's audit trail names them (``operator:<token name>``)."""
    principal = getattr(request.state, "principal", None)
    return principal.actor() if principal is not None else "operator:api"
