"""What requests carry: the dead-letter filter (query string or body) and its conversion to a
:class:`~lazarus.DeadLetterFilter`, the body of a bulk operation, and the changes of a single
retry."""

from __future__ import annotations

import datetime
import re

from pydantic import BaseModel, ConfigDict, Field

from ..dead_letter import DeadLetterFilter, DeadLetterStatus
from ..history import DeadLetterReason
from ..job_options import MAX_PRIORITY
from ._deps import ApiError, checked_name

_MS = re.compile(r"-?\d{1,16}")
_LIBRARY_FIELD = re.compile(r"filter\.(\w+)")
_API_FIELD = {"name": "job_type", "name_prefix": "job_type", "source_queue": "queue",
              "payload_contains": "args"}  # fmt: skip


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
    status: DeadLetterStatus | None = Field(
        default=None, description="Where the dead letter stands (every new one is `pending`)."
    )


class FilterBody(FilterParams):
    """The filter in a request body. An unknown key is refused (422), as an unknown query
    parameter is (:func:`~lazarus.http._deps.known_query_only`): dropped, it would widen
    what a bulk operation acts on."""

    model_config = ConfigDict(extra="forbid")


def parse_time(value: str, field: str) -> int:
    """``value`` (ms since the epoch, or ISO 8601; UTC when it has no offset) in ms."""
    text = value.strip()
    if _MS.fullmatch(text):
        return int(text)
    if text[-1:] in ("Z", "z"):
        text = text[:-1] + "+00:00"
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        message = f"{field} must be an ISO 8601 time or ms since the epoch, got {value!r}"
        raise ApiError(422, "invalid_parameter", message, field=field) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return int(moment.timestamp() * 1000)


def to_filter(params: FilterParams, where: str = "") -> DeadLetterFilter:
    """The library filter for the API's filter parameters; bad values raise a 422 naming the
    field, after ``where`` (``"filter."`` for a body's filter)."""
    name = name_prefix = None
    if params.job_type is not None and params.job_type.endswith("*"):
        name_prefix = params.job_type[:-1] or None  # "email.*" matches "email.send"
    else:
        name = params.job_type
    since = None if params.since is None else parse_time(params.since, f"{where}since")
    until = None if params.until is None else parse_time(params.until, f"{where}until")
    if since is not None and until is not None and since > until:
        message = (
            f"{where}until must not be before {where}since "
            f"(since={params.since!r}, until={params.until!r})"
        )
        raise ApiError(422, "invalid_parameter", message, field=f"{where}until")
    queue = None if params.queue is None else checked_name(params.queue, f"{where}queue")
    try:
        return DeadLetterFilter(
            name=name,
            name_prefix=name_prefix,
            source_queue=queue,
            error_type=params.error_type,
            failed_reason=params.failed_reason,
            payload_contains=params.args,
            reason=params.reason,
            since=since,
            until=until,
            status=params.status,
        )
    except (TypeError, ValueError) as exc:  # the library's "filter.<its name> ..."
        found = _LIBRARY_FIELD.match(str(exc))
        field = None if found is None else where + _API_FIELD.get(found[1], found[1])
        raise ApiError(422, "invalid_parameter", str(exc), field=field) from None


class BulkRequest(BaseModel):
    """The optional body of a bulk retry or delete."""

    model_config = ConfigDict(extra="forbid")

    filter: FilterBody | None = None
    dry_run: bool = False
    all: bool = False


class RetryOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_attempts: int | None = Field(default=None, ge=1, le=1_000_000, strict=True)


class RetryChanges(BaseModel):
    """Changes to apply when retrying one dead letter (OJS: ``retry``, ``priority``, ``queue``)."""

    model_config = ConfigDict(extra="forbid")

    retry: RetryOptions | None = None
    priority: int | None = Field(default=None, ge=0, le=MAX_PRIORITY, strict=True)
    queue: str | None = Field(default=None, min_length=1, max_length=200)
