"""Which dead letters an operation applies to: :class:`DeadLetterFilter`, and how a filter
becomes the arguments of the store's scripts and the keys of its exact counts."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import string
from typing import get_args

from .._connection import now_ms
from ..history import DeadLetterReason
from ..job_options import MAX_TIMESTAMP_MS

TimeBound = int | datetime.datetime | None
REASONS: tuple[str, ...] = get_args(DeadLetterReason)
# query_dead_letters folds the stored reason with Lua's string.lower, which knows ASCII only;
# the filter must be folded the same way, or a non-ASCII reason would not even match itself.
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


class DeadLetterStatus(str, enum.Enum):
    """Where a dead letter stands in its lifecycle. Every dead letter enters as ``pending``."""

    PENDING = "pending"
    MANUAL = "manual"
    PROCESSING = "processing"
    RESOLVED = "resolved"
    FAILED = "failed"
    ARCHIVED = "archived"

    def __str__(self) -> str:
        return self.value


# The statuses whose dead letters still wait for a decision: what a filter without a status
# covers (and seed 000's get_dead_letter_count / get_dead_letter_jobs). The others
# (processing, resolved, archived) are the store's history, reached by asking for them.
LIVE_STATUSES = ("pending", "manual", "failed")

# The indexed fields, in the order the store's scripts use: (code, filter field name).
INDEXED = (
    ("q", "source_queue"),
    ("n", "name"),
    ("e", "error_type"),
    ("r", "reason"),
    ("s", "status"),
)
_TEXT_FIELDS = (
    "name", "failed_reason", "source_queue", "error_type", "reason", "name_prefix",
    "payload_contains",
)  # fmt: skip


def to_ms(value: TimeBound, field: str) -> int | None:
    """A time bound in milliseconds since the epoch; raises naming ``field``."""
    if value is None:
        return None
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            raise ValueError(f"{field} must be timezone-aware")
        return int(value.timestamp() * 1000)
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{field} must be an int (ms) or a datetime, not {type(value).__name__}")
    return value


def check_now(now: object) -> int:
    """``now`` (ms since the epoch, an int) when given, else the clock's; raises naming
    ``now``. What replaces the clock of a measure or a prune, for previews and tests."""
    if now is None:
        return now_ms()
    if isinstance(now, bool) or not isinstance(now, int):
        raise TypeError(f"now must be an int (ms) or None, not {type(now).__name__}")
    if not 0 <= now <= MAX_TIMESTAMP_MS:
        raise ValueError(f"now must be from 0 to {MAX_TIMESTAMP_MS} (ms), got {now}")
    return now


@dataclasses.dataclass(frozen=True)
class DeadLetterFilter:
    """Which dead letters an operation applies to; all given fields must match (AND).

    Exact and indexed (answered from the store's indexes, counted without reading entries):
    ``source_queue``, ``name``, ``error_type`` (the exception class name), ``reason`` and
    ``status`` (without one, the live statuses: ``pending``, ``manual`` and ``failed``;
    ``processing``, ``resolved`` and ``archived`` dead letters are reached by asking for
    their status). Ranges, also from the indexes: ``name_prefix`` (a prefix of the job name) and
    ``since`` / ``until`` (when the job was dead-lettered: ms since the epoch, or an aware
    datetime, both inclusive). Substring searches, read from the entries in bounded steps:
    ``failed_reason`` (case-insensitive literal substring of the last failure's message) and
    ``payload_contains`` (literal substring of the payload's JSON text).

    Example::

        DeadLetterFilter(source_queue="payments", error_type="TimeoutError", since=yesterday)
    """

    name: str | None = None
    failed_reason: str | None = None
    source_queue: str | None = None
    error_type: str | None = None
    since: TimeBound = None
    until: TimeBound = None
    reason: DeadLetterReason | None = None
    name_prefix: str | None = None
    payload_contains: str | None = None
    status: DeadLetterStatus | str | None = None

    def __post_init__(self) -> None:
        for field in _TEXT_FIELDS:
            value = getattr(self, field)
            if value is not None and not isinstance(value, str):
                raise TypeError(f"filter.{field} must be a str, not {type(value).__name__}")
            if isinstance(value, str):
                _check_text(value, f"filter.{field}")
        if self.reason is not None and self.reason not in REASONS:
            raise ValueError(
                f"filter.reason must be one of {', '.join(REASONS)}, got {self.reason!r}"
            )
        if self.status is not None:
            try:
                object.__setattr__(self, "status", DeadLetterStatus(self.status))
            except ValueError:
                choices = ", ".join(s.value for s in DeadLetterStatus)
                raise ValueError(
                    f"filter.status must be one of {choices}, got {self.status!r}"
                ) from None
        since, until = to_ms(self.since, "filter.since"), to_ms(self.until, "filter.until")
        if since is not None and until is not None and since > until:
            raise ValueError("filter.since must not be after filter.until")

    @property
    def since_ms(self) -> int | None:
        return to_ms(self.since, "filter.since")

    @property
    def until_ms(self) -> int | None:
        return to_ms(self.until, "filter.until")

    def exact(self) -> dict[str, str]:
        """The indexed exact values that are set, by field code."""
        values = {}
        for code, field in INDEXED:
            value = getattr(self, field)
            if value is not None:
                values[code] = str(value)
        return values

    @property
    def scans(self) -> bool:
        """Whether the filter needs entries to be read (a substring search)."""
        return bool(self.failed_reason or self.payload_contains)

    @property
    def timed(self) -> bool:
        return self.since is not None or self.until is not None

    def score_range(self) -> tuple[int | str, int | str]:
        """The time bounds as store scores (ms * 1000 plus a sequence number below 1000)."""
        since, until = self.since_ms, self.until_ms
        return (
            "-inf" if since is None else since * 1000,
            "+inf" if until is None else until * 1000 + 999,
        )

    def query_args(self) -> list[str]:
        """ARGV[7..16] of query_dead_letters (without a status: any live one)."""
        low, high = self.score_range()
        exact = {"s": ",".join(LIVE_STATUSES), **self.exact()}
        return [
            "" if low == "-inf" else str(low),
            "" if high == "+inf" else str(high),
            *(exact.get(code, "") for code, _ in INDEXED),
            self.name_prefix or "",
            (self.failed_reason or "").translate(_ASCII_LOWER),
            self.payload_contains or "",
        ]


def _check_text(value: str, field: str) -> None:
    try:
        value.encode()
    except UnicodeEncodeError:
        raise ValueError(f"{field} is not valid text (it holds a lone surrogate)") from None


def combo_key(values: dict[str, str]) -> str:
    """The field of the store's count hash for a combination of values by field code (the
    encoding of ``store_combination`` in ``includes/store.lua``: byte lengths, field order)."""
    parts = []
    for code, _ in INDEXED:
        if code in values:
            value = values[code]
            parts.append(f"{code}{len(value.encode())}:{value}")
    return "".join(parts)


def check_filter(value: DeadLetterFilter | None) -> DeadLetterFilter:
    """``value``, or the empty filter for ``None``; raises for anything else."""
    if value is None:
        return DeadLetterFilter()
    if not isinstance(value, DeadLetterFilter):
        raise TypeError(f"filter must be a DeadLetterFilter, not {type(value).__name__}")
    return value
