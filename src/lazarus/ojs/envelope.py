"""Validation of an OJS enqueue request: the envelope, its options and its retry policy.

Every check raises :class:`~lazarus.ojs.errors.OjsError` naming the field, before anything
is written. Fields the spec does not define are kept as they are, for forward compatibility.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import uuid
from datetime import datetime, timezone
from typing import Any

from .. import _codec
from .._connection import now_ms
from .._keys import MAX_NAME_LENGTH
from ..job_options import MAX_DURATION_MS
from .errors import OjsError
from .retry import RetryPolicy, parse_policy
from .unique import UniquePolicy, parse_unique

# The spec's segments are [a-z][a-z0-9_]*; hyphens are accepted too, as the conformance
# suite's own Level 1 cases use them (e.g. 'retry.test.attempt-counter').
TYPE_RE = re.compile(r"^[a-z][a-z0-9_\-]*(\.[a-z][a-z0-9_\-]*)*$")
QUEUE_RE = re.compile(r"^[a-z0-9][a-z0-9\-\.]*$")
UUIDV7_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
MAX_NAME = 255
MAX_QUEUE = MAX_NAME_LENGTH  # the longest queue name lazarus keeps keys for
RFC3339_RE = re.compile(r"\d{4}-\d\d-\d\d[Tt ]\d\d:\d\d:\d\d(\.\d+)?([Zz]|[+-]\d\d:\d\d)", re.ASCII)
SYSTEM_FIELDS = {
    "state", "attempt", "created_at", "enqueued_at", "started_at", "completed_at",
    "cancelled_at", "discarded_at", "error", "errors", "result", "specversion",
}  # fmt: skip
DEFAULT_VISIBILITY_MS = 30_000
# The longest lease: a job whose worker dies holding it waits that long to be recovered. A
# longer job renews its lease with heartbeats.
MAX_VISIBILITY_MS = 86_400_000
MAX_TIMEOUT_MS = 7 * 86_400_000
MAX_ARGS_BYTES = _codec.DEFAULT_MAX_PAYLOAD_BYTES  # the engine's limit on a job's data
# The named priorities of the conformance levels (L4-PRI-003). ojs-core's table recommends
# 10, 0 and -10 instead; a conformance claim is judged by the levels' numbers.
NAMED_PRIORITIES = {"HIGH": 3, "NORMAL": 2, "LOW": 1}
MIN_PRIORITY, MAX_PRIORITY = -100, 100


@dataclasses.dataclass(frozen=True)
class Submission:
    """A validated enqueue request."""

    id: str
    type: str
    args: list[Any]
    queue: str
    priority: int
    delay_until_ms: int | None
    expires_at_ms: int | None  # after it the job must not start: it is discarded instead
    pending: bool  # staged: not available to workers until ACTIVATE
    policy: RetryPolicy
    timeout_ms: int | None
    visibility_ms: int | None
    envelope: dict[str, Any]  # what the client sent, minus system fields, plus the id
    unique: UniquePolicy | None = None

    @functools.cached_property
    def unique_key(self) -> str | None:
        """The job's uniqueness key, when it is pushed with ``options.unique``."""
        return None if self.unique is None else self.unique.key(self.type, self.args)


def invalid(message: str, status: int = 400, *, field: str | None = None) -> OjsError:
    """A validation error about ``field`` (the path in the request: ``options.queue``), which
    its ``details`` name too."""
    return OjsError(status, "invalid_request", message,
                    details=None if field is None else {"field": field})  # fmt: skip


def storable(value: Any, field: str, *, max_bytes: int | None = None) -> None:
    """Refuse what the engine could not store, or a reply could not show again: NaN or an
    infinity, a string with a lone surrogate, nesting deeper than 128 levels, more than
    ``max_bytes`` encoded; the message names the path."""
    try:
        _codec.encode(value, field=field, max_bytes=max_bytes)
    except (TypeError, ValueError) as exc:
        raise invalid(str(exc), field=field) from None


def new_id() -> str:
    """A fresh UUIDv7 (RFC 9562): 48 bits of Unix milliseconds, then random bits."""
    ms = int(datetime.now(timezone.utc).timestamp() * 1000)
    rand = uuid.uuid4().int
    value = (ms & (2**48 - 1)) << 80 | 0x7 << 76 | (rand & (2**12 - 1)) << 64
    value |= 0b10 << 62 | (rand >> 12) & (2**62 - 1)
    return str(uuid.UUID(int=value))


def parse_time(value: object, field: str) -> int:
    """An RFC 3339 timestamp (a date, a time and an offset) as Unix milliseconds."""
    if not isinstance(value, str):
        raise invalid(f"{field} must be an RFC 3339 timestamp string", field=field)
    try:
        if not RFC3339_RE.fullmatch(value):
            raise ValueError(value)
        parsed = datetime.fromisoformat(value.upper().replace("Z", "+00:00"))
    except ValueError:
        raise invalid(f"{field} must be an RFC 3339 timestamp such as "
                      f"'2030-01-01T09:30:00Z', got {value!r}", field=field) from None  # fmt: skip
    return int(parsed.timestamp() * 1000)


def due_ms(body: dict[str, Any], options: dict[str, Any]) -> int | None:
    """When the job is due: ``options.delay_until``, else ``options.scheduled_at``, else
    ``scheduled_at``; ``None`` for now."""
    return _moment(body, options, "options.delay_until", "options.scheduled_at", "scheduled_at")


def _expires_ms(body: dict[str, Any], options: dict[str, Any]) -> int | None:
    """When the job expires: ``expires_at``, else ``options.expires_at``; ``None`` for never.
    One that has passed, or comes before the job is due, is taken: the job is discarded
    without running when a worker would fetch it."""
    return _moment(body, options, "expires_at", "options.expires_at")


def _moment(body: dict[str, Any], options: dict[str, Any], *names: str) -> int | None:
    """The first of the timestamp fields ``names`` (``options.x`` in the options) that the
    request gives, in ms; ``None`` when it gives none, or ``null`` for the first it gives."""
    for name in names:
        source = options if name.startswith("options.") else body
        field = name.rpartition(".")[2]
        if field in source:
            value = source[field]
            if value is None:
                return None
            moment = parse_time(value, name)
            if moment - now_ms() > MAX_DURATION_MS:
                years = MAX_DURATION_MS // 31_536_000_000
                raise invalid(f"{name} is more than {years} years ahead, got {value!r}",
                              field=name)  # fmt: skip
            return moment
    return None


def _flag(options: dict[str, Any], field: str) -> bool:
    value = options.get(field, False)
    if not isinstance(value, bool):
        raise invalid(f"options.{field} must be true or false, got {value!r}",
                      field=f"options.{field}")  # fmt: skip
    return value


def _positive_ms(options: dict[str, Any], field: str, maximum: int) -> int | None:
    value = options.get(field)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum:
        raise invalid(f"options.{field} must be an integer from 1 to {maximum} (milliseconds),"
                      f" got {value!r}", field=f"options.{field}")  # fmt: skip
    return value


def _name(
    value: object, field: str, pattern: re.Pattern[str], rule: str, maximum: int = MAX_NAME
) -> str:
    if not isinstance(value, str) or not pattern.fullmatch(value) or len(value) > maximum:
        raise invalid(f"{field} must match {rule} (at most {maximum} bytes), got {value!r}",
                      field=field)  # fmt: skip
    return value


def queue_name(value: object, field: str) -> str:
    """``value`` if it is a queue name OJS allows and lazarus can hold, else a 400 naming
    ``field``."""
    return _name(value, field, QUEUE_RE, "^[a-z0-9][a-z0-9\\-\\.]*$", MAX_QUEUE)


def priority_number(value: object) -> int | None:
    """The OJS priority ``value`` names: an integer from -100 to 100 (higher runs first), or
    ``HIGH``, ``NORMAL``, ``LOW`` (any case) for 3, 2, 1; ``None`` for anything else."""
    if isinstance(value, str):
        return NAMED_PRIORITIES.get(value.upper())
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if MIN_PRIORITY <= value <= MAX_PRIORITY else None


def _priority(options: dict[str, Any]) -> int:
    value = options.get("priority", 0)
    number = priority_number(value)
    if number is None:
        raise invalid(f"options.priority must be an integer from {MIN_PRIORITY} to "
                      f"{MAX_PRIORITY} or one of HIGH, NORMAL, LOW, got {value!r}",
                      field="options.priority")  # fmt: skip
    return number


def parse_submission(body: Any) -> Submission:
    """Validate an enqueue request body."""
    if not isinstance(body, dict):
        raise OjsError(400, "invalid_payload", "the request body must be a JSON object")
    if "type" not in body:
        raise invalid("type is required", field="type")
    job_type = _name(body["type"], "type", TYPE_RE, "dot-separated [a-z][a-z0-9_-]* segments")
    if "args" not in body:
        raise invalid("args is required", field="args")
    if not isinstance(body["args"], list):
        raise invalid("args must be a JSON array", field="args")
    job_id = body.get("id")
    if job_id is None:
        job_id = new_id()
    elif not isinstance(job_id, str) or not UUIDV7_RE.fullmatch(job_id):
        raise invalid(f"id must be a lowercase UUIDv7, got {job_id!r}", field="id")
    meta = body.get("meta", {})
    if not isinstance(meta, dict):
        raise invalid("meta must be a JSON object", field="meta")
    options = body.get("options", {})
    if not isinstance(options, dict):
        raise invalid("options must be a JSON object", field="options")
    queue = queue_name(options.get("queue", "default"), "options.queue")
    envelope = {k: v for k, v in body.items() if k not in SYSTEM_FIELDS}
    envelope["id"] = job_id
    for key, value in envelope.items():  # kept as sent, and shown on every read
        storable(key, "a field name")
        storable(value, key, max_bytes=MAX_ARGS_BYTES if key == "args" else None)
    return Submission(
        id=job_id, type=job_type, args=body["args"], queue=queue, priority=_priority(options),
        delay_until_ms=due_ms(body, options), expires_at_ms=_expires_ms(body, options),
        pending=_flag(options, "pending"),
        policy=parse_policy(options.get("retry")),
        timeout_ms=_positive_ms(options, "timeout_ms", MAX_TIMEOUT_MS),
        visibility_ms=_positive_ms(options, "visibility_timeout_ms", MAX_VISIBILITY_MS),
        envelope=envelope, unique=parse_unique(options.get("unique")),
    )  # fmt: skip
