"""Changing a job where it is over HTTP: ``PATCH /api/queues/{name}/jobs/{id}`` sets any of
its data, priority and delay at once, all or none (:meth:`~lazarus.Queue.change_job`).

A field the body leaves out is kept; ``"data": null`` makes the data JSON null. A body without
any field, a key it does not take, or a value the library refuses (data JSON cannot hold) is
a 422 naming the field, and nothing is written. A dead letter, or a delay for a job that is not
delayed, is a 409 ``job_state_conflict``.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field

from ..errors import JobStateError
from ..job_options import MAX_DURATION_MS, MAX_PRIORITY
from ._deps import (
    AUTH_ERRORS,
    CONFLICT,
    NOT_FOUND,
    ApiError,
    JobId,
    Ops,
    QueueName,
    require_token,
)
from .queues import existing_queue, job_of
from .schemas import JobOut

router = APIRouter(prefix="/api/queues", tags=["queues"], responses=AUTH_ERRORS)
FIELDS = ("data", "priority", "delay")


class JobChangeIn(BaseModel):
    """What to change of a job: any of ``data``, ``priority`` and ``delay``; a field left out
    is kept."""

    model_config = ConfigDict(extra="forbid")

    data: Any = Field(None, description="The job's new data: any JSON value, null included.")
    priority: int | None = Field(
        None, ge=0, le=MAX_PRIORITY, strict=True,
        description="1 the highest, 0 none; a waiting job is placed again by it.",
    )  # fmt: skip
    delay: int | None = Field(
        None, ge=0, le=MAX_DURATION_MS, strict=True,
        description="ms from now until a delayed job is due (a delayed job only).",
    )  # fmt: skip


def _changes(body: JobChangeIn) -> dict[str, Any]:
    """The keywords of ``change_job`` that ``body`` gives; a 422 when it gives none, or a
    null priority or delay (which would otherwise read as "keep it")."""
    changes = {field: getattr(body, field) for field in FIELDS if field in body.model_fields_set}
    if not changes:
        message = "body: nothing to change: give data, priority or delay"
        raise ApiError(422, "invalid_parameter", message, field="body")
    for field in ("priority", "delay"):
        if field in changes and changes[field] is None:
            message = f"{field}: must be an integer, not null (leave it out to keep it)"
            raise ApiError(422, "invalid_parameter", message, field=field)
    return changes


@router.patch("/{name}/jobs/{id}", summary="Change a job's data, priority or delay",
              dependencies=[Depends(require_token)],
              responses={**NOT_FOUND, **CONFLICT})  # fmt: skip
async def change_job(ops: Ops, name: QueueName, id: JobId, body: JobChangeIn) -> JobOut:
    """Set the fields given, at once, where the job is (its state stays, but a new priority
    moves a ready job between waiting and prioritized); answers the job. 409 for a dead letter,
    or a delay for a job that is not delayed."""
    changes = _changes(body)
    await existing_queue(ops, name)
    queue = ops.queue(name)
    try:
        state = await queue.change_job(id, **changes)
    except (TypeError, ValueError) as exc:  # what the library refused names its field
        field = next((f for f in FIELDS if str(exc).startswith(f)), "body")
        raise ApiError(422, "invalid_parameter", str(exc), field=field) from None
    except JobStateError as exc:  # the message says which rule refused it
        raise ApiError(409, "job_state_conflict", str(exc)) from None
    return await job_of(queue, id, state)
