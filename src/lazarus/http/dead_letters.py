"""The OJS dead-letter binding: list, get, retry and delete dead letters, one or in bulk.

Dead letters live in a named dead letter queue, given by the ``dlq`` query parameter of every
route; OJS's ``queue`` filter is the *source* queue the job failed in. The same router is
mounted at ``/ojs/v1/dead-letter`` and ``/ojs/v1/admin/dead-letter``.
"""

from __future__ import annotations

import asyncio
import datetime
import re
from typing import Annotated

from fastapi import APIRouter, Body, Depends, Query, Response

from ..dead_letter import DeadLetterFilter
from ..job import DeadLetterMetadata, Job
from ..queue import Queue
from ._deps import (
    AUTH_ERRORS,
    CONFLICT,
    ERRORS,
    NOT_FOUND,
    ApiError,
    DlqName,
    JobId,
    Ops,
    checked_name,
    require_token,
)
from .params import BulkRequest, FilterParams, RetryChanges
from .schemas import (
    BulkResult,
    DeadLetterOut,
    DeadLetterPage,
    DeadLetterStatsOut,
    ErrorTypeCount,
    ReasonCount,
    ReplayResult,
    SourceQueueCount,
    TypeCount,
    dead_letter_out,
    iso,
)

router = APIRouter(tags=["dead letters"], responses=ERRORS)
_AUTH = [Depends(require_token)]
_MS = re.compile(r"-?\d{1,16}")

Filters = Annotated[FilterParams, Query()]


def parse_time(value: str, field: str) -> int:
    """``value`` (ms since the epoch, or ISO 8601; UTC when it has no offset) in ms."""
    text = value.strip()
    if _MS.fullmatch(text):
        return int(text)
    if text[-1:] in ("Z", "z"):
        text = text[:-1] + "+00:00"
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        message = f"{field} must be an ISO 8601 time or ms since the epoch, got {value!r}"
        raise ApiError(422, "invalid_parameter", message, field=field) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return int(moment.timestamp() * 1000)


def to_filter(params: FilterParams) -> DeadLetterFilter:
    """The library filter for the API's filter parameters; bad values raise a 422."""
    name = name_prefix = None
    if params.job_type is not None and params.job_type.endswith("*"):
        name_prefix = params.job_type[:-1] or None  # "email.*" matches "email.send"
    else:
        name = params.job_type
    try:
        return DeadLetterFilter(
            name=name,
            name_prefix=name_prefix,
            source_queue=None if params.queue is None else checked_name(params.queue, "queue"),
            error_type=params.error_type,
            failed_reason=params.failed_reason,
            payload_contains=params.args,
            reason=params.reason,
            since=None if params.since is None else parse_time(params.since, "since"),
            until=None if params.until is None else parse_time(params.until, "until"),
        )
    except (TypeError, ValueError) as exc:
        raise ApiError(422, "invalid_parameter", str(exc), field="since") from None


async def _dead_letter(queue: Queue, job_id: str) -> tuple[Job, DeadLetterMetadata]:
    job = await queue.peek_dead_letter(job_id)
    if job is None:
        raise ApiError(404, "not_found", f"no dead letter {job_id!r} in {queue.name!r}")
    if job.dead_letter is None:
        message = f"job {job_id!r} in {queue.name!r} is not a dead letter"
        raise ApiError(409, "not_a_dead_letter", message)
    return job, job.dead_letter


@router.get("", summary="List dead letters (paginated, newest first)")
async def list_dead_letters(
    ops: Ops,
    dlq: DlqName,
    filters: Filters,
    page: Annotated[int, Query(ge=1, le=1_000_000)] = 1,
    limit: Annotated[int, Query(ge=1, le=500)] = 20,
) -> DeadLetterPage:
    """The dead letters of ``dlq`` that match every given filter."""
    flt, queue = to_filter(filters), ops.queue(dlq)
    jobs, total = await asyncio.gather(
        queue.find_dead_letters(flt, limit=limit, offset=(page - 1) * limit),
        queue.count_dead_letters(flt),
    )
    data = [dead_letter_out(j, j.dead_letter) for j in jobs if j.dead_letter is not None]
    pages = (total + limit - 1) // limit
    return DeadLetterPage(data=data, total=total, page=page, limit=limit, totalPages=pages)


@router.get("/stats", summary="Dead letter totals by type, error, source queue and reason")
async def dead_letter_stats(ops: Ops, dlq: DlqName, filters: Filters) -> DeadLetterStatsOut:
    """Totals of the matching dead letters of ``dlq``, with the oldest and newest."""
    stats = await ops.queue(dlq).get_dead_letter_stats(to_filter(filters))
    return DeadLetterStatsOut(
        total=stats.total,
        byType=[TypeCount(jobType=k, count=v) for k, v in stats.by_name.items()],
        byErrorType=[ErrorTypeCount(errorType=k, count=v) for k, v in stats.by_error_type.items()],
        bySourceQueue=[
            SourceQueueCount(queue=k, count=v) for k, v in stats.by_source_queue.items()
        ],
        byReason=[ReasonCount(reason=k, count=v) for k, v in stats.by_reason.items()],
        oldest=iso(stats.oldest),
        newest=iso(stats.newest),
    )


def _bulk_filter(
    query: FilterParams, dry_run: bool, everything: bool, body: BulkRequest | None
) -> tuple[DeadLetterFilter, bool]:
    """The filter of a bulk operation (from the body or the query, not both) and dry_run."""
    params = query
    if body is not None and body.filter is not None:
        if query.model_dump(exclude_none=True):
            message = "give the filter in the body or in the query string, not both"
            raise ApiError(422, "invalid_parameter", message, field="filter")
        params = body.filter
    dry_run = dry_run or (body is not None and body.dry_run)
    everything = everything or (body is not None and body.all)
    flt = to_filter(params)
    if not dry_run and not everything and flt == DeadLetterFilter():
        message = "no filter given: pass a filter, or all=true to act on every dead letter"
        raise ApiError(422, "filter_required", message, field="filter")
    return flt, dry_run


DryRun = Annotated[bool, Query(description="Only count what would be touched.")]
Everything = Annotated[bool, Query(alias="all", description="Allow an empty filter.")]
Bulk = Annotated[BulkRequest | None, Body()]


@router.post("/retry", summary="Retry every matching dead letter", dependencies=_AUTH,
             responses=AUTH_ERRORS)  # fmt: skip
async def retry_dead_letters(
    ops: Ops, dlq: DlqName, filters: Filters, body: Bulk = None,
    dry_run: DryRun = False, everything: Everything = False,
) -> BulkResult:  # fmt: skip
    """Replay the matching dead letters of ``dlq`` into their source queues."""
    flt, dry = _bulk_filter(filters, dry_run, everything, body)
    queue = ops.queue(dlq)
    count = await (queue.count_dead_letters(flt) if dry else queue.replay_all_dead_letters(flt))
    return BulkResult(count=count, dryRun=dry)


@router.delete("", summary="Delete every matching dead letter", dependencies=_AUTH,
               responses=AUTH_ERRORS)  # fmt: skip
async def delete_dead_letters(
    ops: Ops, dlq: DlqName, filters: Filters, body: Bulk = None,
    dry_run: DryRun = False, everything: Everything = False,
) -> BulkResult:  # fmt: skip
    """Purge the matching dead letters of ``dlq`` for good."""
    flt, dry = _bulk_filter(filters, dry_run, everything, body)
    queue = ops.queue(dlq)
    count = await (queue.count_dead_letters(flt) if dry else queue.purge_dead_letters(flt))
    return BulkResult(count=count, dryRun=dry)


@router.get("/{id}", summary="Get one dead letter", responses={**NOT_FOUND, **CONFLICT})
async def get_dead_letter(ops: Ops, dlq: DlqName, id: JobId) -> DeadLetterOut:
    """One dead letter of ``dlq`` with its ``_dlqMeta``."""
    job, meta = await _dead_letter(ops.queue(dlq), id)
    return dead_letter_out(job, meta)


@router.post(
    "/{id}/retry",
    summary="Retry one dead letter, optionally with changes",
    dependencies=_AUTH,
    responses={**AUTH_ERRORS, **NOT_FOUND, **CONFLICT},
)
async def retry_dead_letter(
    ops: Ops, dlq: DlqName, id: JobId, changes: Annotated[RetryChanges | None, Body()] = None
) -> ReplayResult:
    """Replay one dead letter into its source queue (or ``changes.queue``) as a new job."""
    changes = changes or RetryChanges()
    other = None if changes.queue is None else checked_name(changes.queue, "queue")
    queue = ops.queue(dlq)
    job, meta = await _dead_letter(queue, id)
    target = meta.source_queue if other is None else other
    attempts = changes.retry.max_attempts if changes.retry is not None else None
    try:
        new_id = await queue.replay_dead_letter(
            id, attempts=attempts, priority=changes.priority, queue=target
        )
    except (TypeError, ValueError) as exc:
        raise ApiError(422, "invalid_parameter", str(exc)) from None
    return ReplayResult(id=new_id, queue=target, name=job.name, replayedFrom=id)


@router.delete(
    "/{id}",
    summary="Delete one dead letter",
    status_code=204,
    dependencies=_AUTH,
    responses={**AUTH_ERRORS, **NOT_FOUND, **CONFLICT},
)
async def delete_dead_letter(ops: Ops, dlq: DlqName, id: JobId) -> Response:
    """Purge one dead letter of ``dlq`` for good."""
    await ops.queue(dlq).purge_dead_letter(id)
    return Response(status_code=204)
