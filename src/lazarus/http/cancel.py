"""Cancelling a job over HTTP: ``POST /api/queues/{name}/jobs/{id}/cancel``, with an optional
body ``{"reason": str}`` (:meth:`~lazarus.Queue.cancel_job`).

The answer is the job in the state the request leaves it in: ``active`` when its worker
stops it at its next lease renewal, ``waiting`` (or ``paused``) when the next worker to claim
it records the failure without running it. A bad reason, or a key the body does not take, is
a 422 naming the field; a job that has ended is a 409 ``job_state_conflict``. Either way
nothing is written.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Depends
from pydantic import BaseModel, ConfigDict, Field

from .._cancelling import DEFAULT_REASON
from .._failure import DEFAULT_MAX_ERROR_BYTES
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


class JobCancelIn(BaseModel):
    """Why the job is cancelled; the body, and its ``reason``, may be left out."""

    model_config = ConfigDict(extra="forbid")

    reason: str = Field(
        DEFAULT_REASON, strict=True,
        description=(
            "The message the job fails with (its failedReason): a non-empty string of at "
            f"most {DEFAULT_MAX_ERROR_BYTES} bytes of JSON."
        ),
    )  # fmt: skip


@router.post("/{name}/jobs/{id}/cancel", summary="Cancel a job that has not ended",
             dependencies=[Depends(require_token)],
             responses={**NOT_FOUND, **CONFLICT})  # fmt: skip
async def cancel_job(
    ops: Ops,
    name: QueueName,
    id: JobId,
    body: Annotated[JobCancelIn | None, Body()] = None,
) -> JobOut:
    """Make the job fail with JobCancelledError (not retried), where its failures go; answers
    the job. ``active``: its worker stops it when it next renews its leases (within about a
    second: it looks for cancelled running jobs every 0.5 s). ``waiting`` or ``paused``: it
    is first in line, and the next worker to claim it records the failure without running
    it. 409 for a job that has ended."""
    reason = DEFAULT_REASON if body is None else body.reason
    await existing_queue(ops, name)
    queue = ops.queue(name)
    try:
        state = await queue.cancel_job(id, reason)
    except (TypeError, ValueError) as exc:  # what the library refused names its field
        field = "reason" if str(exc).startswith("reason") else "id"
        raise ApiError(422, "invalid_parameter", str(exc), field=field) from None
    return await job_of(queue, id, state)
