"""Dashboard pages: the overview, the dead letter browser (of one dead letter queue, or of
every one), the search box, and a dead letter's own page.

``router`` is what the app factory includes: these pages, the actions
(:mod:`~lazarus.dashboard.actions`), the bulk operations (:mod:`~lazarus.dashboard.bulk`) and
the public pages (:mod:`~lazarus.dashboard.public`).
Every page reads through :class:`~lazarus.operators.Operators` and :class:`~lazarus.Queue`;
the dashboard has no Redis logic of its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from ..dead_letter import DeadLetterFilter
from ..dead_letter.filters import REASONS
from . import (
    actions,
    audit,
    bulk,
    health,
    job_changes,
    public,
    queue_actions,
    queue_limits,
    queue_pages,
    status_actions,
    webhooks,
)
from .filters import LIMITS, MAX_FIELD, STATUSES, FilterForm, Where
from .paging import Paged, Search, fetch
from .render import rate_chart, render, segment
from .routing import SignedInRoute, existing_queue, no_such
from .security import operators

RATE_MINUTES = 60

pages = APIRouter(prefix="/dashboard", route_class=SignedInRoute, include_in_schema=False)


@pages.get("")
async def overview(request: Request) -> Response:
    """Every queue with its counts, and a dead-letter rate chart per dead letter queue."""
    ops = operators(request)
    summaries = await ops.summaries()
    dlqs = [s.name for s in summaries if s.is_dead_letter_queue]
    rates = await asyncio.gather(*(ops.queue(n).get_dead_letter_rate(RATE_MINUTES) for n in dlqs))
    charts = {name: rate_chart(rate) for name, rate in zip(dlqs, rates)}
    context = {
        "summaries": summaries,
        "charts": charts,
        "minutes": RATE_MINUTES,
        "states": ("waiting", "paused", "prioritized", "delayed", "active", "completed", "failed"),
    }
    return render(request, "overview.html", context)


async def _list(
    request: Request,
    name: str | None,
    search: Search,
    count: Callable[[DeadLetterFilter], Awaitable[int]],
    depth: Callable[[], Awaitable[int]],
) -> Response:
    """The dead letter browser: the page the query asks for, its neighbours' cursors, the
    number of matches when the store counts it without a scan (or ``count=1`` asked), and
    the depth. ``name`` is the dead letter queue, ``None`` for every one."""
    form, where = (
        FilterForm.from_query(request.query_params),
        Where.from_query(request.query_params),
    )
    context = {"name": name, "form": form, "where": where, "reasons": REASONS,
               "statuses": STATUSES, "limits": LIMITS, "paged": Paged([], None, None, 0),
               "total": 0, "depth": 0, "error": ""}  # fmt: skip
    try:
        flt = form.to_filter()
    except ValueError as exc:
        context["error"] = str(exc)
        return render(request, "dead_letters.html", context, status_code=400)
    try:
        paged, context["depth"] = await asyncio.gather(
            fetch(search, flt, limit=where.limit, older=where.older, newer=where.newer),
            depth(),
        )
    except ValueError:
        context["error"] = "This page's link is out of date or broken: start from the newest."
        context["where"] = where.first()
        return render(request, "dead_letters.html", context, status_code=400)
    total = paged.total
    if total is None and request.query_params.get("count") == "1":
        total = await count(flt)
    context.update(paged=paged, total=total)
    return render(request, "dead_letters.html", context)


@pages.get("/queues/{name:path}/dead-letters")
async def dead_letters(request: Request, name: str) -> Response:
    """The dead letters of ``name`` that match the filter form, newest first, a page at a
    time, with "Newer" and "Older" links that carry cursors."""
    queue = await existing_queue(request, name)
    if queue is None:
        return no_such(request, f"There is no queue called {name!r}.")
    return await _list(request, name, queue.search_dead_letters, queue.count_dead_letters,
                       queue.get_dead_letter_count)  # fmt: skip


@pages.get("/dead-letters")
async def every_dead_letter(request: Request) -> Response:
    """The dead letters of every dead letter queue, merged newest first, a page at a time."""
    view = operators(request).view

    async def depth() -> int:
        return await view.count()

    return await _list(request, None, view.search, view.count, depth)


@pages.get("/find")
async def find(request: Request) -> Response:
    """The search box: a dead letter by its own id, or by the id its job had in the source
    queue, in any dead letter queue; a redirect to its page."""
    text = request.query_params.get("id", "").strip()[:MAX_FIELD]
    job = None
    try:
        view = operators(request).view
        job = await view.get(text) or await view.find_by_original_id(text)
    except (ValueError, TypeError):
        pass  # not an id at all: nothing has it
    if job is None:
        message = (f"No dead letter has the id {text!r}, and no job with that id became a "
                   "dead letter.")  # fmt: skip
        return no_such(request, message)
    target = f"/dashboard/queues/{segment(job.queue_name)}/dead-letters/{segment(job.id)}"
    return RedirectResponse(target, status_code=303)


LOG_LINES_SHOWN = 200  # the newest lines of a dead letter's logs on its page


@pages.get("/queues/{name:path}/dead-letters/{job_id}")
async def dead_letter(request: Request, name: str, job_id: str) -> Response:
    """One dead letter: payload, ``_dlqMeta``, every attempt, and Replay / Delete forms."""
    queue = await existing_queue(request, name)
    if queue is None:
        return no_such(request, f"There is no queue called {name!r}.")
    try:
        job = await queue.peek_dead_letter(job_id)
    except (ValueError, TypeError):
        job = None
    if job is None:
        return no_such(request, f"There is no dead letter {job_id!r} in {name!r}.")
    form, where = (
        FilterForm.from_query(request.query_params),
        Where.from_query(request.query_params),
    )
    logs = await queue.get_job_logs(job.id, -LOG_LINES_SHOWN, -1)
    context = {"name": name, "job": job, "form": form, "where": where, "logs": logs}
    return render(request, "dead_letter.html", context)


router = APIRouter(include_in_schema=False)
router.include_router(public.router)
router.include_router(pages)
router.include_router(webhooks.router)
router.include_router(actions.router)
router.include_router(status_actions.router)
router.include_router(bulk.router)
router.include_router(audit.router)
router.include_router(health.router)
router.include_router(queue_actions.router)
router.include_router(job_changes.router)
router.include_router(queue_limits.router)
router.include_router(queue_pages.router)  # last: its /queues/{name:path} matches the most
