"""Response models of seed 003's dead letter API (``/api/v1/dead-letter``) and of the webhook
delivery log; field names are the JSON's own (camelCase)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


class RecordedDeadLetter(BaseModel):
    """One dead letter: seed 003's fields, then lazarus's. Times are ISO 8601 in UTC."""

    id: str
    originalJobId: str
    jobName: str
    jobType: str
    jobPayload: Any
    jobPriority: int
    failureReason: str
    failureCount: int
    lastError: str | None
    workerId: str | None
    originalCreatedAt: str | None
    failedAt: str | None
    sourceQueue: str
    deadLetterQueue: str
    errorType: str
    reason: str
    status: str
    replayCount: int
    archivedAt: str | None
    resolvedAt: str | None
    removedAt: str | None


class RecordedEvent(BaseModel):
    """One change of a dead letter, as the record saw it."""

    event: str
    status: str
    at: str | None


class RecordedDeadLetterDetail(RecordedDeadLetter):
    """One dead letter in full: its last stack, every attempt, options and changes."""

    errorStack: str | None
    stacktrace: Any
    attempts: Any
    originalOpts: Any
    timeline: Any
    events: list[RecordedEvent]


class RecordedPage(BaseModel):
    """A page of dead letters, newest first."""

    data: list[RecordedDeadLetter]
    total: int
    page: int
    limit: int
    totalPages: int


class TypeCount(BaseModel):
    """How many dead letters one job type has."""

    jobType: str
    count: int


class RecordedStats(BaseModel):
    """How many dead letters, by job type, and the oldest and newest failure."""

    total: int
    byType: list[TypeCount]
    oldest: str | None
    newest: str | None


class RetriedJob(BaseModel):
    """The new job a retry created."""

    id: str
    name: str
    type: str
    status: str
    priority: int
    queue: str


class WebhookDelivery(BaseModel):
    """One attempt to deliver a webhook event."""

    at: int
    queue: str
    endpoint: str | None
    event: str | None
    deadLetterId: str | None
    message: str | None
    attempt: int
    outcome: str | None
    status: int | None
    error: str | None


class WebhookDeliveries(BaseModel):
    """The newest delivery attempts, newest first."""

    data: list[WebhookDelivery]
