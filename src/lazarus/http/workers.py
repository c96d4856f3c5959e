"""The live workers of a queue over HTTP (:func:`lazarus.workers.list_workers`)."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel, Field

from ..workers import list_workers
from ._deps import ERRORS, NOT_FOUND, Ops, QueueName
from .queues import existing_queue

router = APIRouter(prefix="/api/queues", tags=["queues"], responses=ERRORS)


class WorkerOut(BaseModel):
    """One live worker; times are ms since the epoch."""

    name: str
    host: str
    pid: int
    concurrency: int
    running: int = Field(description="Jobs it runs now.")
    started_at: int = Field(serialization_alias="startedAt")
    last_seen: int = Field(serialization_alias="lastSeen", description="Its last heartbeat.")
    remote: bool = Field(default=False, description="An OJS worker, fetching over HTTP.")


class WorkerList(BaseModel):
    workers: list[WorkerOut]


@router.get("/{name}/workers", summary="The live workers of a queue", responses=NOT_FOUND,
            response_model_by_alias=True)  # fmt: skip
async def get_workers(ops: Ops, name: QueueName) -> WorkerList:
    """Workers that sent a heartbeat in the last 15 s, by name."""
    await existing_queue(ops, name)
    queue = ops.queue(name)
    found = await list_workers(queue.client, queue.keys)
    return WorkerList(workers=[WorkerOut(**vars(w)) for w in found])
