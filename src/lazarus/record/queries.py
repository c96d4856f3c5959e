"""Reading the record: pages of dead letters (newest first), one dead letter with its events,
and the figures of ``/api/v1/dead-letter/stats``."""

from __future__ import annotations

import dataclasses
from typing import Any

from .._keys import validate_queue_name
from ..dead_letter.filters import DeadLetterStatus
from .database import Database, as_datetime

MAX_LIMIT = 1000
# The statuses a row holds (docs/record.md): a dead letter's own; the cause of its removal
# from Redis; replayed from the record's copy; a tombstone.
STATUSES = (*(s.value for s in DeadLetterStatus), "purged", "pruned", "removed", "cleaned",
            "claimed", "replayed", "deleted")  # fmt: skip
_TIMES = ("original_created_at", "failed_at", "archived_at", "resolved_at", "removed_at",
          "updated_at")  # fmt: skip


@dataclasses.dataclass(frozen=True)
class RecordPage:
    """One page of the record's dead letters, newest first, and how many match in all."""

    rows: list[dict[str, Any]]
    total: int
    page: int
    limit: int

    @property
    def total_pages(self) -> int:
        """How many pages of ``limit`` rows the matching dead letters fill."""
        return (self.total + self.limit - 1) // self.limit


def _check_filters(job_type: object, status: object, queue: object) -> None:
    """Raise, naming the field, unless each filter is None or a value a row can hold."""
    for field, value in (("job_type", job_type), ("status", status), ("queue", queue)):
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{field} must be a str or None, not {type(value).__name__}")
    if status is not None and status not in STATUSES:
        raise ValueError(f"status must be one of {', '.join(STATUSES)}, got {status!r}")
    if queue is not None:
        validate_queue_name(queue, "queue")


def _where(job_type: str | None, status: str | None, queue: str | None) -> tuple[str, list[Any]]:
    _check_filters(job_type, status, queue)
    # Deleted dead letters are tombstones: listed only when asked for by status.
    clauses, params = ([] if status is not None else ["status <> 'deleted'"]), []
    for column, value in (("job_type", job_type), ("status", status),
                          ("dead_letter_queue", queue)):  # fmt: skip
        if value is not None:
            clauses.append(f"{column} = ?")
            params.append(value)
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", params


def _check_page(page: object, limit: object) -> tuple[int, int]:
    for field, value, top in (("page", page, None), ("limit", limit, MAX_LIMIT)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{field} must be an int, not {type(value).__name__}")
        if value < 1 or (top is not None and value > top):
            raise ValueError(f"{field} must be from 1{f' to {top}' if top else ''}, got {value}")
    return int(page), int(limit)  # type: ignore[call-overload]


def _row(row: dict[str, Any]) -> dict[str, Any]:
    for column in _TIMES:
        if column in row:
            row[column] = as_datetime(row[column])
    return row


async def list_dead_letters(
    db: Database,
    *,
    page: int = 1,
    limit: int = 20,
    job_type: str | None = None,
    status: str | None = None,
    queue: str | None = None,
) -> RecordPage:
    """A page of the record's dead letters, newest first, optionally of one job type, status
    or dead letter queue."""
    page, limit = _check_page(page, limit)
    where, params = _where(job_type, status, queue)
    total = await db.fetch(f"SELECT COUNT(*) AS n FROM dead_letters{where}", params)
    rows = await db.fetch(
        f"SELECT {_select(db)} FROM dead_letters{where} "
        "ORDER BY failed_at DESC, arrival DESC, id DESC LIMIT ? OFFSET ?",
        [*params, limit, (page - 1) * limit],
    )
    return RecordPage([_row(r) for r in rows], int(total[0]["n"]), page, limit)


def _select(db: Database) -> str:
    # PostgreSQL's json columns come back parsed; their exact text is what the record keeps.
    if db.dialect == "sqlite":
        return "*"
    from .rows import COLUMNS, JSON_COLUMNS

    return ", ".join(db.payload(c) if c in JSON_COLUMNS else c for c in COLUMNS)


async def get_dead_letter(db: Database, dead_letter_id: str) -> dict[str, Any] | None:
    """One dead letter of the record, with ``events`` (its changes, oldest first), or None."""
    rows = await db.fetch(f"SELECT {_select(db)} FROM dead_letters WHERE id = ?", [dead_letter_id])
    if not rows:
        return None
    events = await db.fetch(
        "SELECT event, status, at FROM dead_letter_events WHERE dead_letter_id = ? "
        "ORDER BY outbox_position",
        [dead_letter_id],
    )
    row = _row(rows[0])
    row["events"] = [{**e, "at": as_datetime(e["at"])} for e in events]
    return row


async def stats(db: Database) -> dict[str, Any]:
    """``total``, ``byType`` (``[{jobType, count}]``, most first), ``oldest`` and ``newest``
    (failure times) of every dead letter the record holds (deleted ones aside)."""
    totals = await db.fetch(
        "SELECT COUNT(*) AS n, MIN(failed_at) AS oldest, MAX(failed_at) AS newest "
        "FROM dead_letters WHERE status <> 'deleted'"
    )
    by_type = await db.fetch(
        "SELECT job_type, COUNT(*) AS n FROM dead_letters WHERE status <> 'deleted' "
        "GROUP BY job_type "
        "ORDER BY COUNT(*) DESC, job_type"
    )
    return {
        "total": int(totals[0]["n"]),
        "byType": [{"jobType": r["job_type"], "count": int(r["n"])} for r in by_type],
        "oldest": as_datetime(totals[0]["oldest"]),
        "newest": as_datetime(totals[0]["newest"]),
    }
