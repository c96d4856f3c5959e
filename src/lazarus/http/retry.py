"""Retrying failed jobs over HTTP, and running delayed jobs now: one job, or every failed
(delayed) job of a queue, with a dry run.

They call :meth:`~lazarus.Queue.retry_job`, :meth:`~lazarus.Queue.retry_jobs`,
:meth:`~lazarus.Queue.promote_job` and :meth:`~lazarus.Queue.promote_jobs`; the errors they
raise map to 404 (no such job) and 409 (``job_state_conflict``: the job is not failed, or not
delayed).
"""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, Field

from ._deps import (
    AUTH_ERRORS,
    CONFLICT,
    NOT_FOUND,
    JobId,
    Ops,
    QueueName,
    require_token,
)
from .queues import existing_queue, job_of
from .schemas import JobOut

router = APIRouter(prefix="/api/queues", tags=["queues"], responses=AUTH_ERRORS)
_AUTH = [Depends(require_token)]


class RetryResult(BaseModel):
    """What a bulk retry did, or would do."""

    state: Literal["failed"]
    retried: int = Field(description="Jobs retried; with dryRun, jobs that would be.")
    dry_run: bool = Field(serialization_alias="dryRun")


class PromoteResult(BaseModel):
    """What a bulk promotion did, or would do."""

    promoted: int = Field(description="Delayed jobs made ready; with dryRun, jobs delayed now.")
    dry_run: bool = Field(serialization_alias="dryRun")


@router.post("/{name}/jobs/{id}/retry", summary="Retry one failed job", dependencies=_AUTH,
             responses={**NOT_FOUND, **CONFLICT})  # fmt: skip
async def retry_job(ops: Ops, name: QueueName, id: JobId) -> JobOut:
    """Move a failed job back to waiting with its attempts afresh; 409 unless it is failed."""
    await existing_queue(ops, name)
    queue = ops.queue(name)
    await queue.retry_job(id)
    return await job_of(queue, id)


@router.post("/{name}/jobs/{id}/promote", summary="Run one delayed job now", dependencies=_AUTH,
             responses={**NOT_FOUND, **CONFLICT})  # fmt: skip
async def promote_job(ops: Ops, name: QueueName, id: JobId) -> JobOut:
    """Move a delayed job to waiting (or prioritized) at once; 409 unless it is delayed."""
    await existing_queue(ops, name)
    queue = ops.queue(name)
    return await job_of(queue, id, await queue.promote_job(id))


@router.post("/{name}/retry", summary="Retry every failed job of a queue", dependencies=_AUTH,
             responses=NOT_FOUND, response_model_by_alias=True)  # fmt: skip
async def retry_jobs(
    ops: Ops,
    name: QueueName,
    state: Literal["failed"] = Query("failed", description="The state to retry jobs from."),
    dry_run: bool = Query(False, alias="dryRun", description="Count only; change nothing."),
) -> RetryResult:
    """Retry the jobs that are failed when the call begins, in atomic batches."""
    await existing_queue(ops, name)
    count = await ops.queue(name).retry_jobs(state, dry_run=dry_run)
    return RetryResult(state=state, retried=count, dry_run=dry_run)


@router.post("/{name}/promote", summary="Run every delayed job of a queue now",
             dependencies=_AUTH, responses=NOT_FOUND, response_model_by_alias=True)  # fmt: skip
async def promote_jobs(
    ops: Ops,
    name: QueueName,
    dry_run: bool = Query(False, alias="dryRun", description="Count only; change nothing."),
) -> PromoteResult:
    """Make the jobs that are delayed when the call begins ready now, soonest due first, in
    bounded batches."""
    await existing_queue(ops, name)
    count = await ops.queue(name).promote_jobs(dry_run=dry_run)
    return PromoteResult(promoted=count, dry_run=dry_run)
