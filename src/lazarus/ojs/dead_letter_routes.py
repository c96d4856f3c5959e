"""The OJS dead letter routes: ``/v1/dead-letter`` (the dead letter extension's job-shaped
list) and ``/v1/admin/dead-letter`` (the admin API's paginated items and stats)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response

from ..http._deps import require_token
from ..job import Job
from .dead_letters import DeadLetters
from .errors import ojs_json
from .routes import _job_id

router = APIRouter()
_AUTH = [Depends(require_token)]


def dead_letters_of(request: Request) -> DeadLetters:
    """The dead letters of the app serving ``request``."""
    value: DeadLetters = request.app.state.ojs_dead_letters
    return value


Dead = Annotated[DeadLetters, Depends(dead_letters_of)]
Limit = Annotated[int, Query(ge=1, le=500)]


@router.get("/v1/dead-letter")
async def list_dead_letters(dead: Dead, limit: Limit = 50, cursor: str | None = None) -> Response:
    """Dead letters of every dead letter queue, newest first, as the jobs they were."""
    jobs, next_cursor, total = await dead.page(limit, cursor)
    items = [await dead.to_ojs(j) for j in jobs]
    return ojs_json({"jobs": items, "total": total, "next_cursor": next_cursor})


@router.get("/v1/dead-letter/{job_id}")
async def get_dead_letter(job_id: str, dead: Dead) -> Response:
    """The dead letter of a job, by the job's id."""
    return ojs_json({"job": await dead.to_ojs(await dead.find(_job_id(job_id, "id")))})


@router.post("/v1/dead-letter/{job_id}/retry", dependencies=_AUTH)
async def retry_dead_letter(job_id: str, dead: Dead) -> Response:
    """Put the job back in its queue: same id, ``available``, attempts reset."""
    return ojs_json({"job": await dead.retry(_job_id(job_id, "id"))})


@router.delete("/v1/dead-letter/{job_id}", dependencies=_AUTH)
async def delete_dead_letter(job_id: str, dead: Dead) -> Response:
    """Delete a dead letter for good."""
    original = await dead.delete(_job_id(job_id, "id"))
    return ojs_json({"deleted": True, "job_id": original})


@router.get("/v1/admin/dead-letter")
async def admin_list(
    dead: Dead,
    page: Annotated[int, Query(ge=1, le=10_000)] = 1,
    per_page: Limit = 50,
) -> Response:
    """A numbered page of dead letters, newest first."""
    cursor: str | None = None
    jobs: list[Job] = []
    total = 0
    for number in range(1, page + 1):  # pages are walked by cursor
        jobs, cursor, total = await dead.page(per_page, cursor)
        if cursor is None and number < page:
            jobs = []  # past the last page
            break
    items = [await dead.to_ojs(j) for j in jobs]
    return ojs_json({"items": items, "pagination": {
        "total": total, "page": page, "per_page": per_page,
        "total_pages": max((total + per_page - 1) // per_page, 1),
    }})  # fmt: skip


@router.get("/v1/admin/dead-letter/stats")
async def admin_stats(dead: Dead) -> Response:
    """How many dead letters, by source queue."""
    return ojs_json(await dead.stats())


@router.get("/v1/admin/dead-letter/{job_id}")
async def admin_get(job_id: str, dead: Dead) -> Response:
    """One dead letter, by the job's id."""
    return ojs_json({"job": await dead.to_ojs(await dead.find(_job_id(job_id, "id")))})


@router.post("/v1/admin/dead-letter/{job_id}/retry", dependencies=_AUTH)
async def admin_retry(job_id: str, dead: Dead) -> Response:
    """Retry a dead letter (as ``/v1/dead-letter/{id}/retry``)."""
    return ojs_json({"job": await dead.retry(_job_id(job_id, "id"))})


@router.delete("/v1/admin/dead-letter/{job_id}", dependencies=_AUTH, status_code=204)
async def admin_delete(job_id: str, dead: Dead) -> Response:
    """Delete a dead letter for good; no content."""
    await dead.delete(_job_id(job_id, "id"))
    return Response(status_code=204)
