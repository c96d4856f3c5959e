"""Dashboard pages: the overview, the dead letter browser and a dead letter's own page.

``router`` is what the app factory includes: these pages, the actions
(:mod:`~lazarus.dashboard.actions`) and the public pages (:mod:`~lazarus.dashboard.public`).
Every page reads through :class:`~lazarus.operators.Operators` and :class:`~lazarus.Queue`;
the dashboard has no Redis logic of its own.
"""

from __future__ import annotations

import asyncio
import math

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from . import actions, public
from .filters import LIMITS, REASONS, FilterForm, page_and_limit
from .render import rate_chart, render
from .routing import SignedInRoute, find_queue, no_such
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


@pages.get("/queues/{name}/dead-letters")
async def dead_letters(request: Request, name: str) -> Response:
    """The dead letters of ``name`` that match the filter form, newest first, a page at a time."""
    queue = find_queue(request, name)
    if queue is None:
        return no_such(request, f"There is no queue called {name!r}.")
    form = FilterForm.from_query(request.query_params)
    page, limit = page_and_limit(request.query_params)
    context = {"name": name, "form": form, "reasons": REASONS, "limits": LIMITS,
               "page": page, "limit": limit, "jobs": [], "total": 0, "pages": 1,
               "depth": 0, "error": ""}  # fmt: skip
    try:
        flt = form.to_filter()
    except ValueError as exc:
        context["error"] = str(exc)
        return render(request, "dead_letters.html", context, status_code=400)
    total, jobs, depth = await asyncio.gather(
        queue.count_dead_letters(flt),
        queue.find_dead_letters(flt, limit=limit, offset=(page - 1) * limit),
        queue.get_dead_letter_count(),
    )
    context.update(total=total, jobs=jobs, depth=depth, pages=max(1, math.ceil(total / limit)))
    return render(request, "dead_letters.html", context)


@pages.get("/queues/{name}/dead-letters/{job_id}")
async def dead_letter(request: Request, name: str, job_id: str) -> Response:
    """One dead letter: payload, ``_dlqMeta``, every attempt, and Replay / Delete forms."""
    queue = find_queue(request, name)
    if queue is None:
        return no_such(request, f"There is no queue called {name!r}.")
    try:
        job = await queue.peek_dead_letter(job_id)
    except (ValueError, TypeError):
        job = None
    if job is None:
        return no_such(request, f"There is no dead letter {job_id!r} in {name!r}.")
    form = FilterForm.from_query(request.query_params)
    page, limit = page_and_limit(request.query_params)
    context = {"name": name, "job": job, "form": form, "page": page, "limit": limit}
    return render(request, "dead_letter.html", context)


router = APIRouter(include_in_schema=False)
router.include_router(public.router)
router.include_router(pages)
router.include_router(actions.router)
