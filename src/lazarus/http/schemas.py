"""The JSON shapes of the API's responses (pydantic models, so the OpenAPI document describes
them) and the conversions from lazarus records to them. Field names are camelCase, like
``_dlqMeta``; request shapes are in :mod:`lazarus.http.params`."""

from __future__ import annotations

import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from ..history import AttemptRecord, DeadLetterMetadata
from ..job import Job
from ..masking import masked
from ..operators import QueueSummary

# -- errors ----------------------------------------------------------------------------------


class ErrorDetail(BaseModel):
    """A stable machine-readable ``code`` and a message for humans."""

    code: str
    message: str
    field: str | None = None


class ErrorResponse(BaseModel):
    """The body of every error response."""

    error: ErrorDetail


# -- jobs and dead letters -------------------------------------------------------------------


class AttemptOut(BaseModel):
    """One failed or stalled attempt."""

    attempt: int
    startedAt: int
    finishedAt: int
    worker: str
    outcome: str
    error: str
    errorType: str


class DeadLetterMeta(BaseModel):
    """``_dlqMeta``: why and how the job died (:meth:`DeadLetterMetadata.to_json`)."""

    sourceQueue: str
    originalJobId: str
    failedReason: str
    stacktrace: list[str]
    attemptsMade: int
    deadLetteredAt: int
    originalTimestamp: int
    originalOpts: dict[str, Any]
    errorType: str
    reason: str
    attempts: list[AttemptOut]
    replayCount: int
    status: str
    statusAt: int | None = None
    timeline: list[dict[str, Any]] = []
    lastReplayedAt: int | None = None
    replayedBy: str | None = None
    replayRule: str | None = None
    replayJobId: str | None = None
    replayQueue: str | None = None


class DeadLetterOut(BaseModel):
    """One dead letter. Times are ms since the epoch, except ``failedAt`` (ISO 8601)."""

    id: str
    name: str
    jobType: str
    queue: str
    sourceQueue: str
    payload: Any
    dlq_meta: DeadLetterMeta = Field(serialization_alias="_dlqMeta")
    failedReason: str
    errorType: str
    reason: str
    status: str
    attemptsMade: int
    maxAttempts: int
    replayCount: int
    timestamp: int
    originalTimestamp: int
    deadLetteredAt: int
    failedAt: str


class Pagination(BaseModel):
    """Where a page stands (OJS pagination). ``next_cursor``, passed back as ``cursor``,
    continues the walk; it is ``null`` on the last page. ``total`` is ``null`` when counting
    the matches would need a scan (text filters): ask ``/count`` for it."""

    total: int | None
    has_more: bool
    next_cursor: str | None
    limit: int


class DeadLetterPage(BaseModel):
    """One page of dead letters with its ``pagination``. ``total``, ``page`` and
    ``totalPages`` are kept for clients of page numbers; ``page`` is ``null`` on a page read
    by cursor."""

    data: list[DeadLetterOut]
    pagination: Pagination
    total: int | None
    page: int | None
    limit: int
    totalPages: int | None


class CountResult(BaseModel):
    """How many dead letters match."""

    count: int


class DeadLetterQueueList(BaseModel):
    """The names of the dead letter queues of the prefix, sorted."""

    queues: list[str]


class JobOut(BaseModel):
    """One job of a queue, with its state. ``deadLetter`` is set for a dead letter.
    ``priority`` is the job's priority now; ``opts`` are the options it was added with;
    ``expiresAt`` is when it must have started (ms since the epoch), if it has an expiry."""

    id: str
    name: str
    queue: str
    state: str
    data: Any
    opts: dict[str, Any]
    priority: int
    timestamp: int
    expiresAt: int | None = None
    attemptsMade: int
    maxAttempts: int
    processedOn: int | None
    finishedOn: int | None
    failedReason: str | None
    errorType: str | None
    stacktrace: list[str]
    attempts: list[AttemptOut]
    returnValue: Any
    replayCount: int
    deadLetter: DeadLetterMeta | None


class TypeCount(BaseModel):
    jobType: str
    count: int


class ErrorTypeCount(BaseModel):
    errorType: str
    count: int


class SourceQueueCount(BaseModel):
    queue: str
    count: int


class ReasonCount(BaseModel):
    reason: str
    count: int


class StatusCount(BaseModel):
    status: str
    count: int


class DeadLetterStatsOut(BaseModel):
    """Totals of the matching dead letters; ``oldest``/``newest`` are ISO 8601 (UTC)."""

    total: int
    byType: list[TypeCount]
    byErrorType: list[ErrorTypeCount]
    bySourceQueue: list[SourceQueueCount]
    byReason: list[ReasonCount]
    byStatus: list[StatusCount]
    oldest: str | None
    newest: str | None


class ReplayResult(BaseModel):
    """The job a retry created: its id and queue, and the dead letter it came from."""

    id: str
    queue: str
    name: str
    replayedFrom: str


class BulkResult(BaseModel):
    """How many dead letters a bulk operation touched (or would, with ``dryRun``)."""

    count: int
    dryRun: bool


# -- queues and health -----------------------------------------------------------------------


class QueueOut(BaseModel):
    """A queue: counts by state, pause flag and, for a dead letter queue, its depth."""

    name: str
    counts: dict[str, int]
    paused: bool
    isDeadLetterQueue: bool
    deadLetters: int
    oldestDeadLetterAt: int | None


class QueueList(BaseModel):
    queues: list[QueueOut]


class HealthQueue(BaseModel):
    """Seed FR-008: active, waiting, failed and dead-letter depth of one queue."""

    name: str
    active: int
    waiting: int
    delayed: int
    failed: int
    paused: bool
    deadLetters: int


class RedisHealth(BaseModel):
    reachable: bool
    error: str | None = None


class Health(BaseModel):
    """``ok`` with per-queue statistics, or ``unavailable`` (with a 503) when Redis is down."""

    status: Literal["ok", "unavailable"]
    redis: RedisHealth
    queues: list[HealthQueue]
    error: ErrorDetail | None = None


# -- conversions -----------------------------------------------------------------------------


def iso(ms: int | None) -> str | None:
    """``ms`` since the epoch as an ISO 8601 UTC string."""
    if ms is None:
        return None
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _attempts(records: list[AttemptRecord]) -> list[AttemptOut]:
    return [AttemptOut(**a.to_json()) for a in records]


def meta_out(meta: DeadLetterMetadata) -> DeadLetterMeta:
    """``_dlqMeta`` as a model."""
    raw = meta.to_json()
    return DeadLetterMeta(**{**raw, "attempts": _attempts(meta.attempts)})


def dead_letter_out(job: Job, meta: DeadLetterMetadata) -> DeadLetterOut:
    """A dead letter (``job`` with its metadata ``meta``) in the API's shape."""
    return DeadLetterOut(
        id=job.id,
        name=job.name,
        jobType=job.name,
        queue=job.queue_name,
        sourceQueue=meta.source_queue,
        payload=masked(job.original_data),
        dlq_meta=meta_out(meta),
        failedReason=meta.failed_reason,
        errorType=meta.error_type,
        reason=meta.reason,
        status=meta.status,
        attemptsMade=meta.attempts_made,
        maxAttempts=int(meta.original_opts.get("attempts", 1)),
        replayCount=meta.replay_count,
        timestamp=job.timestamp,
        originalTimestamp=meta.original_timestamp,
        deadLetteredAt=meta.dead_lettered_at,
        failedAt=iso(meta.dead_lettered_at) or "",
    )


def job_out(job: Job, state: str) -> JobOut:
    """Any job in the API's shape."""
    return JobOut(
        id=job.id,
        name=job.name,
        queue=job.queue_name,
        state=state,
        data=masked(job.original_data),
        opts=job.opts.to_dict(),
        priority=job.priority,
        timestamp=job.timestamp,
        expiresAt=job.expires_at,
        attemptsMade=job.attempts_made,
        maxAttempts=job.opts.attempts,
        processedOn=job.processed_on,
        finishedOn=job.finished_on,
        failedReason=job.failed_reason,
        errorType=job.error_type,
        stacktrace=job.stacktrace,
        attempts=_attempts(job.attempts),
        returnValue=masked(job.return_value),
        replayCount=job.replay_count,
        deadLetter=None if job.dead_letter is None else meta_out(job.dead_letter),
    )


def queue_out(summary: QueueSummary) -> QueueOut:
    """A queue summary in the API's shape."""
    return QueueOut(
        name=summary.name,
        counts=summary.counts,
        paused=summary.paused,
        isDeadLetterQueue=summary.is_dead_letter_queue,
        deadLetters=summary.dead_letters,
        oldestDeadLetterAt=summary.oldest_dead_letter_at,
    )
