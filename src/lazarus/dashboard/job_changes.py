"""Changing a job where it is, from its page: a new priority for a job that waits (waiting,
prioritized or delayed), and a new delay, in seconds from now, for a delayed one
(:meth:`~lazarus.Queue.change_job`, both at once).

A POST (CSRF-checked by the route class) answering with a 303 to the job's page, the outcome
in ``flash``. A field left empty is kept; a value that is not a whole number in range, or no
value at all, is an error notice and nothing is written.
"""

from __future__ import annotations

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from ..errors import LazarusError
from ..job_options import MAX_DURATION_MS, MAX_PRIORITY
from .queue_actions import fields
from .queue_pages import missing
from .render import query, segment
from .routing import SignedInRoute, existing_queue
from .security import flash_params

router = APIRouter(
    prefix="/dashboard/queues/{name:path}", route_class=SignedInRoute, include_in_schema=False
)

# form field -> (what the notice calls it, its largest value, ms per unit)
FIELDS = {
    "priority": ("the priority", MAX_PRIORITY, 1),
    "delay_s": ("the delay", MAX_DURATION_MS // 1000, 1000),
}


def _changes(form: dict[str, str]) -> dict[str, int]:
    """``change_job``'s keywords from the form's filled-in fields; ``ValueError`` saying what
    is wrong."""
    changes: dict[str, int] = {}
    for field, (label, largest, unit) in FIELDS.items():
        value = form.get(field, "").strip()
        if not value:
            continue
        if not (value.isascii() and value.isdigit()) or int(value) > largest:
            raise ValueError(f"{label} must be a whole number from 0 to {largest}")
        changes[field.removesuffix("_s")] = int(value) * unit
    if not changes:
        raise ValueError("give a priority or a delay")
    return changes


@router.post("/jobs/{job_id}/change")
async def change_job(request: Request, name: str, job_id: str) -> Response:
    """Give one job a new priority and, if it is delayed, a new delay; back to its page."""
    queue = await existing_queue(request, name)
    if queue is None:
        return missing(request, name)
    error = False
    try:
        changes = _changes(await fields(request))
        state = await queue.change_job(job_id, **changes)
    except (LazarusError, ValueError, TypeError) as exc:  # a JobStateError says which rule
        message, error = f"Nothing was changed: {exc}.", True
    else:
        done = " and ".join(f"the {field}" for field in changes)
        message = f"Changed {done}: the job is {state} now."
    notice = flash_params(request, message, error=error)
    target = f"/dashboard/queues/{segment(name)}/jobs/{segment(job_id)}"
    return RedirectResponse(f"{target}?{query(notice)}", 303)
