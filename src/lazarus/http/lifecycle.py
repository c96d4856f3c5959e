"""A dead letter's lifecycle over HTTP: set its status, flag it for a human, reopen it,
archive it with a note, replay it with a changed payload or into another queue, and settle the
``processing`` dead letters whose replayed job will never report back.

Every route names the dead letter queue with the ``dlq`` query parameter, needs the bearer
token, and records ``operator:<name of the token>`` in the timeline (without authentication,
``operator:<operator>`` from the body; ``api`` by default). A dead letter in a status the
action cannot leave is a 409 ``job_state_conflict``.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends
from pydantic import BaseModel, ConfigDict, Field

from ..dead_letter import DeadLetterStatus
from ..job_options import MAX_PRIORITY
from ._deps import (
    AUTH_ERRORS,
    CONFLICT,
    ERRORS,
    NOT_FOUND,
    ApiError,
    Caller,
    DlqName,
    JobId,
    Ops,
    checked_name,
    require_token,
)
from .auth import Principal
from .schemas import DeadLetterOut, ReplayResult, dead_letter_out

router = APIRouter(
    prefix="/api/dead-letters", tags=["dead letter lifecycle"], responses=ERRORS,
    dependencies=[Depends(require_token)],
)  # fmt: skip
_RESPONSES: dict[int | str, dict[str, Any]] = {**AUTH_ERRORS, **NOT_FOUND, **CONFLICT}
OPERATOR = Field(default="api", min_length=1, max_length=190, pattern=r"^[^\s,]+$",
                 description="Who acts: recorded as operator:<operator>.")  # fmt: skip
NOTE = Field(default=None, min_length=1, max_length=2000, description="Why, for the timeline.")


class StatusAction(BaseModel):
    """An operator's status change: who, and why."""

    model_config = ConfigDict(extra="forbid")

    operator: str = OPERATOR
    note: str | None = NOTE


class StatusChangeIn(StatusAction):
    """Move a dead letter to ``status``; with ``expect``, only from one of those statuses."""

    status: DeadLetterStatus
    expect: list[DeadLetterStatus] | None = Field(default=None, min_length=1)


class ReplayIn(StatusAction):
    """Replay one dead letter: ``data`` replaces the payload (any JSON value; the old one is
    kept in the timeline), ``queue`` replays into another queue."""

    data: Any = None
    queue: str | None = Field(default=None, min_length=1, max_length=200)
    attempts: int | None = Field(default=None, ge=1, strict=True)
    priority: int | None = Field(default=None, ge=0, le=MAX_PRIORITY, strict=True)


class SettleResult(BaseModel):
    settled: int


async def _view(ops: Ops, dlq: str, dead_letter_id: str) -> DeadLetterOut:
    job = await ops.queue(dlq).peek_dead_letter(dead_letter_id)
    if job is None or job.dead_letter is None:
        raise ApiError(404, "not_found", f"no dead letter {dead_letter_id!r} in {dlq!r}")
    return dead_letter_out(job, job.dead_letter)


def _who(action: StatusAction, caller: Principal) -> dict[str, Any]:
    # The credential names who acts; only without authentication does the body say so.
    return {"actor": caller.actor(action.operator), "note": action.note}


@router.post("/{id}/status", summary="Set a dead letter's status", responses=_RESPONSES)
async def set_status(
    ops: Ops, caller: Caller, dlq: DlqName, id: JobId, body: StatusChangeIn
) -> DeadLetterOut:
    """Any of the six statuses, recorded in the timeline; 409 when ``expect`` does not hold."""
    changed = await ops.queue(dlq).set_dead_letter_status(
        id, body.status, expect=body.expect, **_who(body, caller)
    )
    if not changed:
        raise ApiError(409, "job_state_conflict", f"dead letter {id!r} is not in {body.expect}")
    return await _view(ops, dlq, id)


Action = Annotated[StatusAction | None, Body()]


@router.post("/{id}/flag", summary="Flag a dead letter for a human", responses=_RESPONSES)
async def flag(
    ops: Ops, caller: Caller, dlq: DlqName, id: JobId, body: Action = None
) -> DeadLetterOut:
    """``pending`` or ``failed`` → ``manual``."""
    await ops.queue(dlq).flag_dead_letter(id, **_who(body or StatusAction(), caller))
    return await _view(ops, dlq, id)


@router.post("/{id}/reopen", summary="Put a dead letter back to pending", responses=_RESPONSES)
async def reopen(
    ops: Ops, caller: Caller, dlq: DlqName, id: JobId, body: Action = None
) -> DeadLetterOut:
    """``manual``, ``failed``, ``archived`` or ``resolved`` → ``pending``."""
    await ops.queue(dlq).reopen_dead_letter(id, **_who(body or StatusAction(), caller))
    return await _view(ops, dlq, id)


@router.post("/{id}/archive", summary="Archive a dead letter with a note", responses=_RESPONSES)
async def archive(
    ops: Ops, caller: Caller, dlq: DlqName, id: JobId, body: Action = None
) -> DeadLetterOut:
    """``pending``, ``manual``, ``failed`` or ``resolved`` → ``archived``."""
    await ops.queue(dlq).archive_dead_letter(id, **_who(body or StatusAction(), caller))
    return await _view(ops, dlq, id)


@router.post("/{id}/replay", summary="Replay one dead letter, maybe changed", responses=_RESPONSES)
async def replay(
    ops: Ops,
    caller: Caller,
    dlq: DlqName,
    id: JobId,
    body: Annotated[ReplayIn | None, Body()] = None,
) -> ReplayResult:
    """A new job from the dead letter, which becomes ``processing`` until the job's end."""
    body = body or ReplayIn()
    queue = ops.queue(dlq)
    job = await queue.peek_dead_letter(id)
    if job is None or job.dead_letter is None:
        raise ApiError(404, "not_found", f"no dead letter {id!r} in {dlq!r}")
    target = (
        job.dead_letter.source_queue if body.queue is None else checked_name(body.queue, "queue")
    )
    changes: dict[str, Any] = {"attempts": body.attempts, "priority": body.priority}
    if "data" in body.model_fields_set:
        changes["data"] = body.data
    try:
        new_id = await queue.replay_dead_letter(id, queue=target, **changes, **_who(body, caller))
    except (TypeError, ValueError) as exc:
        raise ApiError(422, "invalid_parameter", str(exc)) from None
    return ReplayResult(id=new_id, queue=target, name=job.name, replayedFrom=id)


@router.post(
    "/settle", summary="Settle processing dead letters whose job is gone", responses=AUTH_ERRORS
)
async def settle(ops: Ops, dlq: DlqName) -> SettleResult:
    """Back to ``pending`` (job removed, or failed without a dead letter queue) or
    ``resolved`` (completed without resolving it)."""
    return SettleResult(settled=await ops.queue(dlq).settle_dead_letters())
