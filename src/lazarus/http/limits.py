"""A queue's limits across its workers over HTTP: ``GET /api/queues/{name}/limits``, and
``PUT``/``DELETE`` of ``/limits/concurrency`` (:meth:`~lazarus.Queue.set_global_concurrency`)
and ``/limits/rate`` (:meth:`~lazarus.Queue.set_global_rate_limit`).

Reading takes a viewer, changing an operator. Every answer is the queue's limits as they are
after the call. A body that is not JSON integers in range, misses a field or has one the
route does not take is a 422 naming the field, and nothing is written; an unknown queue is a
404.
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field

from .._limiter import MAX_CONCURRENCY
from ..job_options import MAX_DURATION_MS
from ..queue import Queue
from ._deps import AUTH_ERRORS, ERRORS, NOT_FOUND, Ops, QueueName, require_token
from .queues import existing_queue

router = APIRouter(prefix="/api/queues", tags=["queues"], responses=ERRORS)
_AUTH = [Depends(require_token)]
_WRITE_ERRORS = {**AUTH_ERRORS, **NOT_FOUND}


class RateLimitOut(BaseModel):
    """At most ``max`` jobs started per ``duration`` ms, across every worker."""

    max: int
    duration: int = Field(description="The window, in ms.")
    ttl: int = Field(description="ms until the current window ends when its jobs have all "
                     "started (the limit is reached), else 0.")  # fmt: skip


class LimitsOut(BaseModel):
    """A queue's limits across its workers; ``null`` where there is none."""

    concurrency: int | None = Field(description="At most so many of its jobs active at once.")
    rateLimit: RateLimitOut | None


class ConcurrencyIn(BaseModel):
    """A new global concurrency."""

    model_config = ConfigDict(extra="forbid")

    limit: int = Field(
        ge=1, le=MAX_CONCURRENCY, strict=True,
        description="At most so many of the queue's jobs active at once.",
    )  # fmt: skip


class RateLimitIn(BaseModel):
    """A new rate limit."""

    model_config = ConfigDict(extra="forbid")

    max: int = Field(ge=1, le=MAX_CONCURRENCY, strict=True,
                     description="At most so many jobs started per window.")  # fmt: skip
    duration: int = Field(ge=1, le=MAX_DURATION_MS, strict=True,
                          description="The window, in ms.")  # fmt: skip


async def limits_of(queue: Queue) -> LimitsOut:
    """The limits of ``queue`` as they are now."""
    concurrency, rate, ttl = await asyncio.gather(
        queue.get_global_concurrency(), queue.get_global_rate_limit(), queue.get_rate_limit_ttl()
    )
    out = None if rate is None else RateLimitOut(max=rate.max, duration=rate.duration, ttl=ttl)
    return LimitsOut(concurrency=concurrency, rateLimit=out)


async def _queue(ops: Ops, name: str) -> Queue:
    await existing_queue(ops, name)
    return ops.queue(name)


@router.get("/{name}/limits", summary="A queue's global concurrency and rate limit",
            responses=NOT_FOUND)  # fmt: skip
async def get_limits(ops: Ops, name: QueueName) -> LimitsOut:
    """The global concurrency and the rate limit, with the current window's ttl."""
    return await limits_of(await _queue(ops, name))


@router.put("/{name}/limits/concurrency", summary="Set a queue's global concurrency",
            dependencies=_AUTH, responses=_WRITE_ERRORS)  # fmt: skip
async def put_concurrency(ops: Ops, name: QueueName, body: ConcurrencyIn) -> LimitsOut:
    """At most ``limit`` of the queue's jobs active at once, across every worker. Jobs
    running when it is lowered finish; no more start until fewer are active."""
    queue = await _queue(ops, name)
    await queue.set_global_concurrency(body.limit)
    return await limits_of(queue)


@router.delete("/{name}/limits/concurrency", summary="Remove a queue's global concurrency",
               dependencies=_AUTH, responses=_WRITE_ERRORS)  # fmt: skip
async def delete_concurrency(ops: Ops, name: QueueName) -> LimitsOut:
    """Let each worker run as many of the queue's jobs as its own concurrency allows."""
    queue = await _queue(ops, name)
    await queue.remove_global_concurrency()
    return await limits_of(queue)


@router.put("/{name}/limits/rate", summary="Set a queue's rate limit", dependencies=_AUTH,
            responses=_WRITE_ERRORS)  # fmt: skip
async def put_rate_limit(ops: Ops, name: QueueName, body: RateLimitIn) -> LimitsOut:
    """At most ``max`` of the queue's jobs started per ``duration`` ms, across every worker."""
    queue = await _queue(ops, name)
    await queue.set_global_rate_limit(body.max, body.duration)
    return await limits_of(queue)


@router.delete("/{name}/limits/rate", summary="Remove a queue's rate limit",
               dependencies=_AUTH, responses=_WRITE_ERRORS)  # fmt: skip
async def delete_rate_limit(ops: Ops, name: QueueName) -> LimitsOut:
    """Remove the rate limit and its current window."""
    queue = await _queue(ops, name)
    await queue.remove_global_rate_limit()
    return await limits_of(queue)
