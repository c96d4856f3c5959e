"""A queue's throughput over HTTP (:meth:`lazarus.Queue.get_metrics`)."""

from __future__ import annotations

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from .._throughput import METRICS_MINUTES
from ._deps import ERRORS, NOT_FOUND, Ops, QueueName
from .queues import existing_queue

router = APIRouter(prefix="/api/queues", tags=["queues"], responses=ERRORS)


class MinuteCount(BaseModel):
    at: int = Field(description="The minute's start, ms since the epoch.")
    count: int


class MetricsOut(BaseModel):
    """Jobs that completed and that failed for good (into failed, a dead letter queue, or
    discarded): in all, and per minute, oldest first."""

    completed: int
    failed: int
    completed_per_minute: list[MinuteCount] = Field(serialization_alias="completedPerMinute")
    failed_per_minute: list[MinuteCount] = Field(serialization_alias="failedPerMinute")


@router.get("/{name}/metrics", summary="A queue's completed and failed jobs",
            responses=NOT_FOUND, response_model_by_alias=True)  # fmt: skip
async def get_metrics(
    ops: Ops,
    name: QueueName,
    minutes: int = Query(60, ge=1, le=METRICS_MINUTES, description="Minutes of history."),
) -> MetricsOut:
    """Totals since the queue was created, and counts per minute over the last ``minutes``."""
    await existing_queue(ops, name)
    m = await ops.queue(name).get_metrics(minutes)
    return MetricsOut(
        completed=m.completed,
        failed=m.failed,
        completed_per_minute=[MinuteCount(at=a, count=c) for a, c in m.completed_per_minute],
        failed_per_minute=[MinuteCount(at=a, count=c) for a, c in m.failed_per_minute],
    )
