"""What requests carry: the dead-letter filter (query string or body), the body of a bulk
operation, and the changes of a single retry."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from ..job import MAX_PRIORITY, DeadLetterReason


class FilterParams(BaseModel):
    """Which dead letters to read or act on; all given fields must match."""

    queue: str | None = Field(default=None, max_length=200, description="Source queue (exact).")
    job_type: str | None = Field(
        default=None,
        max_length=1000,
        description="Job name, exact; a trailing `*` makes it a prefix.",
    )
    error_type: str | None = Field(
        default=None, max_length=1000, description="Exception class name."
    )
    since: str | None = Field(
        default=None, max_length=64, description="Dead-lettered at or after: ISO 8601 or ms."
    )
    until: str | None = Field(
        default=None, max_length=64, description="Dead-lettered at or before: ISO 8601 or ms."
    )
    args: str | None = Field(
        default=None, max_length=1000, description="Literal substring of the payload's JSON."
    )
    failed_reason: str | None = Field(
        default=None,
        max_length=1000,
        description="Case-insensitive substring of the error message.",
    )
    reason: DeadLetterReason | None = Field(
        default=None, description="Why the job was dead-lettered."
    )


class BulkRequest(BaseModel):
    """The optional body of a bulk retry or delete."""

    model_config = ConfigDict(extra="forbid")

    filter: FilterParams | None = None
    dry_run: bool = False
    all: bool = False


class RetryOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_attempts: int | None = Field(default=None, ge=1, le=1_000_000)


class RetryChanges(BaseModel):
    """Changes to apply when retrying one dead letter (OJS: ``retry``, ``priority``, ``queue``)."""

    model_config = ConfigDict(extra="forbid")

    retry: RetryOptions | None = None
    priority: int | None = Field(default=None, ge=0, le=MAX_PRIORITY)
    queue: str | None = Field(default=None, min_length=1, max_length=200)
