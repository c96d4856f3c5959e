"""Bulk replay and purge as background operations: ``POST /api/dead-letters/bulk`` answers
``202 Accepted`` at once with the operation's record and its URL, and the work goes on in the
server (:mod:`lazarus.http.operations`), or in another one if that one stops;
``GET /api/dead-letters/bulk/{id}`` reports how far it got, from any server process of the
prefix, and ``DELETE`` cancels it."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from .._connection import now_ms
from ..dead_letter import DeadLetterFilter
from ..dead_letter.bulk import BULK_BATCH
from ._deps import (
    AUTH_ERRORS,
    CONFLICT,
    ERRORS,
    NOT_FOUND,
    ApiError,
    checked_name,
    require_token,
)
from .operation_records import BulkOperation, Status
from .operations import BulkOperations, OperationEnded
from .params import FilterBody, FilterParams, to_filter
from .schemas import iso

router = APIRouter(prefix="/api/dead-letters/bulk", tags=["bulk operations"], responses=ERRORS)


class BulkOperationRequest(BaseModel):
    """What to replay or purge, and how."""

    model_config = ConfigDict(extra="forbid")

    action: Literal["replay", "purge"]
    dlq: str = Field(min_length=1, max_length=200, description="The dead letter queue.")
    filter: FilterBody | None = None
    all: bool = Field(default=False, description="Allow an empty filter (every dead letter).")
    dry_run: bool = Field(default=False, description="Only count what would be touched.")
    rate: float | None = Field(
        default=None,
        gt=0,
        le=1_000_000,
        strict=True,
        description="Dead letters per second, at most.",
    )
    batch_size: int = Field(
        default=BULK_BATCH, ge=1, le=5000, strict=True, description="Dead letters per step."
    )


class BulkOperationOut(BaseModel):
    """A bulk operation: ``status`` is ``running`` (``server`` runs it), ``interrupted``
    (its server stopped; the next server to look, within seconds, resumes it), ``done``,
    ``failed`` (with ``error``) or ``cancelled``. ``matched`` is how many matched when it
    began (``null`` when that needs a scan: text filters; for a dry run, the count it made);
    ``done`` how many were replayed or purged so far; ``resumes`` how many times a server
    took it over from one that had stopped. Times are ISO 8601 (UTC)."""

    id: str
    url: str
    action: Literal["replay", "purge"]
    dlq: str
    filter: dict[str, Any]
    dryRun: bool
    rate: float | None
    batchSize: int
    status: Status
    matched: int | None
    done: int
    startedAt: str
    updatedAt: str
    finishedAt: str | None
    error: str | None
    server: str
    resumes: int


def get_operations(request: Request) -> BulkOperations:
    """The app's :class:`~lazarus.http.operations.BulkOperations`."""
    operations: BulkOperations = request.app.state.bulk
    return operations


Operations = Annotated[BulkOperations, Depends(get_operations)]
OperationId = Annotated[str, Path(min_length=1, max_length=64, description="An operation's id.")]


def operation_out(request: Request, operation: BulkOperation) -> BulkOperationOut:
    """The API's form of an operation's record."""
    return BulkOperationOut(
        id=operation.id,
        url=str(request.url_for("get_bulk_operation", operation_id=operation.id)),
        action=operation.action,
        dlq=operation.queue,
        filter=operation.filter,
        dryRun=operation.dry_run,
        rate=operation.rate,
        batchSize=operation.batch_size,
        status=operation.shown_status(now_ms()),
        matched=operation.matched,
        done=operation.done,
        startedAt=iso(operation.started_at) or "",
        updatedAt=iso(operation.updated_at) or "",
        finishedAt=iso(operation.finished_at),
        error=operation.error,
        server=operation.server,
        resumes=operation.resumes,
    )


@router.post(
    "",
    summary="Start a bulk replay or purge in the background",
    status_code=202,
    dependencies=[Depends(require_token)],
    responses=AUTH_ERRORS,
)
async def start_bulk_operation(
    request: Request, response: Response, operations: Operations, body: BulkOperationRequest
) -> BulkOperationOut:
    """Replay or purge every dead letter of ``dlq`` that matches ``filter``, in the
    background; follow ``url`` (also the ``Location`` header) for its progress."""
    dlq = checked_name(body.dlq, "dlq")
    flt = to_filter(body.filter or FilterParams(), "filter.")
    if not body.dry_run and not body.all and flt == DeadLetterFilter():
        message = "no filter given: pass a filter, or all=true to act on every dead letter"
        raise ApiError(422, "filter_required", message, field="filter")
    operation = await operations.start(
        body.action, dlq, flt, dry_run=body.dry_run, rate=body.rate, batch_size=body.batch_size
    )
    out = operation_out(request, operation)
    response.headers["Location"] = out.url
    return out


@router.get("/{operation_id}", summary="A bulk operation's progress", responses=NOT_FOUND)
async def get_bulk_operation(
    request: Request, operations: Operations, operation_id: OperationId
) -> BulkOperationOut:
    """Where the operation stands; 404 when there is none or its record expired."""
    operation = await operations.get(operation_id)
    if operation is None:
        raise ApiError(404, "not_found", f"no bulk operation {operation_id!r}")
    return operation_out(request, operation)


@router.delete(
    "/{operation_id}",
    summary="Cancel a bulk operation",
    dependencies=[Depends(require_token)],
    responses={**AUTH_ERRORS, **NOT_FOUND, **CONFLICT},
)
async def cancel_bulk_operation(
    request: Request, operations: Operations, operation_id: OperationId
) -> BulkOperationOut:
    """Cancel a running (or interrupted) operation, wherever it runs: what it did stays done,
    and its server stops within a batch or two. 409 when it has ended already."""
    try:
        operation = await operations.cancel(operation_id)
    except OperationEnded as exc:
        raise ApiError(409, "operation_ended", str(exc)) from None
    if operation is None:
        raise ApiError(404, "not_found", f"no bulk operation {operation_id!r}")
    return operation_out(request, operation)
