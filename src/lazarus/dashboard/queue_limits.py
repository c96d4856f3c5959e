"""A queue's limits across its workers, from its page: set or remove its global concurrency
(:meth:`~lazarus.Queue.set_global_concurrency`) and its rate limit
(:meth:`~lazarus.Queue.set_global_rate_limit`).

Each form is a POST (CSRF-checked, and refused to a viewer, by the route class) whose
``action`` is ``set`` (the default: what Enter submits) or ``remove``. Done, it answers with a
303 to the queue's page, the outcome in ``flash``. A value that is not a whole number in range
re-renders the queue's page (400) with a notice naming the field and the values as typed,
and nothing is written.
"""

from __future__ import annotations

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from .._limiter import MAX_CONCURRENCY
from ..job_options import MAX_DURATION_MS
from ..queue import Queue
from .queue_actions import back, fields
from .queue_pages import missing, queue_context
from .render import render
from .routing import SignedInRoute, existing_queue

router = APIRouter(
    prefix="/dashboard/queues/{name:path}", route_class=SignedInRoute, include_in_schema=False
)

# form field -> (what the notice calls its unit, its largest value)
BOUNDS = {
    "limit": ("", MAX_CONCURRENCY),
    "max": ("", MAX_CONCURRENCY),
    "duration": (" of ms", MAX_DURATION_MS),
}
ACTIONS = ("set", "remove")


def _jobs(count: int) -> str:
    return f"{count} job{'s' if count != 1 else ''}"


def _whole(form: dict[str, str], field: str) -> int:
    """The form's ``field`` as an int in its bounds; ``ValueError`` naming the field."""
    unit, largest = BOUNDS[field]
    value = form.get(field, "").strip()
    if not (value.isascii() and value.isdigit() and len(value) <= 20) or not (
        1 <= int(value) <= largest
    ):
        raise ValueError(f"{field} must be a whole number{unit} from 1 to {largest}")
    return int(value)


def _values(form: dict[str, str], *names: str) -> list[int]:
    """The form's ``names`` as ints in their bounds; ``ValueError`` naming each bad one."""
    values, problems = [], []
    for name in names:
        try:
            values.append(_whole(form, name))
        except ValueError as exc:
            problems.append(str(exc))
    if problems:
        raise ValueError("; ".join(problems))
    return values


def _action(form: dict[str, str]) -> str:
    action = form.get("action") or "set"
    if action not in ACTIONS:
        raise ValueError(f"action must be set or remove, not {action[:20]!r}")
    return action


async def _refused(
    request: Request, queue: Queue, name: str, form: dict[str, str], problem: str
) -> Response:
    """The queue's page again, with ``problem`` and the values as typed."""
    context = await queue_context(request, queue, name)
    typed = {k: form.get(k, "")[:40] for k in BOUNDS}
    context.update(flash=f"Nothing was changed: {problem}.", flash_kind="error",
                   limits_form=typed)  # fmt: skip
    return render(request, "queue.html", context, status_code=400)


@router.post("/limits/concurrency")
async def concurrency(request: Request, name: str) -> Response:
    """Set (``limit``) or remove the queue's global concurrency; back to its page."""
    queue = await existing_queue(request, name)
    if queue is None:
        return missing(request, name)
    form = await fields(request)
    try:
        if _action(form) == "remove":
            await queue.remove_global_concurrency()
            return back(request, name, f"Removed the global concurrency of {name}.")
        (limit,) = _values(form, "limit")
    except ValueError as exc:
        return await _refused(request, queue, name, form, str(exc))
    await queue.set_global_concurrency(limit)
    message = f"Set the global concurrency of {name}: at most {_jobs(limit)} active at once."
    return back(request, name, message)


@router.post("/limits/rate")
async def rate_limit(request: Request, name: str) -> Response:
    """Set (``max`` jobs per ``duration`` ms) or remove the queue's rate limit; back to its
    page."""
    queue = await existing_queue(request, name)
    if queue is None:
        return missing(request, name)
    form = await fields(request)
    try:
        if _action(form) == "remove":
            await queue.remove_global_rate_limit()
            return back(request, name, f"Removed the rate limit of {name} and its window.")
        most, duration = _values(form, "max", "duration")
    except ValueError as exc:
        return await _refused(request, queue, name, form, str(exc))
    await queue.set_global_rate_limit(most, duration)
    message = f"Set the rate limit of {name}: at most {_jobs(most)} started per {duration} ms."
    return back(request, name, message)
