"""Dashboard pages of any queue: its jobs by state, a page at a time, its live workers, its
schedules (repeatable jobs), and a job's own page. (A dead letter queue's dead letters have
pages of their own, in :mod:`~lazarus.dashboard.views`; what the pages change is in
:mod:`~lazarus.dashboard.queue_actions` and :mod:`~lazarus.dashboard.queue_limits`.)

Every page reads through :class:`~lazarus.Queue` and :func:`lazarus.workers.list_workers`.
Pages may refresh themselves with ``?refresh=5`` (or 10, 30): an HTML ``<meta
http-equiv="refresh">``, so the script-free Content-Security-Policy holds.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from ..queue import Queue
from ..workers import list_workers
from .render import rate_chart, render
from .routing import SignedInRoute, existing_queue, no_such

STATES = ("waiting", "prioritized", "delayed", "active", "completed", "failed")
PAGE_SIZE = 25
REFRESH_CHOICES = (5, 10, 30)
THROUGHPUT_MINUTES = 60  # of the charts of jobs completed and failed per minute
COMPLETED = ("job completed", "jobs completed")  # their tooltips' units
FAILED = ("job failed for good", "jobs failed for good")

router = APIRouter(prefix="/dashboard", route_class=SignedInRoute, include_in_schema=False)


def refresh_seconds(request: Request) -> int | None:
    """The auto-refresh period the query asks for, if it is one of the choices."""
    value = request.query_params.get("refresh", "")
    return int(value) if value.isdigit() and int(value) in REFRESH_CHOICES else None


def page_number(request: Request) -> int:
    value = request.query_params.get("page", "1")
    return min(int(value), 100_000) if value.isdigit() and int(value) >= 1 else 1


def missing(request: Request, name: str) -> Response:
    return no_such(request, f"There is no queue called {name!r}: no job was ever added to it "
                            "and no worker ever ran on it under this prefix.")  # fmt: skip


@router.get("/queues/{name:path}/jobs/{job_id}")
async def job_page(request: Request, name: str, job_id: str) -> Response:
    """One job: its state, payload, options, result or errors, and a Retry form if failed."""
    queue = await existing_queue(request, name)
    if queue is None:
        return missing(request, name)
    try:
        job = await queue.get_job(job_id)
    except (ValueError, TypeError):
        job = None
    if job is None:
        return no_such(request, f"There is no job {job_id!r} in {name!r}.")
    state = await queue.get_job_state(job_id)
    return render(request, "job.html", {"name": name, "job": job, "state": state})


@router.get("/queues/{name:path}/schedules")
async def schedules_page(request: Request, name: str) -> Response:
    """A queue's repeatable jobs (cron patterns and intervals), the soonest due first, each
    with a Remove button for operators."""
    queue = await existing_queue(request, name)
    if queue is None:
        return missing(request, name)
    schedules = await queue.get_repeatable_jobs()
    return render(request, "schedules.html", {"name": name, "schedules": schedules})


async def queue_context(request: Request, queue: Queue, name: str) -> dict[str, Any]:
    """What a queue's page shows: its counts, its jobs in the state the query asks for a page
    at a time, its live workers, its limits and its controls."""
    state = request.query_params.get("state", "waiting")
    state = state if state in STATES else "waiting"
    page = page_number(request)
    start = (page - 1) * PAGE_SIZE
    (counts, paused, workers, jobs, dead, schedules, concurrency, rate_limit,
     rate_ttl, metrics) = await asyncio.gather(
        queue.get_job_counts(), queue.is_paused(), list_workers(queue.client, queue.keys),
        getattr(queue, f"get_{state}")(start, start + PAGE_SIZE),  # one more: is there a next?
        queue.get_dead_letter_count(), queue.client.zcard(queue.keys.repeat_index),
        queue.get_global_concurrency(), queue.get_global_rate_limit(),
        queue.get_rate_limit_ttl(), queue.get_metrics(THROUGHPUT_MINUTES),
    )  # fmt: skip
    return {
        "name": name, "state": state, "states": STATES, "counts": counts, "paused": paused,
        "workers": workers, "jobs": jobs[:PAGE_SIZE], "page": page,
        "has_next": len(jobs) > PAGE_SIZE, "dead_letters": dead, "schedules": schedules,
        "refresh": refresh_seconds(request), "refresh_choices": REFRESH_CHOICES,
        "concurrency": concurrency, "rate_limit": rate_limit, "rate_ttl": rate_ttl,
        "limits_form": {}, "metrics": metrics, "metrics_minutes": THROUGHPUT_MINUTES,
        "completed_chart": rate_chart(metrics.completed_per_minute, COMPLETED),
        "failed_chart": rate_chart(metrics.failed_per_minute, FAILED),
    }  # fmt: skip


@router.get("/queues/{name:path}")
async def queue_page(request: Request, name: str) -> Response:
    """A queue: its counts, its jobs in one state a page at a time (offset paging, newest or
    next first as :class:`~lazarus.Queue` lists them), its live workers, its limits across
    them, and its controls."""
    queue = await existing_queue(request, name)
    if queue is None:
        return missing(request, name)
    return render(request, "queue.html", await queue_context(request, queue, name))
