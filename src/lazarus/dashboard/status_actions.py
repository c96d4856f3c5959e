"""What the dashboard changes about a dead letter's lifecycle: flag it for a human, reopen it,
archive it with a note, and replay it with a changed payload or into another queue.

Like :mod:`~lazarus.dashboard.actions`, every action is a CSRF-checked POST answering with a
303 back to the dead letter list and a message. The operator is the signed-in credential
(without authentication: the form's ``operator`` field, else ``dashboard``), recorded with
the note in
the dead letter's timeline.
"""

from __future__ import annotations

import json

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from ..errors import LazarusError
from .actions import back_to_list, form_fields
from .routing import SignedInRoute, find_queue, no_such
from .security import actor

router = APIRouter(
    prefix="/dashboard/queues/{name}", route_class=SignedInRoute, include_in_schema=False
)
_METHODS = {
    "flag": ("flag_dead_letter", "Flagged {id} for a human."),
    "reopen": ("reopen_dead_letter", "Put {id} back to pending."),
    "archive": ("archive_dead_letter", "Archived {id}."),
}


def _who(request: Request, fields: dict[str, str]) -> dict[str, str | None]:
    return {"actor": actor(request, fields.get("operator", "")),
            "note": fields.get("note", "").strip() or None}  # fmt: skip


@router.post("/dead-letters/{job_id}/status")
async def change_status(request: Request, name: str, job_id: str) -> Response:
    """Flag, reopen or archive one dead letter (the form's ``action``)."""
    queue = find_queue(request, name)
    if queue is None:
        return no_such(request, f"There is no queue called {name!r}.")
    fields = await form_fields(request)
    action = _METHODS.get(fields.get("action", ""))
    if action is None:
        return back_to_list(request, name, fields, "Unknown action.", error=True)
    method, done = action
    try:
        await getattr(queue, method)(job_id, **_who(request, fields))
    except (LazarusError, ValueError, TypeError) as exc:
        return back_to_list(request, name, fields, f"Could not change {job_id}: {exc}", error=True)
    return back_to_list(request, name, fields, done.format(id=job_id))


@router.post("/dead-letters/{job_id}/replay-changed")
async def replay_changed(request: Request, name: str, job_id: str) -> Response:
    """Replay one dead letter with the form's ``data`` (JSON; empty keeps the payload) into
    the form's ``queue`` (empty: its source queue)."""
    queue = find_queue(request, name)
    if queue is None:
        return no_such(request, f"There is no queue called {name!r}.")
    fields = await form_fields(request)
    changes: dict[str, object] = dict(_who(request, fields))
    if fields.get("data", "").strip():
        try:
            changes["data"] = json.loads(fields["data"])
        except ValueError as exc:
            return back_to_list(
                request, name, fields, f"The payload is not valid JSON: {exc}", error=True
            )
    if fields.get("queue", "").strip():
        changes["queue"] = fields["queue"].strip()
    try:
        new_id = await queue.replay_dead_letter(job_id, **changes)  # type: ignore[arg-type]
    except (LazarusError, ValueError, TypeError) as exc:
        return back_to_list(request, name, fields, f"Could not replay {job_id}: {exc}", error=True)
    return back_to_list(request, name, fields, f"Replayed dead letter {job_id} as job {new_id}.")
