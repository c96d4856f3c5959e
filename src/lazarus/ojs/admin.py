"""The admin API's reads of queues, totals and workers (ojs-admin-api 6.1, 6.2, 9.1, 10.1),
over lazarus's own counts (``Queue.get_job_counts``), metrics (``Queue.get_metrics``) and
workers registry (:func:`lazarus.workers.list_workers`).

Every read is bounded whatever the queues hold: a queue costs a few round trips of counts,
never a read of its jobs, but for the delayed ones a request reads to tell ``scheduled``,
``retryable`` and ``pending`` apart (at most :data:`~lazarus.ojs.queue_routes.SPLIT_LIMIT` in
all, shared by the queues it covers: past it a queue's three are ``null`` and ``delayed`` has
their sum). The
totals and the workers cover at most :data:`MAX_QUEUES` queues, by name.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..dead_letter import DeadLetterView
from ..queue import Queue
from ..workers import WorkerInfo, list_workers
from . import remote_workers
from .backend import Backend
from .errors import OjsError
from .queue_routes import (
    DELAYED_STATES,
    SPLIT_LIMIT,
    job_counts,
    last_hour,
    paused_flags,
    queue_names,
)
from .states import iso

MAX_QUEUES = 1000
"""The most queues the totals (``/admin/stats``) and the workers (``/admin/workers``) read in
one request, the first by name; past them the answer says ``"partial": true``."""
STATES = ("available", "active", *DELAYED_STATES, "completed", "discarded")


@dataclasses.dataclass
class Budget:
    """The delayed jobs a request may still read to split them by OJS state."""

    left: int = SPLIT_LIMIT

    async def counts(
        self, backend: Backend, queue: Queue, view: DeadLetterView
    ) -> dict[str, int | None]:
        """The queue's jobs by OJS state, its delayed ones split while the budget lasts."""
        found = await job_counts(backend, queue, view, split_limit=self.left)
        if "delayed" not in found:  # split
            self.left -= sum(found[state] or 0 for state in DELAYED_STATES)
        return found


def pagination(total: int, page: int, per_page: int) -> dict[str, int]:
    """The admin API's pagination object."""
    pages = max((total + per_page - 1) // per_page, 1)
    return {"total": total, "page": page, "per_page": per_page, "total_pages": pages}


async def queue_page(
    backend: Backend, view: DeadLetterView, page: int, per_page: int
) -> dict[str, Any]:
    """A page of the queues lazarus knows, by name, each with its jobs by OJS state."""
    names = await queue_names(backend, view)
    chosen = names[(page - 1) * per_page : page * per_page]
    budget = Budget()
    items = []
    for name, paused in zip(chosen, await paused_flags(backend, chosen), strict=True):
        counts = await budget.counts(backend, backend.queue(name), view)
        items.append({"name": name, "state": "paused" if paused else "active",
                      "paused": paused, "counts": counts})  # fmt: skip
    return {"items": items, "pagination": pagination(len(names), page, per_page)}


async def queue_detail(
    backend: Backend, view: DeadLetterView, queue: Queue, paused: bool
) -> dict[str, Any]:
    """One queue: its jobs by OJS state, live workers and last hour's throughput."""
    now = backend.now()
    completed, failed, window_ms = await last_hour(queue, now)
    return {
        "name": queue.name,
        "state": "paused" if paused else "active",
        "paused": paused,
        "counts": await Budget().counts(backend, queue, view),
        "workers": len(await list_workers(backend.client, queue.keys)),
        "throughput": _per_minute(completed, failed, window_ms),
        "computed_at": iso(now),
    }


def _per_minute(completed: int, failed: int, window_ms: int) -> dict[str, float]:
    minutes = window_ms / 60_000
    return {"processed_per_minute": round(completed / minutes, 3),
            "failed_per_minute": round(failed / minutes, 3)}  # fmt: skip


async def totals(backend: Backend, view: DeadLetterView) -> dict[str, Any]:
    """Every queue's jobs by OJS state added up, the live workers and the last hour's
    throughput of them all."""
    names = await queue_names(backend, view)
    now = backend.now()
    budget = Budget()
    jobs: dict[str, int | None] = dict.fromkeys(STATES, 0)
    delayed = completed = failed = 0
    window_ms = 1
    workers: set[str] = set()
    for name in names[:MAX_QUEUES]:
        queue = backend.queue(name)
        counts = await budget.counts(backend, queue, view)
        for state in STATES:
            jobs[state] = _add(jobs[state], counts[state])
        delayed += sum(counts.get(state) or 0 for state in (*DELAYED_STATES, "delayed"))
        done, lost, window_ms = await last_hour(queue, now)
        completed, failed = completed + done, failed + lost
        workers.update(w.name for w in await list_workers(backend.client, queue.keys))
    if jobs["scheduled"] is None:
        jobs["delayed"] = delayed
    jobs["total"] = sum(n for n in jobs.values() if n is not None)
    body: dict[str, Any] = {
        "queues": len(names),
        "workers": len(workers),
        "jobs": jobs,
        "throughput": _per_minute(completed, failed, window_ms),
        "computed_at": iso(now),
    }
    if len(names) > MAX_QUEUES:
        body["partial"] = True
    return body


def _add(total: int | None, count: int | None) -> int | None:
    """A sum that stays ``None`` (unknown) once one of its terms is."""
    return None if total is None or count is None else total + count


async def worker_page(
    backend: Backend, view: DeadLetterView, page: int, per_page: int
) -> dict[str, Any]:
    """A page of the live workers of every queue, by name, each with the queues it serves."""
    names = await queue_names(backend, view)
    ordered = sorted((await _live_workers(backend, names)).values(), key=lambda e: e[0].name)
    chosen = ordered[(page - 1) * per_page : page * per_page]
    quiet = await _quiet(backend, [worker.name for worker, _ in ordered])
    items = [_worker(worker, queues, worker.name in quiet) for worker, queues in chosen]
    body: dict[str, Any] = {
        "items": items,
        "summary": {
            "total": len(ordered),
            "running": len(ordered) - len(quiet),
            "quiet": len(quiet),
        },
        "pagination": pagination(len(ordered), page, per_page),
    }
    if len(names) > MAX_QUEUES:
        body["partial"] = True
    return body


async def worker_detail(backend: Backend, view: DeadLetterView, worker_id: str) -> dict[str, Any]:
    """One live worker, with the active jobs it named in its last heartbeat (a remote one);
    404 when no queue has it."""
    found = (await _live_workers(backend, await queue_names(backend, view))).get(worker_id)
    if found is None:
        raise OjsError(404, "not_found", f"no live worker {worker_id!r}",
                       details={"worker_id": worker_id})  # fmt: skip
    worker, queues = found
    quiet = await _quiet(backend, [worker_id])
    return {**_worker(worker, queues, worker_id in quiet), "active_job_ids": list(worker.jobs)}


async def _live_workers(
    backend: Backend, names: list[str]
) -> dict[str, tuple[WorkerInfo, list[str]]]:
    """The live workers of the first :data:`MAX_QUEUES` of queues ``names``, each with the
    queues it serves."""
    found: dict[str, tuple[WorkerInfo, list[str]]] = {}
    for name in names[:MAX_QUEUES]:
        for worker in await list_workers(backend.client, backend.keys(name)):
            found.setdefault(worker.name, (worker, []))[1].append(name)
    return found


async def _quiet(backend: Backend, worker_ids: list[str]) -> set[str]:
    """Which of ``worker_ids`` the admin told to be quiet."""
    if not worker_ids:
        return set()
    async with backend.client.pipeline(transaction=False) as pipe:  # keys of many slots
        for worker_id in worker_ids:
            pipe.get(remote_workers.directive_key(backend, worker_id))
        told = await pipe.execute()
    return {worker_id for worker_id, value in zip(worker_ids, told) if value == "quiet"}


def _worker(worker: WorkerInfo, queues: list[str], quiet: bool) -> dict[str, Any]:
    return {
        "id": worker.name,
        "hostname": worker.host,
        "pid": worker.pid,
        "state": "quiet" if quiet else "running",
        "queues": queues,
        "concurrency": worker.concurrency,
        "active_jobs": worker.running,
        "started_at": iso(worker.started_at),
        "last_heartbeat_at": iso(worker.last_seen),
        "remote": worker.remote,
    }
