"""What the dashboard changes about one dead letter: replay it, or delete it. (Bulk replay and
purge are in :mod:`~lazarus.dashboard.bulk`.)

Every action is a POST (CSRF-checked by the route class) that answers with a 303 back to the
dead letter list, keeping its filter and page, with the outcome in the ``flash`` parameter.
"""

from __future__ import annotations

from urllib.parse import quote

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from ..errors import JobNotFoundError, JobStateError, LazarusError, NotADeadLetterError
from .filters import FilterForm, Where
from .render import query
from .routing import SignedInRoute, find_queue, no_such
from .security import actor, flash_params

router = APIRouter(
    prefix="/dashboard/queues/{name:path}", route_class=SignedInRoute, include_in_schema=False
)


async def form_fields(request: Request) -> dict[str, str]:
    """The POSTed form's text fields."""
    return {k: v for k, v in (await request.form()).items() if isinstance(v, str)}


def list_path(name: str | None) -> str:
    """The path of the dead letter list of queue ``name`` (of every one for ``None``)."""
    if name is None:
        return "/dashboard/dead-letters"
    return f"/dashboard/queues/{quote(name, safe='')}/dead-letters"


def back_to_list(
    request: Request, name: str, fields: dict[str, str], message: str, *, error: bool = False
) -> RedirectResponse:
    """A 303 to the dead letter list with the filter and page of ``fields`` and a (signed)
    message."""
    form, where = FilterForm.from_query(fields), Where.from_query(fields)
    params = {**form.items(), **where.items(), **flash_params(request, message, error=error)}
    return RedirectResponse(f"{list_path(name)}?{query(params)}", status_code=303)


def _gone(job_id: str, exc: Exception) -> str:
    if isinstance(exc, JobNotFoundError):
        return f"Dead letter {job_id} is gone: someone replayed or deleted it first."
    if isinstance(exc, NotADeadLetterError):
        return f"Job {job_id} is not a dead letter; it was left as it is."
    if isinstance(exc, JobStateError):
        return f"Dead letter {job_id} cannot be replayed now: someone replayed it first?"
    return f"Could not handle {job_id}: {exc}"


@router.post("/dead-letters/{job_id}/replay")
async def replay(request: Request, name: str, job_id: str) -> Response:
    """Replay one dead letter into its source queue."""
    queue = find_queue(request, name)
    if queue is None:
        return no_such(request, f"There is no queue called {name!r}.")
    fields = await form_fields(request)
    try:
        new_id = await queue.replay_dead_letter(job_id, actor=actor(request))
    except (LazarusError, ValueError) as exc:
        return back_to_list(request, name, fields, _gone(job_id, exc), error=True)
    return back_to_list(request, name, fields, f"Replayed dead letter {job_id} as job {new_id}.")


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
        return back_to_list(request, name, fields, _gone(job_id, exc), error=True)
    return back_to_list(request, name, fields, f"Deleted dead letter {job_id}.")
