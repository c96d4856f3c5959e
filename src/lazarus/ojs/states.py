"""OJS's eight states over lazarus's, and the job envelope OJS clients read.

=============  ==============================================================================
OJS state      lazarus
=============  ==============================================================================
scheduled      delayed, never started (``delay_until`` in the future)
available      waiting or prioritized (or held by a paused queue)
pending        delayed "for ever" (due in about 317 years), never started, pushed with
               ``options.pending`` and not yet activated (its record's ``pending`` flag)
active         active (under a lease, in-process or remote)
retryable      delayed after a failed attempt, waiting out its backoff
completed      completed
cancelled      removed by a cancel (the OJS record keeps the job's last view)
discarded      failed with no retry left: kept in ``failed``, or dead-lettered
=============  ==============================================================================
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

from .._connection import now_ms
from ..job import Job, JobState
from ..masking import masked
from .envelope import due_ms, priority_number
from .errors import OjsError

TERMINAL = ("completed", "cancelled", "discarded")


def iso(ms: int | None) -> str | None:
    """Milliseconds as an RFC 3339 UTC timestamp with milliseconds, or ``None``."""
    if not ms:
        return None
    moment = datetime.fromtimestamp(ms / 1000, timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def ojs_state(engine_state: JobState, job: Job | None, record: dict[str, str]) -> str:
    """The OJS state of a job from its engine state and its OJS record."""
    if record.get("state") and engine_state == "unknown":
        # The terminal state OJS recorded when the engine let go. A job the engine holds
        # again (a retry, its record not reopened yet: or never, when the server died in
        # between) is in the engine's state.
        return record["state"]
    if record.get("cancelling") and _cancelled(engine_state, job):
        return "cancelled"  # a cancel cut short after the engine let go, before its record
    if engine_state == "unknown" and record.get("adding"):
        return _to_be_added(record)
    if engine_state in ("waiting", "prioritized", "paused"):
        return "available"
    if engine_state == "delayed":
        if job is not None and job.attempts_started:
            return "retryable"
        return "pending" if record.get("pending") else "scheduled"
    if engine_state == "active":
        return "active"
    if engine_state == "completed":
        return "completed"
    return "discarded"  # failed, or gone from the queue (dead-lettered by a worker)


def _cancelled(engine_state: JobState, job: Job | None) -> bool:
    """Whether a cancel (its record marked ``cancelling``) took the job from the engine:
    removed (the engine holds nothing), or an active one failed as ``cancelled``."""
    if engine_state == "unknown":
        return True
    return engine_state == "failed" and job is not None and job.error_type == "cancelled"


def _to_be_added(record: dict[str, str]) -> str:
    """The state of a job whose record awaits its add to the engine (``adding``): the one its
    PUSH gives it, which the add (or, for an orphan, the server's upkeep) makes real."""
    if record.get("pending"):
        return "pending"
    env = json.loads(record.get("env") or "{}")
    try:
        due = due_ms(env, env.get("options") or {})
    except OjsError:  # pragma: no cover - checked by its PUSH
        due = None
    return "scheduled" if due is not None and due > now_ms() else "available"


def envelope(
    queue: str, job_id: str, engine_state: JobState, job: Job | None, record: dict[str, str]
) -> dict[str, Any]:
    """The OJS job envelope: what the client sent, and the system-managed fields."""
    env: dict[str, Any] = json.loads(record.get("env") or "{}")
    snap: dict[str, Any] = json.loads(record.get("snapshot") or "{}")
    policy = json.loads(record.get("policy") or "{}")
    state = ojs_state(engine_state, job, record)
    options = env.get("options") or {}
    view: dict[str, Any] = {
        **env,
        "specversion": "1.0",
        "id": job_id,
        "type": env.get("type", job.name if job else ""),
        "queue": queue,
        "args": masked(env.get("args", job.original_data if job else [])),
        "meta": env.get("meta", {}),
        "priority": priority_number(options.get("priority", 0)),  # HIGH as 3
        "state": state,
        "attempt": job.attempts_started if job is not None else snap.get("attempt", 0),
        "max_attempts": policy.get("max_attempts", 3),
        "created_at": iso(int(record.get("created_at") or 0) or (job.timestamp if job else 0)),
        "enqueued_at": iso(int(record.get("enqueued_at") or 0) or (job.timestamp if job else 0)),
    }
    if "timeout_ms" in options:
        view["timeout_ms"] = options["timeout_ms"]
    started = job.processed_on if job is not None else snap.get("started_at")
    if view["attempt"] and started:
        view["started_at"] = iso(started)
    _finish(view, state, job, snap, record)
    return {k: v for k, v in view.items() if v is not None}


def _finish(
    view: dict[str, Any], state: str, job: Job | None, snap: dict[str, Any],
    record: dict[str, str],
) -> None:  # fmt: skip
    """The fields of how the job ended (or last failed)."""
    errors = json.loads(record.get("errors") or "[]")
    if errors:
        view["errors"] = errors
        if state != "completed":
            view["error"] = errors[-1]
    elif job is not None and job.failed_reason and state != "completed":
        view["error"] = {"code": "handler_error", "type": job.error_type or "Error",
                         "message": job.failed_reason}  # fmt: skip
    if state == "completed":
        view["completed_at"] = iso(job.finished_on if job else snap.get("completed_at"))
        result = job.return_value if job is not None else snap.get("result")
        if result is None and "result" in record:
            result = json.loads(record["result"])
        if result is not None:
            view["result"] = masked(result)
    elif state == "discarded":
        ended = snap.get("completed_at") or (job.finished_on if job else None)
        view["completed_at"] = view["discarded_at"] = iso(ended)
    elif state == "cancelled":
        view["cancelled_at"] = iso(snap.get("cancelled_at"))
    if state in ("retryable", "active", "available") and record.get("retry_delay_ms"):
        view["retry_delay_ms"] = int(record["retry_delay_ms"])
        view["next_attempt_at"] = iso(int(record.get("next_attempt_at") or 0))
