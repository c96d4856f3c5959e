"""The JSON shapes of seed 003's dead letter API (camelCase), built from a record row or from
a dead letter in Redis, so both sources answer alike."""

from __future__ import annotations

import datetime
import json
from typing import Any

from ..job import Job
from ..masking import masked
from .database import as_datetime, from_ms
from .queries import RecordPage


def _iso(value: Any) -> str | None:
    at = as_datetime(value)
    if at is None:
        return None
    at = at.astimezone(datetime.timezone.utc)
    return f"{at:%Y-%m-%dT%H:%M:%S}.{at.microsecond // 1000:03d}Z"


def _parsed(text: Any) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def item_json(row: dict[str, Any]) -> dict[str, Any]:
    """One dead letter as a list item: seed 003's fields, then lazarus's."""
    return {
        "id": row["id"],
        "originalJobId": row["original_job_id"],
        "jobName": row["job_name"],
        "jobType": row["job_type"],
        "jobPayload": masked(_parsed(row["job_payload"])),
        "jobPriority": row["job_priority"],
        "failureReason": row["failure_reason"],
        "failureCount": row["failure_count"],
        "lastError": row["last_error"],
        "workerId": row["worker_id"],
        "originalCreatedAt": _iso(row["original_created_at"]),
        "failedAt": _iso(row["failed_at"]),
        "sourceQueue": row["source_queue"],
        "deadLetterQueue": row["dead_letter_queue"],
        "errorType": row["error_type"],
        "reason": row["reason"],
        "status": row["status"],
        "replayCount": row["replay_count"],
        "archivedAt": _iso(row.get("archived_at")),
        "resolvedAt": _iso(row.get("resolved_at")),
        "removedAt": _iso(row.get("removed_at")),
    }


def detail_json(row: dict[str, Any]) -> dict[str, Any]:
    """One dead letter in full: the item, the stack, every attempt, options and changes."""
    return {
        **item_json(row),
        "errorStack": row["error_stack"],
        "stacktrace": _parsed(row["stacktrace"]),
        "attempts": _parsed(row["attempts"]),
        "originalOpts": _parsed(row["original_opts"]),
        "timeline": _parsed(row.get("timeline")),
        "events": [
            {"event": e["event"], "status": e["status"], "at": _iso(e["at"])}
            for e in row.get("events", [])
        ],
    }


def page_json(page: RecordPage) -> dict[str, Any]:
    """``{data, total, page, limit, totalPages}``."""
    return {
        "data": [item_json(r) for r in page.rows],
        "total": page.total,
        "page": page.page,
        "limit": page.limit,
        "totalPages": page.total_pages,
    }


def stats_json(stats: dict[str, Any]) -> dict[str, Any]:
    """``{total, byType, oldest, newest}``."""
    return {**stats, "oldest": _iso(stats["oldest"]), "newest": _iso(stats["newest"])}


def row_from_job(job: Job) -> dict[str, Any]:
    """The record row a dead letter in Redis would have (without outbox history)."""
    meta = job.dead_letter
    if meta is None:
        raise ValueError(f"job {job.id!r} is not a dead letter")
    last = meta.attempts[-1] if meta.attempts else None
    return {
        "id": job.id,
        "original_job_id": meta.original_job_id,
        "job_name": job.name,
        "job_type": job.name,
        "job_payload": job.raw_data,
        "job_priority": int(meta.original_opts.get("priority") or 0),
        "failure_reason": meta.failed_reason,
        "failure_count": meta.attempts_made,
        "last_error": f"{meta.error_type}: {meta.failed_reason}" if meta.error_type
        else meta.failed_reason or None,
        "error_stack": meta.stacktrace[-1] if meta.stacktrace else None,
        "worker_id": last.worker if last else None,
        "original_created_at": from_ms(meta.original_timestamp or None),
        "failed_at": from_ms(meta.dead_lettered_at),
        "source_queue": meta.source_queue,
        "dead_letter_queue": job.queue_name,
        "error_type": meta.error_type,
        "reason": meta.reason,
        "status": meta.status,
        "attempts": json.dumps([a.to_json() for a in meta.attempts]),
        "stacktrace": json.dumps(meta.stacktrace),
        "original_opts": json.dumps(meta.original_opts),
        "replay_count": meta.replay_count,
        "events": [],
    }  # fmt: skip
