"""What a job's failures leave: each failed or stalled attempt, and, for a dead letter, why
and how it died and the timeline of its statuses."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any, Literal

from ._codec import json_or, optional_int

DeadLetterReason = Literal[
    "attempts_exhausted",
    "unrecoverable",
    "stalled",
    "discarded",
    "undecodable",
    "cancelled",
    "expired",
]


@dataclasses.dataclass(frozen=True)
class AttemptRecord:
    """One failed (or stalled) attempt of a job."""

    attempt: int
    started_at: int
    finished_at: int
    worker: str
    outcome: Literal["failed", "stalled"]
    error: str
    error_type: str

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> AttemptRecord:
        return cls(
            attempt=int(raw.get("attempt", 0)),
            started_at=int(raw.get("startedAt", 0)),
            finished_at=int(raw.get("finishedAt", 0)),
            worker=str(raw.get("worker", "")),
            outcome=raw.get("outcome", "failed"),
            error=str(raw.get("error", "")),
            error_type=str(raw.get("errorType", "")),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "attempt": self.attempt,
            "startedAt": self.started_at,
            "finishedAt": self.finished_at,
            "worker": self.worker,
            "outcome": self.outcome,
            "error": self.error,
            "errorType": self.error_type,
        }


@dataclasses.dataclass(frozen=True)
class StatusChange:
    """One entry of a dead letter's timeline: at ``at`` (ms), ``actor`` (``redriver``,
    ``policy`` or ``operator:<name>``) moved it from status ``from_`` to ``to``, with an
    optional ``note``. ``details`` holds what the change carried besides (for a replay: the
    new job's id and queue; for a changed payload: the payload it replaced), as stored."""

    at: int
    from_: str
    to: str
    actor: str
    note: str | None = None
    details: dict[str, Any] = dataclasses.field(default_factory=dict)

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> StatusChange:
        known = ("at", "from", "to", "actor", "note")
        return cls(
            at=int(raw.get("at") or 0),
            from_=str(raw.get("from") or ""),
            to=str(raw.get("to") or ""),
            actor=str(raw.get("actor") or ""),
            note=raw.get("note"),
            details={k: v for k, v in raw.items() if k not in known},
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "at": self.at, "from": self.from_, "to": self.to, "actor": self.actor,
            "note": self.note, **self.details,
        }  # fmt: skip


@dataclasses.dataclass(frozen=True)
class DeadLetterMetadata:
    """Why and how a job died: ``job.dead_letter``, also shown as ``job.data["_dlqMeta"]``."""

    source_queue: str
    original_job_id: str
    failed_reason: str
    stacktrace: list[str]
    attempts_made: int
    dead_lettered_at: int
    original_timestamp: int
    original_opts: dict[str, Any]
    error_type: str
    reason: DeadLetterReason
    attempts: list[AttemptRecord]
    replay_count: int
    status: str = "pending"
    status_at: int | None = None
    timeline: list[StatusChange] = dataclasses.field(default_factory=list)
    last_replayed_at: int | None = None
    replayed_by: str | None = None
    replay_rule: str | None = None
    replay_job_id: str | None = None
    replay_queue: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The camelCase form of ``_dlqMeta``."""
        return {
            "sourceQueue": self.source_queue,
            "originalJobId": self.original_job_id,
            "failedReason": self.failed_reason,
            "stacktrace": list(self.stacktrace),
            "attemptsMade": self.attempts_made,
            "deadLetteredAt": self.dead_lettered_at,
            "originalTimestamp": self.original_timestamp,
            "originalOpts": self.original_opts,
            "errorType": self.error_type,
            "reason": self.reason,
            "attempts": [a.to_json() for a in self.attempts],
            "replayCount": self.replay_count,
            "status": self.status,
            "statusAt": self.status_at,
            "timeline": [change.to_json() for change in self.timeline],
            "lastReplayedAt": self.last_replayed_at,
            "replayedBy": self.replayed_by,
            "replayRule": self.replay_rule,
            "replayJobId": self.replay_job_id,
            "replayQueue": self.replay_queue,
        }

    @classmethod
    def from_fields(cls, f: Mapping[str, str]) -> DeadLetterMetadata | None:
        if "dlq:sourceQueue" not in f:
            return None
        return cls(
            source_queue=f["dlq:sourceQueue"],
            original_job_id=f.get("dlq:originalJobId", ""),
            failed_reason=f.get("dlq:failedReason", ""),
            stacktrace=json.loads(f.get("dlq:stacktrace") or "[]"),
            attempts_made=int(f.get("dlq:attemptsMade") or 0),
            dead_lettered_at=int(f.get("dlq:deadLetteredAt") or 0),
            original_timestamp=int(f.get("dlq:originalTimestamp") or 0),
            original_opts=json_or(f.get("dlq:originalOpts"), {}),
            error_type=f.get("dlq:errorType", ""),
            reason=f.get("dlq:reason", "attempts_exhausted"),  # type: ignore[arg-type]
            attempts=[
                AttemptRecord.from_json(a) for a in json.loads(f.get("dlq:attempts") or "[]")
            ],
            replay_count=int(f.get("dlq:replayCount") or 0),
            status=f.get("dlq:status") or "pending",
            status_at=optional_int(f.get("dlq:statusAt")),
            timeline=[StatusChange.from_json(c) for c in json_or(f.get("dlq:timeline"), [])],
            last_replayed_at=optional_int(f.get("dlq:lastReplayedAt")),
            replayed_by=f.get("dlq:replayedBy") or None,
            replay_rule=f.get("dlq:replayRule") or None,
            replay_job_id=f.get("dlq:replayJob") or None,
            replay_queue=f.get("dlq:replayQueue") or None,
        )
