"""What the dashboard changes: replay or delete one dead letter, and bulk replay or purge of a
filter after a confirmation page that states how many dead letters it will touch.

Every action is a POST (CSRF-checked by the route class) that answers with a 303 back to the
dead letter list, keeping its filter and page, with the outcome in the ``flash`` parameter.
"""

from __future__ import annotations

from urllib.parse import quote

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from ..errors import JobNotFoundError, LazarusError, NotADeadLetterError
from ..queue import Queue
from .filters import FilterForm, page_and_limit
from .render import query, render
from .routing import SignedInRoute, find_queue, no_such

router = APIRouter(
    prefix="/dashboard/queues/{name}", route_class=SignedInRoute, include_in_schema=False
)

BULK_ACTIONS = {"replay": "Replay", "purge": "Purge"}


async def form_fields(request: Request) -> dict[str, str]:
    """The POSTed form's text fields."""
    return {k: v for k, v in (await request.form()).items() if isinstance(v, str)}


def back_to_list(
    name: str, fields: dict[str, str], message: str, *, error: bool = False
) -> RedirectResponse:
    """A 303 to the dead letter list with the filter and page of ``fields`` and a message."""
    form = FilterForm.from_query(fields)
    page, limit = page_and_limit(fields)
    params = {**form.items(), "page": page, "limit": limit, "flash": message}
    if error:
        params["kind"] = "error"
    url = f"/dashboard/queues/{quote(name, safe='')}/dead-letters?{query(params)}"
    return RedirectResponse(url, status_code=303)


def _gone(job_id: str, exc: Exception) -> str:
    if isinstance(exc, JobNotFoundError):
        return f"Dead letter {job_id} is gone: someone replayed or deleted it first."
    if isinstance(exc, NotADeadLetterError):
        return f"Job {job_id} is not a dead letter; it was left as it is."
    return f"Could not handle {job_id}: {exc}"


@router.post("/dead-letters/{job_id}/replay")
async def replay(request: Request, name: str, job_id: str) -> Response:
    """Replay one dead letter into its source queue."""
    queue = find_queue(request, name)
    if queue is None:
        return no_such(request, f"There is no queue called {name!r}.")
    fields = await form_fields(request)
    try:
        new_id = await queue.replay_dead_letter(job_id)
    except (LazarusError, ValueError) as exc:
        return back_to_list(name, fields, _gone(job_id, exc), error=True)
    return back_to_list(name, fields, f"Replayed dead letter {job_id} as job {new_id}.")


@router.post("/dead-letters/{job_id}/delete")
async def delete(request: Request, name: str, job_id: str) -> Response:
    """Delete one dead letter for good."""
    queue = find_queue(request, name)
    if queue is None:
        return no_such(request, f"There is no queue called {name!r}.")
    fields = await form_fields(request)
    try:
        await queue.purge_dead_letter(job_id)
    except (LazarusError, ValueError) as exc:
        return back_to_list(name, fields, _gone(job_id, exc), error=True)
    return back_to_list(name, fields, f"Deleted dead letter {job_id}.")


def _bulk_target(request: Request, name: str, action: str) -> Queue | Response:
    if action not in BULK_ACTIONS:
        return no_such(request, f"There is no bulk action {action!r}.")
    queue = find_queue(request, name)
    if queue is None:
        return no_such(request, f"There is no queue called {name!r}.")
    return queue


@router.get("/bulk/{action}")
async def confirm_bulk(request: Request, name: str, action: str) -> Response:
    """The confirmation page: what the filter is, and how many dead letters match (a dry run)."""
    queue = _bulk_target(request, name, action)
    if not isinstance(queue, Queue):
        return queue
    form = FilterForm.from_query(request.query_params)
    page, limit = page_and_limit(request.query_params)
    context = {"name": name, "action": action, "verb": BULK_ACTIONS[action], "form": form,
               "page": page, "limit": limit, "count": 0, "error": ""}  # fmt: skip
    try:
        context["count"] = await queue.count_dead_letters(form.to_filter())
    except ValueError as exc:
        context["error"] = str(exc)
        return render(request, "bulk_confirm.html", context, status_code=400)
    return render(request, "bulk_confirm.html", context)


@router.post("/bulk/{action}")
async def run_bulk(request: Request, name: str, action: str) -> Response:
    """Replay or purge every dead letter that matches the posted filter."""
    queue = _bulk_target(request, name, action)
    if not isinstance(queue, Queue):
        return queue
    fields = await form_fields(request)
    try:
        flt = FilterForm.from_query(fields).to_filter()
        if action == "replay":
            done = await queue.replay_all_dead_letters(flt)
        else:
            done = await queue.purge_dead_letters(flt)
    except (LazarusError, ValueError) as exc:
        return back_to_list(name, fields, f"{BULK_ACTIONS[action]} failed: {exc}", error=True)
    noun = "dead letter" if done == 1 else "dead letters"
    past = "Replayed" if action == "replay" else "Purged"
    # Back to the first page: the rows the operator was looking at are gone.
    return back_to_list(name, {**fields, "page": "1"}, f"{past} {done} {noun}.")
