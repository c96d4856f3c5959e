"""Bulk replay and purge from the dashboard: a confirmation page that states the filter and
the count, a POST that starts the operation in the background of the server
(``app.state.bulk``, as ``POST /api/dead-letters/bulk`` does), and a progress page that
reloads itself (``<meta http-equiv="refresh">``: no script) until the operation is over.
"""

from __future__ import annotations

import contextlib

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from .._connection import now_ms
from ..dead_letter import DeadLetterFilter
from ..errors import LazarusError
from ..http.operations import BulkOperations, OperationEnded
from ..queue import Queue
from .actions import back_to_list, form_fields
from .filters import MAX_FIELD, FilterForm, Where
from .render import query, render
from .routing import SignedInRoute, find_queue, no_such

router = APIRouter(prefix="/dashboard", route_class=SignedInRoute, include_in_schema=False)

BULK_ACTIONS = {"replay": "Replay", "purge": "Purge"}
PAST = {"replay": "Replayed", "purge": "Purged"}
DOING = {"replay": "Replaying", "purge": "Purging"}
REFRESH_SECONDS = 1


def operations(request: Request) -> BulkOperations:
    """The app's background bulk operations."""
    running: BulkOperations = request.app.state.bulk
    return running


def _target(request: Request, name: str, action: str) -> Queue | Response:
    if action not in BULK_ACTIONS:
        return no_such(request, f"There is no bulk action {action!r}.")
    queue = find_queue(request, name)
    if queue is None:
        return no_such(request, f"There is no queue called {name!r}.")
    return queue


def parse_rate(text: str) -> float | None:
    """The optional "at most N per second" field; raises ``ValueError`` for a bad value."""
    if not text.strip():
        return None
    try:
        rate = float(text)
    except ValueError:
        rate = 0.0
    if not 0 < rate <= 1_000_000:
        raise ValueError(f"Rate: must be a number of dead letters per second above 0, not {text!r}")
    return rate


@router.get("/queues/{name:path}/bulk/{action}")
async def confirm_bulk(request: Request, name: str, action: str) -> Response:
    """The confirmation page: the filter, and how many dead letters match it when the store
    counts them without a scan (or when ``count=1`` asks)."""
    queue = _target(request, name, action)
    if not isinstance(queue, Queue):
        return queue
    form, where = (
        FilterForm.from_query(request.query_params),
        Where.from_query(request.query_params),
    )
    context = {"name": name, "action": action, "verb": BULK_ACTIONS[action], "form": form,
               "where": where, "count": None, "error": ""}  # fmt: skip
    try:
        flt = form.to_filter()
    except ValueError as exc:
        context["error"] = str(exc)
        return render(request, "bulk_confirm.html", context, status_code=400)
    count = (await queue.search_dead_letters(flt, limit=1)).total
    if count is None and request.query_params.get("count") == "1":
        count = await queue.count_dead_letters(flt)
    context["count"] = count
    return render(request, "bulk_confirm.html", context)


@router.post("/queues/{name:path}/bulk/{action}")
async def start_bulk(request: Request, name: str, action: str) -> Response:
    """Start replaying or purging every dead letter that matches the posted filter, in the
    background; then show its progress."""
    queue = _target(request, name, action)
    if not isinstance(queue, Queue):
        return queue
    fields = await form_fields(request)
    form, where = FilterForm.from_query(fields), Where.from_query(fields)
    try:
        rate = parse_rate(fields.get("rate", "")[:MAX_FIELD])
        flt = form.to_filter()
        if flt == DeadLetterFilter() and fields.get("all") != "yes":
            raise ValueError("no filter: tick 'every dead letter' to act on all of them")
        operation = await operations(request).start(
            "replay" if action == "replay" else "purge", queue.name, flt, rate=rate
        )
    except (LazarusError, ValueError) as exc:
        return back_to_list(
            request, name, fields, f"{BULK_ACTIONS[action]} failed: {exc}", error=True
        )
    # The list to go back to afterwards: the same filter, from the newest page.
    back = query({**form.items(), "limit": where.limit})
    return RedirectResponse(f"/dashboard/operations/{operation.id}?{back}", status_code=303)


@router.get("/operations/{operation_id}")
async def progress(request: Request, operation_id: str) -> Response:
    """Where a bulk operation stands; the page reloads itself while it runs."""
    operation = await operations(request).get(operation_id)
    if operation is None:
        return no_such(request, f"There is no bulk operation {operation_id!r} (any more).")
    form, where = (
        FilterForm.from_query(request.query_params),
        Where.from_query(request.query_params),
    )
    action = operation.action
    status = operation.shown_status(now_ms())
    context = {
        "operation": operation, "status": status, "verb": BULK_ACTIONS[action],
        "past": PAST[action], "doing": DOING[action], "form": form, "where": where.first(),
        "name": operation.queue,
        "refresh": REFRESH_SECONDS if status in ("running", "interrupted") else 0,
    }  # fmt: skip
    return render(request, "bulk_progress.html", context)


@router.post("/operations/{operation_id}/cancel")
async def cancel(request: Request, operation_id: str) -> Response:
    """Cancel a bulk operation wherever it runs; then show where it stopped."""
    with contextlib.suppress(OperationEnded):  # it ended meanwhile: its page says how
        await operations(request).cancel(operation_id)
    back = request.url.query
    target = f"/dashboard/operations/{operation_id}" + (f"?{back}" if back else "")
    return RedirectResponse(target, status_code=303)
