"""From outbox entries and dead letter hashes to the record's rows: the SQL that applies one
change, idempotent and in order.

A dead letter's row is upserted by its id, and only by a change newer than the one it holds
(``outbox_position``): a change applied twice, or late after a newer one, leaves it as it is.
Each change is also kept as a row of ``dead_letter_events`` (inserted once), the record's own
timeline of the dead letter.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping
from typing import Any

from .database import Statement, from_ms
from .outbox import OutboxEntry

COLUMNS = (
    "id", "original_job_id", "job_name", "job_type", "job_payload", "job_priority",
    "failure_reason", "failure_count", "last_error", "error_stack", "worker_id",
    "original_created_at", "failed_at", "source_queue", "dead_letter_queue", "error_type",
    "reason", "status", "attempts", "stacktrace", "original_opts", "job_delay", "job_attempts",
    "replay_count", "timeline", "archived_at", "resolved_at", "removed_at", "updated_at",
    "outbox_position", "arrival",
)  # fmt: skip
JSON_COLUMNS = {"job_payload", "attempts", "stacktrace", "original_opts", "timeline"}
# Times a status sets once; a later change keeps them.
_KEPT = {"archived_at", "resolved_at", "removed_at"}
_UPDATED = [c for c in COLUMNS if c not in ("id", "arrival")]
_UPSERT = (
    f"INSERT INTO dead_letters ({', '.join(COLUMNS)}) VALUES "
    f"({', '.join('?json' if c in JSON_COLUMNS else '?' for c in COLUMNS)}) "
    "ON CONFLICT (id) DO UPDATE SET "
    + ", ".join(
        f"{c} = COALESCE(excluded.{c}, dead_letters.{c})" if c in _KEPT else f"{c} = excluded.{c}"
        for c in _UPDATED
    )
    # A dead letter's place among one millisecond's arrivals moves only when it arrives again.
    + ", arrival = CASE WHEN excluded.failed_at = dead_letters.failed_at "
    "THEN dead_letters.arrival ELSE excluded.arrival END"
    + " WHERE dead_letters.outbox_position < excluded.outbox_position"
)
_EVENT = (
    "INSERT INTO dead_letter_events "
    "(dead_letter_id, outbox_position, dead_letter_queue, event, status, at) "
    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (dead_letter_id, outbox_position) DO NOTHING"
)


def statements(entry: OutboxEntry, live: Mapping[str, str] | None) -> list[Statement]:
    """The SQL that applies ``entry``: its event row, and the dead letter's row from the
    entry's snapshot or else ``live`` (its hash as read now; ``None`` when it is gone, and a
    later entry of the same dead letter then carries its fields)."""
    fields = entry.snapshot or live
    status = entry.status
    if not entry.snapshot and live is not None:
        status = live.get("dlq:status") or status
    at = from_ms(entry.at)
    # The event row keeps the status this change entered; the dead letter's row, applied
    # only when the change is its newest, the status it has now.
    result: list[Statement] = [
        (_EVENT, (entry.id, entry.sort_key, entry.queue, entry.event, entry.status or status or "",
                  at))
    ]  # fmt: skip
    if fields and fields.get("dlq:sourceQueue") is not None:
        row = dead_letter_row(entry, fields, status)
        result.append((_UPSERT, [row[c] for c in COLUMNS]))
    return result


def dead_letter_row(entry: OutboxEntry, h: Mapping[str, str], status: str) -> dict[str, Any]:
    """The ``dead_letters`` row of dead letter ``entry.id`` with fields ``h``."""
    attempts_text = h.get("dlq:attempts") or "[]"
    stack_text = h.get("dlq:stacktrace") or "[]"
    error_type, reason_text = h.get("dlq:errorType", ""), h.get("dlq:failedReason", "")
    at = from_ms(entry.at)
    return {
        "id": entry.id,
        "original_job_id": h.get("dlq:originalJobId", ""),
        "job_name": h.get("name", ""),
        "job_type": h.get("name", ""),
        "job_payload": h.get("data") or "null",
        "job_priority": int(h.get("dlq:priority") or 0),
        "failure_reason": reason_text,
        "failure_count": int(h.get("dlq:attemptsMade") or 0),
        "last_error": f"{error_type}: {reason_text}" if error_type else reason_text or None,
        "error_stack": _last(stack_text),
        "worker_id": _last_worker(attempts_text),
        "original_created_at": from_ms(h.get("dlq:originalTimestamp")),
        "failed_at": from_ms(h.get("dlq:deadLetteredAt")) or at,
        "source_queue": h.get("dlq:sourceQueue", ""),
        "dead_letter_queue": entry.queue,
        "error_type": error_type,
        "reason": h.get("dlq:reason", ""),
        "status": status or "pending",
        "attempts": attempts_text,
        "stacktrace": stack_text,
        "original_opts": h.get("dlq:originalOpts") or "{}",
        "job_delay": int(h.get("dlq:delay") or 0),
        "job_attempts": int(h.get("dlq:atm") or 1),
        "replay_count": int(h.get("dlq:replayCount") or 0),
        "timeline": h.get("dlq:timeline"),
        "archived_at": at if status == "archived" else None,
        "resolved_at": at if status == "resolved" else None,
        "removed_at": at if entry.snapshot else None,
        "updated_at": at or datetime.datetime.now(datetime.timezone.utc),
        "outbox_position": entry.sort_key,
        "arrival": entry.arrival_key,
    }


def _last(text: str) -> str | None:
    try:
        items = json.loads(text)
    except ValueError:
        return None
    return str(items[-1]) if isinstance(items, list) and items else None


def _last_worker(text: str) -> str | None:
    try:
        items = json.loads(text)
    except ValueError:
        return None
    if isinstance(items, list) and items and isinstance(items[-1], dict):
        worker = items[-1].get("worker")
        return str(worker) if worker is not None else None
    return None
