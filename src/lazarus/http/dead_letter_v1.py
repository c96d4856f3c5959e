"""Seed 003's dead letter API, ``/api/v1/dead-letter``: pages by number with a ``jobType``
filter, one dead letter, retry, delete and stats; plus the webhook delivery log.

Answered from the record when ``lazarus serve`` has one (it also holds what Redis no longer
does: replayed, purged, archived dead letters), else from Redis, in the same shapes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response

from ..dead_letter import DeadLetterFilter
from ..errors import JobNotFoundError
from ..record.shapes import detail_json, item_json, row_from_job, stats_json
from ._deps import AUTH_ERRORS, CONFLICT, ERRORS, NOT_FOUND, JobId, Ops, require_token
from .record_schemas import (
    RecordedDeadLetterDetail,
    RecordedPage,
    RecordedStats,
    RetriedJob,
    WebhookDeliveries,
)

if TYPE_CHECKING:
    from ..record import Record

router = APIRouter(prefix="/api/v1", tags=["dead letters (v1)"], responses=ERRORS)
MAX_LIMIT = 1000


def get_record(request: Request) -> Record | None:
    """The app's :class:`~lazarus.record.Record`, or None when none is configured."""
    record: Record | None = getattr(request.app.state, "record", None)
    return record


RecordDep = Annotated["Record | None", Depends(get_record)]


@router.get("/dead-letter", summary="A page of dead letters, newest first")
async def list_dead_letters(
    ops: Ops,
    record: RecordDep,
    page: Annotated[int, Query(ge=1, le=1_000_000)] = 1,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = 20,
    jobType: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
) -> RecordedPage:
    """Dead letters newest first, ``limit`` per page, of one job type when ``jobType`` is set."""
    if record is not None:
        found = await record.list(page=page, limit=limit, job_type=jobType)
        rows, total = found.rows, found.total
    else:
        rows, total = await _redis_page(ops, page, limit, jobType)
    return RecordedPage.model_validate({
        "data": [item_json(r) for r in rows], "total": total, "page": page, "limit": limit,
        "totalPages": (total + limit - 1) // limit,
    })  # fmt: skip


async def _redis_page(
    ops: Ops, page: int, limit: int, job_type: str | None
) -> tuple[list[dict[str, Any]], int]:
    flt = DeadLetterFilter(name=job_type) if job_type else None
    total = await ops.view.count(flt)
    skip, cursor = (page - 1) * limit, None
    rows: list[dict[str, Any]] = []
    while len(rows) < limit and skip < total:
        found = await ops.view.search(flt, limit=min(MAX_LIMIT, skip + limit), cursor=cursor)
        batch = found.jobs[skip:] if skip else found.jobs
        skip = max(0, skip - len(found.jobs))
        rows += [row_from_job(j) for j in batch[: limit - len(rows)]]
        if found.next_cursor is None:
            break
        cursor = found.next_cursor
    return rows, total


@router.get("/dead-letter/stats", summary="How many dead letters, by job type")
async def dead_letter_stats(ops: Ops, record: RecordDep) -> RecordedStats:
    """``total``, ``byType`` (most first), and the ``oldest`` and ``newest`` failure."""
    if record is not None:
        return RecordedStats.model_validate(stats_json(await record.stats()))
    stats = await ops.view.stats()
    from ..record.database import from_ms

    return RecordedStats.model_validate(stats_json({
        "total": stats.total,
        "byType": [{"jobType": n, "count": c} for n, c in stats.by_name.items()],
        "oldest": from_ms(stats.oldest), "newest": from_ms(stats.newest),
    }))  # fmt: skip


@router.get("/dead-letter/{id}", summary="One dead letter", responses=NOT_FOUND)
async def get_dead_letter(ops: Ops, record: RecordDep, id: JobId) -> RecordedDeadLetterDetail:
    """One dead letter with its payload, every attempt and (from the record) every change."""
    row = await _find(ops, record, id)
    return RecordedDeadLetterDetail.model_validate(detail_json(row))


async def _find(ops: Ops, record: Record | None, id: str) -> dict[str, Any]:
    if record is not None:
        row = await record.get(id)
        if row is not None and row["status"] != "deleted":
            return row
    else:
        job = await ops.view.get(id)
        if job is not None:
            return row_from_job(job)
    raise JobNotFoundError(f"no dead letter {id!r}")


@router.post(
    "/dead-letter/{id}/retry",
    summary="Retry a dead letter as a new job",
    dependencies=[Depends(require_token)],
    responses={**AUTH_ERRORS, **NOT_FOUND, **CONFLICT},
)
async def retry_dead_letter(ops: Ops, record: RecordDep, id: JobId) -> RetriedJob:
    """A new job with the dead letter's payload in its source queue; the dead letter leaves
    the dead letter queue. From the record, even one Redis no longer holds."""
    row = await _find(ops, record, id)
    if record is not None:
        new_id = await record.replay(id)
    else:
        new_id = await ops.queue(row["dead_letter_queue"]).replay_dead_letter(id)
    return RetriedJob(
        id=new_id, name=row["job_name"], type=row["job_type"], status="QUEUED",
        priority=row["job_priority"], queue=row["source_queue"],
    )  # fmt: skip


@router.delete(
    "/dead-letter/{id}",
    summary="Delete a dead letter",
    status_code=204,
    dependencies=[Depends(require_token)],
    responses={**AUTH_ERRORS, **NOT_FOUND, **CONFLICT},
)
async def delete_dead_letter(ops: Ops, record: RecordDep, id: JobId) -> Response:
    """Purge the dead letter from Redis and, with a record, from the record too."""
    row = await _find(ops, record, id)
    if record is not None:
        await record.delete(id)
    else:
        await ops.queue(row["dead_letter_queue"]).purge_dead_letter(id)
    return Response(status_code=204)


@router.get("/webhooks/deliveries", summary="The webhook delivery log, newest first")
async def webhook_deliveries(
    ops: Ops,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = 50,
    deadLetterId: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
) -> WebhookDeliveries:
    """Every attempt: when, which endpoint and event, the HTTP status and the outcome
    (``delivered``, ``failed`` and to be retried, or ``abandoned``)."""
    from ..webhooks.log import deliveries

    queues = await ops.view.dead_letter_queues()
    found = await deliveries(ops.client, ops.prefix, queues, limit=limit,
                             dead_letter_id=deadLetterId)  # fmt: skip
    return WebhookDeliveries.model_validate({"data": found})
