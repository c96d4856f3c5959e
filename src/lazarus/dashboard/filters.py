"""The dead letter browser's GET form: query parameters to a :class:`DeadLetterFilter` and back,
and which page of the list is shown (:class:`Where`).

Every field is kept as the text the operator typed, so that the form can be shown again as it
was (with an error beside it when it does not parse), and so that links and hidden fields can
carry the same filter and page to the next page, the job page and the bulk confirmation.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping

from ..dead_letter import DeadLetterFilter, DeadLetterStatus
from ..dead_letter.filters import REASONS

STATUSES: tuple[str, ...] = tuple(s.value for s in DeadLetterStatus)
LIMITS = (10, 25, 50, 100, 200)
DEFAULT_LIMIT = 25
MAX_FIELD = 500
MAX_CURSOR = 2000

LABELS = {
    "name": "Name",
    "name_prefix": "Name prefix",
    "error_type": "Error type",
    "failed_reason": "Failed reason contains",
    "source_queue": "Source queue",
    "reason": "Reason",
    "since": "Since (UTC)",
    "until": "Until (UTC)",
    "payload_contains": "Payload contains",
    "status": "Status",
}


def parse_time(text: str, field: str) -> datetime.datetime:
    """An ISO 8601 date-time; one without an offset (as ``datetime-local`` inputs send) is UTC."""
    try:
        value = datetime.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{LABELS[field]}: not a date and time: {text!r}") from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.timezone.utc)
    return value


@dataclasses.dataclass(frozen=True)
class FilterForm:
    """The filter fields as typed; empty strings mean "any"."""

    name: str = ""
    name_prefix: str = ""
    error_type: str = ""
    failed_reason: str = ""
    source_queue: str = ""
    reason: str = ""
    since: str = ""
    until: str = ""
    payload_contains: str = ""
    status: str = ""

    @classmethod
    def from_query(cls, params: Mapping[str, str]) -> FilterForm:
        """The form from query parameters (or form fields); unknown keys are ignored."""
        return cls(**{f: str(params.get(f, ""))[:MAX_FIELD] for f in LABELS})

    def items(self) -> dict[str, str]:
        """The non-empty fields, for links and hidden inputs."""
        return {f: getattr(self, f) for f in LABELS if getattr(self, f)}

    def described(self) -> list[tuple[str, str]]:
        """``(label, value)`` of every non-empty field, for people."""
        return [(LABELS[f], v) for f, v in self.items().items()]

    def to_filter(self) -> DeadLetterFilter:
        """The library's filter; raises ``ValueError`` with a message fit for the page."""
        if self.reason and self.reason not in REASONS:
            raise ValueError(f"Reason: must be one of {', '.join(REASONS)}")
        if self.status and self.status not in STATUSES:
            raise ValueError(f"Status: must be one of {', '.join(STATUSES)}")
        since = parse_time(self.since, "since") if self.since else None
        until = parse_time(self.until, "until") if self.until else None
        if since is not None and until is not None and since > until:
            raise ValueError("Since must not be after Until")
        return DeadLetterFilter(
            name=self.name or None,
            name_prefix=self.name_prefix or None,
            error_type=self.error_type or None,
            failed_reason=self.failed_reason or None,
            source_queue=self.source_queue or None,
            reason=self.reason or None,  # type: ignore[arg-type]  # checked above
            since=since,
            until=until,
            payload_contains=self.payload_contains or None,
            status=self.status or None,
        )


def positive_int(text: str | None, default: int) -> int:
    """``text`` as an int of at least 1, or ``default`` when it is not one."""
    try:
        value = int(text or "")
    except ValueError:
        return default
    return value if value >= 1 else default


@dataclasses.dataclass(frozen=True)
class Where:
    """Which page of the list: the one older than a cursor (``older``, from a page's "Older"
    link), the one newer than a cursor (``newer``), or the newest (neither); and its size."""

    older: str = ""
    newer: str = ""
    limit: int = DEFAULT_LIMIT

    @classmethod
    def from_query(cls, params: Mapping[str, str]) -> Where:
        """The page from query parameters (or form fields); a bad value means the default."""
        limit = positive_int(params.get("limit"), DEFAULT_LIMIT)
        older, newer = (str(params.get(k, "")) for k in ("older", "newer"))
        if len(older) > MAX_CURSOR or len(newer) > MAX_CURSOR or (older and newer):
            older = newer = ""
        return cls(older, newer, limit if limit in LIMITS else DEFAULT_LIMIT)

    def items(self) -> dict[str, str | int]:
        """The parameters that say where, for links and hidden inputs."""
        at: dict[str, str | int] = {"older": self.older} if self.older else {}
        if self.newer:
            at["newer"] = self.newer
        return {**at, "limit": self.limit}

    def first(self) -> Where:
        """The newest page, of the same size."""
        return Where(limit=self.limit)
