"""Dead letters across every dead letter queue of the prefix
(:class:`~lazarus.DeadLetterView`): one merged list by cursor, the names of the dead letter
queues, and the lookup of a job's dead letter by the job's own id."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from ._deps import ERRORS, NOT_FOUND, ApiError, JobId, Ops, OptionalDlqName
from .paging import Cursor, Limit, OrderParam, page_out, search
from .params import FilterParams, to_filter
from .schemas import DeadLetterOut, DeadLetterPage, DeadLetterQueueList, dead_letter_out

router = APIRouter(prefix="/api/dead-letters", tags=["dead letters"], responses=ERRORS)


@router.get("", summary="Dead letters of every dead letter queue (by cursor)")
async def list_every_dead_letter(
    ops: Ops,
    filters: Annotated[FilterParams, Query()],
    cursor: Cursor = None,
    limit: Limit = 20,
    order: OrderParam = "newest",
) -> DeadLetterPage:
    """A page of the matching dead letters of every dead letter queue, merged in one arrival
    order; each names its dead letter queue in ``queue``."""
    found = await search(ops.view.search, to_filter(filters), limit=limit, cursor=cursor,
                         order=order)  # fmt: skip
    return page_out(found.jobs, next_cursor=found.next_cursor, total=found.total, limit=limit,
                    page=None)  # fmt: skip


@router.get("/queues", summary="The dead letter queues of the prefix")
async def dead_letter_queues(ops: Ops) -> DeadLetterQueueList:
    """Every queue registered as a dead letter queue (by a worker, or by a migration)."""
    return DeadLetterQueueList(queues=await ops.view.dead_letter_queues())


@router.get(
    "/original/{id}",
    summary="The dead letter of a job, by the job's own id",
    responses=NOT_FOUND,
)
async def dead_letter_of_job(ops: Ops, id: JobId, dlq: OptionalDlqName = None) -> DeadLetterOut:
    """Where did job ``id`` go? The dead letter it became, in ``dlq`` or in any dead letter
    queue; 404 when it is in none."""
    if dlq is None:
        job = await ops.view.find_by_original_id(id)
    else:
        job = await ops.queue(dlq).find_dead_letter_by_original_id(id)
    if job is None or job.dead_letter is None:
        where = "any dead letter queue" if dlq is None else repr(dlq)
        raise ApiError(404, "not_found", f"no dead letter of job {id!r} in {where}")
    return dead_letter_out(job, job.dead_letter)
