"""What the dashboard changes about a queue: pause and resume it, retry failed jobs and run
delayed jobs now, one by one or all at once, cancel a job that has not ended, clean old jobs,
drain the waiting ones, remove a schedule.

Each is a POST (CSRF-checked by the route class) answering with a 303 to the queue's page,
the outcome in ``flash``. The ones that touch many jobs have a GET page first that says how
many and asks to confirm; the POST runs only with ``confirm=yes``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from .._cancelling import DEFAULT_REASON
from ..errors import LazarusError
from ..queue import Queue
from .queue_pages import missing
from .render import query, render, segment
from .routing import SignedInRoute, existing_queue
from .security import flash_params

CLEAN_STATES = ("completed", "failed", "waiting", "prioritized", "delayed")
CLEAN_BATCH = 1000

router = APIRouter(
    prefix="/dashboard/queues/{name:path}", route_class=SignedInRoute, include_in_schema=False
)


def back(
    request: Request, name: str, message: str, *, error: bool = False, **params: Any
) -> RedirectResponse:
    """A 303 to the queue's page with ``message`` shown (signed, see ``flash_params``)."""
    values = {**params, **flash_params(request, message, error=error)}
    return RedirectResponse(f"/dashboard/queues/{segment(name)}?{query(values)}", 303)


async def fields(request: Request) -> dict[str, str]:
    return {k: v for k, v in (await request.form()).items() if isinstance(v, str)}


def confirm(request: Request, name: str, action: str, **context: Any) -> Response:
    page = {"name": name, "action": action, "clean_states": CLEAN_STATES, **context}
    return render(request, "queue_confirm.html", page)


@router.post("/pause")
async def pause(request: Request, name: str) -> Response:
    queue = await existing_queue(request, name)
    if queue is None:
        return missing(request, name)
    await queue.pause()
    return back(request, name, f"Paused {name}: workers claim no job until it is resumed.")


@router.post("/resume")
async def resume(request: Request, name: str) -> Response:
    queue = await existing_queue(request, name)
    if queue is None:
        return missing(request, name)
    await queue.resume()
    return back(request, name, f"Resumed {name}.")


async def job_action(
    request: Request, name: str, job_id: str, state: str, verb: str,
    act: Callable[[Queue], Awaitable[tuple[str, str]]],
) -> Response:  # fmt: skip
    """Run ``act`` on one job of ``state``; back to that state's jobs (when the form says
    ``back=queue``) or to the job's page, with the message ``act`` returns for each."""
    queue = await existing_queue(request, name)
    if queue is None:
        return missing(request, name)
    to_queue = (await fields(request)).get("back") == "queue"
    try:
        for_queue, for_page = await act(queue)
    except (LazarusError, ValueError) as exc:
        return back(request, name, f"Could not {verb} job {job_id}: {exc}", error=True, state=state)
    if to_queue:
        return back(request, name, for_queue, state=state)
    target = f"/dashboard/queues/{segment(name)}/jobs/{segment(job_id)}"
    return RedirectResponse(f"{target}?{query(flash_params(request, for_page))}", 303)


@router.post("/jobs/{job_id}/retry")
async def retry_job(request: Request, name: str, job_id: str) -> Response:
    """Retry one failed job; back to the failed jobs, or to the job's page."""

    async def retry(queue: Queue) -> tuple[str, str]:
        await queue.retry_job(job_id)
        return f"Job {job_id} waits again.", "Retried: the job waits again."

    return await job_action(request, name, job_id, "failed", "retry", retry)


@router.post("/jobs/{job_id}/promote")
async def promote_job(request: Request, name: str, job_id: str) -> Response:
    """Run one delayed job now; back to the delayed jobs, or to the job's page."""

    async def promote(queue: Queue) -> tuple[str, str]:
        state = await queue.promote_job(job_id)
        return f"Job {job_id} is {state} now.", f"Promoted: the job is {state} now."

    return await job_action(request, name, job_id, "delayed", "promote", promote)


# What the state a cancelled job is in means: when it fails (Queue.cancel_job)
CANCELLED = {
    "active": "is active: its worker stops it at its next lease renewal",
    "waiting": "fails as cancelled when a worker next claims it, without running it",
    "paused": "fails as cancelled when a worker next claims it, once the queue is resumed",
}
CANCELLABLE = ("waiting", "paused", "prioritized", "delayed", "active")


@router.post("/jobs/{job_id}/cancel")
async def cancel_job(request: Request, name: str, job_id: str) -> Response:
    """Cancel one job that has not ended, for the form's ``reason`` (``cancelled`` when
    left empty); back to the jobs of the state the form came from, or to the job's page."""
    form = await fields(request)
    came_from = form.get("state", "")

    async def cancel(queue: Queue) -> tuple[str, str]:
        state = await queue.cancel_job(job_id, form.get("reason", "").strip() or DEFAULT_REASON)
        told = f"Job {job_id} {CANCELLED.get(state, f'is {state}')}."
        return told, told

    state = came_from if came_from in CANCELLABLE else "active"
    return await job_action(request, name, job_id, state, "cancel", cancel)


@router.post("/schedules/remove")
async def remove_schedule(request: Request, name: str) -> Response:
    """Remove one schedule (the form's ``key``) and its pending occurrence; back to the
    queue's schedules."""
    queue = await existing_queue(request, name)
    if queue is None:
        return missing(request, name)
    key = (await fields(request)).get("key", "")
    try:
        removed = await queue.remove_repeatable_by_key(key)
    except (TypeError, ValueError) as exc:
        removed, problem = False, str(exc)
    else:
        problem = "there is no such schedule"
    message = f"Removed the schedule {key}." if removed else f"Nothing was removed: {problem}."
    notice = flash_params(request, message, error=not removed)
    return RedirectResponse(f"/dashboard/queues/{segment(name)}/schedules?{query(notice)}", 303)


# The actions on every job of one state: path -> (the Queue method, which takes dry_run and
# returns a count; what it does, in the past tense; the state of the jobs it takes). Each has
# a GET page that says how many and asks to confirm, and a POST that runs it; the jobs then
# wait.
BULK: dict[str, tuple[Callable[..., Awaitable[int]], str, str]] = {
    "retry-failed": (Queue.retry_jobs, "retried", "failed"),
    "promote-delayed": (Queue.promote_jobs, "promoted", "delayed"),
}


async def _bulk(queue: Queue, action: str, *, dry_run: bool) -> int:
    return await BULK[action][0](queue, dry_run=dry_run)


async def bulk_page(request: Request, name: str, action: str) -> Response:
    queue = await existing_queue(request, name)
    if queue is None:
        return missing(request, name)
    return confirm(request, name, action, count=await _bulk(queue, action, dry_run=True))


async def bulk_run(request: Request, name: str, action: str) -> Response:
    queue = await existing_queue(request, name)
    if queue is None:
        return missing(request, name)
    _, done_verb, state = BULK[action]
    if (await fields(request)).get("confirm") != "yes":
        message = f"Nothing was {done_verb}: the form was not confirmed."
        return back(request, name, message, error=True, state=state)
    done = await _bulk(queue, action, dry_run=False)
    message = f"{done_verb.capitalize()} {done} {state} job{'s' if done != 1 else ''}."
    return back(request, name, message, state="waiting")


@router.get("/retry-failed")
async def retry_failed_page(request: Request, name: str) -> Response:
    return await bulk_page(request, name, "retry-failed")


@router.post("/retry-failed")
async def retry_failed(request: Request, name: str) -> Response:
    """Retry every job that is failed now; back to the waiting jobs."""
    return await bulk_run(request, name, "retry-failed")


@router.get("/promote-delayed")
async def promote_delayed_page(request: Request, name: str) -> Response:
    return await bulk_page(request, name, "promote-delayed")


@router.post("/promote-delayed")
async def promote_delayed(request: Request, name: str) -> Response:
    """Run every job that is delayed now at once; back to the waiting jobs."""
    return await bulk_run(request, name, "promote-delayed")


@router.get("/clean")
async def clean_page(request: Request, name: str) -> Response:
    if await existing_queue(request, name) is None:
        return missing(request, name)
    return confirm(request, name, "clean")


@router.post("/clean")
async def clean(request: Request, name: str) -> Response:
    """Remove the jobs of one state older than the grace period, in bounded batches."""
    queue = await existing_queue(request, name)
    if queue is None:
        return missing(request, name)
    form = await fields(request)
    state, grace = form.get("state", ""), form.get("grace_s", "")
    whole = grace.isascii() and grace.isdigit()  # str.isdigit alone takes "²", which int() refuses
    if form.get("confirm") != "yes" or state not in CLEAN_STATES or not whole:
        message = "Nothing was cleaned: choose a state and a grace period in seconds."
        return back(request, name, message, error=True)
    removed = await _clean(queue, state, int(grace) * 1000)
    return back(request, name, f"Removed {removed} {state} job{'s' if removed != 1 else ''}.",
                state=state)  # fmt: skip


@router.get("/drain")
async def drain_page(request: Request, name: str) -> Response:
    queue = await existing_queue(request, name)
    if queue is None:
        return missing(request, name)
    count = await queue.drain(delayed=True, dry_run=True)
    return confirm(request, name, "drain", count=count)


@router.post("/drain")
async def drain(request: Request, name: str) -> Response:
    """Remove every job that waits (waiting, prioritized, delayed); running jobs finish."""
    queue = await existing_queue(request, name)
    if queue is None:
        return missing(request, name)
    if (await fields(request)).get("confirm") != "yes":
        return back(request, name, "Nothing was drained: the form was not confirmed.", error=True)
    removed = await queue.drain(delayed=True)
    return back(
        request,
        name,
        f"Drained {name}: removed {removed} waiting job{'s' if removed != 1 else ''}.",
    )


async def _clean(queue: Queue, state: str, grace_ms: int) -> int:
    removed = 0
    while True:
        batch = await queue.clean(grace_ms, CLEAN_BATCH, state)  # type: ignore[arg-type]
        removed += len(batch)
        if len(batch) < CLEAN_BATCH:
            return removed
