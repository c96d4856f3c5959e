"""The dead letters of one dead letter queue: list, get, retry and delete, one or in bulk.

Dead letters live in a named dead letter queue, given by the ``dlq`` query parameter of every
route; the ``queue`` filter is the *source* queue the job failed in. Mounted at
``/api/dlq``; the Open Job Spec's server-wide dead letter routes are in :mod:`lazarus.ojs`.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Depends, Query, Response

from ..dead_letter import DeadLetterFilter
from ..history import DeadLetterMetadata
from ..job import Job
from ..queue import Queue
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
from .paging import Cursor, Limit, OrderParam, PageNumber, numbered_page, page_out, search
from .params import BulkRequest, FilterParams, RetryChanges, to_filter
from .schemas import (
    BulkResult,
    CountResult,
    DeadLetterOut,
    DeadLetterPage,
    DeadLetterStatsOut,
    ErrorTypeCount,
    ReasonCount,
    ReplayResult,
    SourceQueueCount,
    StatusCount,
    TypeCount,
    dead_letter_out,
    iso,
)

router = APIRouter(tags=["dead letters"], responses=ERRORS)
_AUTH = [Depends(require_token)]

Filters = Annotated[FilterParams, Query()]


async def _dead_letter(queue: Queue, job_id: str) -> tuple[Job, DeadLetterMetadata]:
    job = await queue.peek_dead_letter(job_id)
    if job is None:
        raise ApiError(404, "not_found", f"no dead letter {job_id!r} in {queue.name!r}")
    if job.dead_letter is None:
        message = f"job {job_id!r} in {queue.name!r} is not a dead letter"
        raise ApiError(409, "not_a_dead_letter", message)
    return job, job.dead_letter


@router.get("", summary="List dead letters (by cursor, newest first)")
async def list_dead_letters(
    ops: Ops,
    dlq: DlqName,
    filters: Filters,
    cursor: Cursor = None,
    limit: Limit = 20,
    order: OrderParam = "newest",
    page: PageNumber = None,
) -> DeadLetterPage:
    """A page of the dead letters of ``dlq`` that match every given filter. Pass
    ``pagination.next_cursor`` back as ``cursor`` for the next page."""
    flt, queue = to_filter(filters), ops.queue(dlq)
    if page is not None and page > 1:
        if cursor is not None:
            raise ApiError(422, "invalid_parameter", "give cursor or page, not both", field="page")
        if order != "newest":
            message = "page numbers count newest first; page oldest first by cursor"
            raise ApiError(422, "invalid_parameter", message, field="page")
        return await numbered_page(queue, flt, page=page, limit=limit)
    found = await search(queue.search_dead_letters, flt, limit=limit, cursor=cursor, order=order)
    return page_out(found.jobs, next_cursor=found.next_cursor, total=found.total, limit=limit,
                    page=1 if cursor is None else None)  # fmt: skip


@router.get("/count", summary="Count the matching dead letters")
async def count_dead_letters(ops: Ops, dlq: DlqName, filters: Filters) -> CountResult:
    """How many dead letters of ``dlq`` match: from the store's counters, or, for text
    filters, by a walk over the candidates (which is why pages leave their total out)."""
    return CountResult(count=await ops.queue(dlq).count_dead_letters(to_filter(filters)))


@router.get("/stats", summary="Dead letter totals by type, error, source queue, reason, status")
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
        byStatus=[StatusCount(status=k, count=v) for k, v in stats.by_status.items()],
        oldest=iso(stats.oldest),
        newest=iso(stats.newest),
    )


def _bulk_filter(
    query: FilterParams, dry_run: bool, everything: bool, body: BulkRequest | None
) -> tuple[DeadLetterFilter, bool]:
    """The filter of a bulk operation (from the body or the query, not both) and dry_run."""
    params, where = query, ""
    if body is not None and body.filter is not None:
        if query.model_dump(exclude_none=True):
            message = "give the filter in the body or in the query string, not both"
            raise ApiError(422, "invalid_parameter", message, field="filter")
        params, where = body.filter, "filter."
    dry_run = dry_run or (body is not None and body.dry_run)
    everything = everything or (body is not None and body.all)
    flt = to_filter(params, where)
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
    ops: Ops,
    caller: Caller,
    dlq: DlqName,
    id: JobId,
    changes: Annotated[RetryChanges | None, Body()] = None,
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
            id, attempts=attempts, priority=changes.priority, queue=target,
            actor=caller.actor(),
        )  # fmt: skip
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
