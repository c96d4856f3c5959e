"""A dead letter queue's health, retention policy and pruning:
``GET /api/queues/{name}/dead-letter-health``, ``GET``/``PUT /api/queues/{name}/retention``
and ``POST /api/queues/{name}/prune``."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Literal, TypeVar

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field

from ..dead_letter import RetentionPolicy, StatusRetention
from ._deps import AUTH_ERRORS, ERRORS, NOT_FOUND, ApiError, Ops, QueueName, require_token
from .queues import existing_queue

router = APIRouter(prefix="/api/queues", tags=["dead letter upkeep"], responses=ERRORS)
T = TypeVar("T")
_AUTH = [Depends(require_token)]


class DeadLetterHealthOut(BaseModel):
    """The health of a dead letter queue, from its counters and indexes; times in seconds,
    rates per minute, shares from 0 to 1 (``null`` when there is nothing to measure yet)."""

    ingestionPerMinute: float
    backlog: int
    byStatus: dict[str, int]
    resolutionRate: float | None
    timeInDlqMean: float | None
    timeInDlqP95: float | None
    errorTypes: dict[str, int]
    replaySuccessRate: float | None
    replaysSucceeded: int
    replaysFailed: int
    prunedDeleted: int
    prunedArchived: int
    measuredAt: int


class StatusRetentionIn(BaseModel):
    """How long dead letters of one status are kept (``null``: until the count limit)."""

    model_config = ConfigDict(extra="forbid")

    maxAge: str | None = Field(None, max_length=64, examples=["P30D"])
    prune: Literal["delete", "archive"] | None = None


class RetentionIn(BaseModel):
    """A retention policy; omitted fields take their defaults, unknown ones are refused."""

    model_config = ConfigDict(extra="forbid")

    maxAge: str | None = Field("P180D", max_length=64, examples=["P180D"])
    maxCount: int | None = Field(10_000, ge=0, strict=True)
    prune: Literal["delete", "archive"] = "delete"
    statuses: dict[str, StatusRetentionIn] | None = None


class RetentionOut(BaseModel):
    """The retention policy of a dead letter queue."""

    maxAge: str | None
    maxCount: int | None
    prune: Literal["delete", "archive"]
    statuses: dict[str, StatusRetentionIn]


class PruneResult(BaseModel):
    """How many dead letters were pruned."""

    pruned: int


def _policy(body: RetentionIn) -> RetentionPolicy:
    """The policy ``body`` asks for; a value the library refuses is a 422 naming its field."""
    statuses = {
        status: _checked(f"statuses.{status}.maxAge", partial(StatusRetention, r.maxAge, r.prune))
        for status, r in (body.statuses or {}).items()
    }
    base = partial(RetentionPolicy, body.maxAge, body.maxCount, body.prune)
    policy = _checked("maxAge", base)  # the model checked maxCount and prune
    return policy if body.statuses is None else _checked("statuses", partial(base, statuses))


def _checked(field: str, build: Callable[[], T]) -> T:
    try:
        return build()
    except (TypeError, ValueError) as exc:
        raise ApiError(422, "invalid_parameter", f"{field}: {exc}", field=field) from None


def _policy_out(policy: RetentionPolicy) -> RetentionOut:
    return RetentionOut.model_validate(policy.to_json())


@router.get("/{name}/dead-letter-health", summary="Health of a dead letter queue",
            responses=NOT_FOUND)  # fmt: skip
async def get_health(ops: Ops, name: QueueName) -> DeadLetterHealthOut:
    """Ingestion rate, backlog, statuses, resolution rate, time in the DLQ, error types and
    replay success rate."""
    await existing_queue(ops, name)
    health = await ops.queue(name).get_dead_letter_health()
    return DeadLetterHealthOut.model_validate(health.to_json())


@router.get("/{name}/retention", summary="Retention policy of a dead letter queue",
            responses=NOT_FOUND)  # fmt: skip
async def get_retention(ops: Ops, name: QueueName) -> RetentionOut:
    """The stored policy, or the default one."""
    await existing_queue(ops, name)
    return _policy_out(await ops.queue(name).get_retention_policy())


@router.put("/{name}/retention", summary="Set the retention policy of a dead letter queue",
            dependencies=_AUTH, responses={**AUTH_ERRORS, **NOT_FOUND})  # fmt: skip
async def put_retention(ops: Ops, name: QueueName, body: RetentionIn) -> RetentionOut:
    """Store the policy for every process that prunes this dead letter queue."""
    await existing_queue(ops, name)
    policy = _policy(body)
    await ops.queue(name).set_retention_policy(policy)
    return _policy_out(policy)


@router.post("/{name}/prune", summary="Prune a dead letter queue by its retention policy",
             dependencies=_AUTH, responses={**AUTH_ERRORS, **NOT_FOUND})  # fmt: skip
async def prune(ops: Ops, name: QueueName) -> PruneResult:
    """Delete or archive what the policy no longer keeps, oldest first."""
    await existing_queue(ops, name)
    return PruneResult(pruned=await ops.queue(name).prune_dead_letters())
