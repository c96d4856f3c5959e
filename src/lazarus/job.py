"""Jobs, their options and their states.

A job is a hash in Redis; :class:`Job` is a snapshot of it. Options are validated when a job
is added, before anything is written, and every error names the offending field.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import random
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from . import _codec
from ._checks import check_int
from ._entry import OnExhaustion, check_on_exhaustion
from ._job_actions import JobActions
from ._progress import JobHandle

JobState = Literal[
    "waiting", "paused", "prioritized", "delayed", "active", "completed", "failed", "unknown"
]
DeadLetterReason = Literal[
    "attempts_exhausted", "unrecoverable", "stalled", "discarded", "undecodable"
]

MAX_PRIORITY = 2**21
# The longest wait any option can ask for (a delay, a backoff, a timeout, a lease, a
# deduplication ttl, a schedule's interval): 10**13 ms, about 317 years. Due times are sums of
# the clock and such a wait, compared as Redis scores (doubles) and passed through Lua, whose
# numbers print exactly up to 1e14: this keeps every one of them exact.
MAX_DURATION_MS = 10**13
MAX_ATTEMPTS = 2**31 - 1
MAX_TIMESTAMP_MS = 253_402_300_799_999  # the last millisecond of the year 9999
MAX_COUNT = 2**53  # a count to keep: every one of them is exact as a Lua number
# A job's name is a label: stored in its hash, in each dead letter index of it and its values,
# and shown on every surface. The HTTP API filters by names of up to this length.
MAX_JOB_NAME_LENGTH = 1_000
_BACKOFF_TYPES = ("fixed", "exponential")


@dataclasses.dataclass(frozen=True)
class Backoff:
    """How long to wait before a retry: ``fixed`` waits ``delay`` ms each time,
    ``exponential`` waits ``delay * 2 ** (attempt - 1)`` ms.

    ``jitter`` (0 to 1) randomises that wait: a wait ``w`` becomes a random one between
    ``w * (1 - jitter)`` and ``w`` (1 is "full jitter", 0.5 "equal jitter"), so that jobs
    failing together do not all retry at the same moment. Any other ``type`` names a custom
    strategy: the worker's ``backoff_strategy`` computes the wait (see docs/workers.md).
    """

    type: str = "fixed"
    delay: int = 0
    jitter: float = 0

    def __post_init__(self) -> None:
        if not isinstance(self.type, str) or not self.type:
            raise ValueError(f"backoff.type must be a non-empty str, got {self.type!r}")
        check_int(self.delay, "backoff.delay", minimum=0, maximum=MAX_DURATION_MS)
        if isinstance(self.jitter, bool) or not isinstance(self.jitter, (int, float)):
            raise TypeError(f"backoff.jitter must be a number, not {type(self.jitter).__name__}")
        if not 0 <= self.jitter <= 1:
            raise ValueError(f"backoff.jitter must be between 0 and 1, got {self.jitter}")

    @property
    def builtin(self) -> bool:
        """Whether the type is ``fixed`` or ``exponential`` (not a custom strategy's name)."""
        return self.type in _BACKOFF_TYPES

    def wait_ms(self, attempts_made: int, rand: Callable[[], float] = random.random) -> int:
        """Milliseconds to wait after the ``attempts_made``-th failed attempt (a custom type
        waits ``delay``, jittered, when no strategy takes it)."""
        wait = self.delay
        if self.type == "exponential":  # doubled at most 64 times: past that it is capped
            wait = self.delay * 2 ** min(max(attempts_made - 1, 0), 64)
        wait = min(wait, MAX_DURATION_MS)
        if self.jitter:
            return int(wait * (1 - self.jitter) + rand() * wait * self.jitter)
        return int(wait)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type, "delay": self.delay}
        if self.jitter:
            out["jitter"] = self.jitter
        return out

    @classmethod
    def parse(cls, value: object) -> Backoff | None:
        if value is None or isinstance(value, Backoff):
            return value
        if isinstance(value, Mapping):
            unknown = set(value) - {"type", "delay", "jitter"}
            if unknown:
                raise ValueError(f"backoff has unknown keys: {sorted(unknown)}")
            return cls(
                type=value.get("type", "fixed"),
                delay=value.get("delay", 0),
                jitter=value.get("jitter", 0),
            )
        raise TypeError(f"backoff must be a dict or Backoff, not {type(value).__name__}")


Retention = bool | int | Mapping[str, int]


@dataclasses.dataclass(frozen=True)
class KeepPolicy:
    """A normalised ``remove_on_complete`` / ``remove_on_fail`` setting."""

    remove_now: bool = False
    keep_count: int = -1
    keep_age_ms: int = -1

    @classmethod
    def parse(cls, value: object, field: str) -> KeepPolicy:
        if value is False or value is None:
            return KEEP_ALL
        if value is True:
            return cls(remove_now=True)
        if isinstance(value, int):
            return cls(keep_count=check_int(value, field, minimum=0, maximum=MAX_COUNT))
        if isinstance(value, Mapping):
            unknown = set(value) - {"age", "count"}
            if unknown:
                raise ValueError(f"{field} has unknown keys: {sorted(unknown)}")
            age, count = value.get("age"), value.get("count")
            if count is not None:
                count = check_int(count, f"{field}.count", minimum=0, maximum=MAX_COUNT)
            if age is not None:
                age = check_int(age, f"{field}.age", minimum=0, maximum=MAX_DURATION_MS // 1000)
            return cls(
                keep_count=-1 if count is None else count,
                keep_age_ms=-1 if age is None else age * 1000,
            )
        raise TypeError(f"{field} must be a bool, an int or a dict, not {type(value).__name__}")

    def args(self) -> list[int]:
        return [self.keep_count, self.keep_age_ms, int(self.remove_now)]


KEEP_ALL = KeepPolicy()
"""Keep every finished job: the default, and what ``KeepPolicy.parse`` gives for ``False``."""


@dataclasses.dataclass(frozen=True)
class JobOptions:
    """The options a job was added with. ``on_exhaustion`` says what a terminal failure does:
    ``dead_letter`` (the default when the worker has a dead letter queue), ``fail`` (the
    queue's ``failed`` set) or ``discard`` (removed, with a ``discarded`` event)."""

    attempts: int = 1
    backoff: Backoff | None = None
    delay: int = 0
    priority: int = 0
    remove_on_complete: Retention = False
    remove_on_fail: Retention = False
    timeout: int | None = None
    on_exhaustion: OnExhaustion | None = None

    def __post_init__(self) -> None:
        check_int(self.attempts, "attempts", minimum=1, maximum=MAX_ATTEMPTS)
        check_on_exhaustion(self.on_exhaustion)
        if self.timeout is not None:
            check_int(self.timeout, "timeout", minimum=1, maximum=MAX_DURATION_MS)
        check_int(self.delay, "delay", minimum=0, maximum=MAX_DURATION_MS)
        check_int(self.priority, "priority", minimum=0, maximum=MAX_PRIORITY)
        object.__setattr__(self, "backoff", Backoff.parse(self.backoff))
        KeepPolicy.parse(self.remove_on_complete, "remove_on_complete")
        KeepPolicy.parse(self.remove_on_fail, "remove_on_fail")

    @functools.cached_property
    def keep_completed(self) -> KeepPolicy:
        return KeepPolicy.parse(self.remove_on_complete, "remove_on_complete")

    @functools.cached_property
    def keep_failed(self) -> KeepPolicy:
        return KeepPolicy.parse(self.remove_on_fail, "remove_on_fail")

    def to_dict(self) -> dict[str, Any]:
        """The JSON form stored with the job (and shown as ``_dlqMeta.originalOpts``)."""
        out: dict[str, Any] = {"attempts": self.attempts, "delay": self.delay}
        if self.backoff is not None:
            out["backoff"] = self.backoff.to_json()
        if self.priority:
            out["priority"] = self.priority
        if self.remove_on_complete is not False:
            out["removeOnComplete"] = _retention_json(self.remove_on_complete)
        if self.remove_on_fail is not False:
            out["removeOnFail"] = _retention_json(self.remove_on_fail)
        if self.timeout is not None:
            out["timeout"] = self.timeout
        if self.on_exhaustion is not None:
            out["onExhaustion"] = self.on_exhaustion
        return out

    @staticmethod
    @functools.lru_cache(maxsize=256)
    def from_json(raw: str) -> JobOptions:
        """The options stored as ``raw`` (a job's ``opts`` field). Jobs mostly share a few
        forms, and options are immutable: one instance serves every job of a form."""
        return JobOptions.from_dict(json.loads(raw), frozen=True)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], *, frozen: bool = False) -> JobOptions:
        """The options of their stored form; ``frozen`` makes a retention mapping read-only
        (for an instance that many jobs share)."""
        if frozen:
            raw = {k: types.MappingProxyType(dict(v)) if isinstance(v, Mapping) else v
                   for k, v in raw.items()}  # fmt: skip
        return cls(
            attempts=raw.get("attempts", 1),
            backoff=raw.get("backoff"),
            delay=raw.get("delay", 0),
            priority=raw.get("priority", 0),
            remove_on_complete=raw.get("removeOnComplete", False),
            remove_on_fail=raw.get("removeOnFail", False),
            timeout=raw.get("timeout"),
            on_exhaustion=raw.get("onExhaustion"),
        )


def _retention_json(value: Retention) -> Any:
    return dict(value) if isinstance(value, Mapping) else value


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
            original_opts=_json_or(f.get("dlq:originalOpts"), {}),
            error_type=f.get("dlq:errorType", ""),
            reason=f.get("dlq:reason", "attempts_exhausted"),  # type: ignore[arg-type]
            attempts=[
                AttemptRecord.from_json(a) for a in json.loads(f.get("dlq:attempts") or "[]")
            ],
            replay_count=int(f.get("dlq:replayCount") or 0),
            status=f.get("dlq:status") or "pending",
            status_at=_opt_int(f.get("dlq:statusAt")),
            timeline=[StatusChange.from_json(c) for c in _json_or(f.get("dlq:timeline"), [])],
            last_replayed_at=_opt_int(f.get("dlq:lastReplayedAt")),
            replayed_by=f.get("dlq:replayedBy") or None,
            replay_rule=f.get("dlq:replayRule") or None,
            replay_job_id=f.get("dlq:replayJob") or None,
            replay_queue=f.get("dlq:replayQueue") or None,
        )


DLQ_VALUE_KEY = "_dlqValue"


@dataclasses.dataclass(frozen=True)
class Job(JobActions):
    """A snapshot of one job.

    For a dead letter, ``data`` is the original payload with ``_dlqMeta`` added (a payload that
    is not an object appears as ``{"_dlqValue": payload, "_dlqMeta": ...}``), ``original_data``
    is the payload exactly as it was sent, and ``dead_letter`` is the typed metadata.

    A replayed job has ``replay_of`` (the id of the dead letter it came from) and
    ``replay_dead_letter_queue`` (the queue holding that dead letter), which its completion
    resolves and its terminal failure returns to.
    """

    id: str
    name: str
    original_data: Any
    opts: JobOptions
    queue_name: str
    timestamp: int
    attempts_made: int = 0
    attempts_started: int = 0
    processed_on: int | None = None
    finished_on: int | None = None
    failed_reason: str | None = None
    error_type: str | None = None
    stacktrace: list[str] = dataclasses.field(default_factory=list)
    attempts: list[AttemptRecord] = dataclasses.field(default_factory=list)
    return_value: Any = None
    replay_count: int = 0
    stalled_counter: int = 0
    dead_letter: DeadLetterMetadata | None = None
    deduplication_id: str | None = None
    progress: Any = None
    repeat_key: str | None = None
    replay_of: str | None = None
    replay_dead_letter_queue: str | None = None
    raw_data: str = dataclasses.field(default="null", repr=False)
    opts_json: str = dataclasses.field(default="{}", repr=False)
    _handle: JobHandle | None = dataclasses.field(default=None, repr=False, compare=False)

    @property
    def data(self) -> Any:
        if self.dead_letter is None:
            return self.original_data
        meta = self.dead_letter.to_json()
        if isinstance(self.original_data, dict):
            return {**self.original_data, "_dlqMeta": meta}
        return {DLQ_VALUE_KEY: self.original_data, "_dlqMeta": meta}

    @classmethod
    def _build(cls, **fields: Any) -> Job:
        """``Job(**fields)``, built as fast as a plain object: the frozen ``__init__`` sets
        each of the ~25 fields through ``object.__setattr__`` (about 5 µs a job), which the
        hot paths (every job claimed, every job added) cannot afford."""
        job = object.__new__(cls)
        state = job.__dict__
        state.update(_JOB_DEFAULTS)
        state["stacktrace"], state["attempts"] = [], []
        state.update(fields)
        if len(state) != _JOB_FIELD_COUNT:  # a name that is no field, or a field left out
            cls(**fields)  # raises the dataclass's TypeError naming it
        return job

    @classmethod
    def from_fields(cls, job_id: str, f: Mapping[str, str], queue_name: str) -> Job:
        """Build a job from its hash fields (decoded to str)."""
        opts_json = f.get("opts") or "{}"
        raw_data = f.get("data") or "null"
        dead_letter = DeadLetterMetadata.from_fields(f)
        try:
            original_data = _codec.decode(raw_data)
        except ValueError:
            if dead_letter is None:
                raise
            # A dead letter must always be readable: one dead-lettered as undecodable keeps
            # its bytes (raw_data) but has no decoded payload.
            original_data = None
        return cls._build(
            id=job_id,
            name=f.get("name", ""),
            original_data=original_data,
            opts=JobOptions.from_json(opts_json),
            queue_name=queue_name,
            timestamp=int(f.get("timestamp") or f.get("dlq:deadLetteredAt") or 0),
            attempts_made=int(f.get("attemptsMade") or 0),
            attempts_started=int(f.get("ats") or 0),
            processed_on=_opt_int(f.get("processedOn")),
            finished_on=_opt_int(f.get("finishedOn")),
            failed_reason=f.get("failedReason"),
            error_type=f.get("errorType"),
            stacktrace=json.loads(f["stacktrace"]) if f.get("stacktrace") else [],
            attempts=[AttemptRecord.from_json(a) for a in json.loads(f["attempts"])]
            if f.get("attempts")
            else [],
            return_value=_codec.decode(f["returnvalue"]) if "returnvalue" in f else None,
            replay_count=int(f.get("rc") or 0),
            stalled_counter=int(f.get("stalledCounter") or 0),
            dead_letter=dead_letter,
            deduplication_id=f.get("deid"),
            progress=_json_or(f.get("progress"), None),
            repeat_key=f.get("rpk"),
            replay_of=f.get("replayOf") or None,
            replay_dead_letter_queue=f.get("replayDlq") or None,
            raw_data=raw_data,
            opts_json=opts_json,
        )


_JOB_FIELD_COUNT = len(dataclasses.fields(Job))
_JOB_DEFAULTS = {
    f.name: f.default for f in dataclasses.fields(Job) if f.default is not dataclasses.MISSING
}
# The fields with a default factory, each given a new list by Job._build.
assert {
    f.name for f in dataclasses.fields(Job) if f.default_factory is not dataclasses.MISSING
} == {"stacktrace", "attempts"}


def _json_or(raw: str | None, default: Any) -> Any:
    """``raw`` decoded, or ``default`` when it is missing or not JSON (a dead letter of a job
    whose stored options could not be decoded keeps them as they were)."""
    try:
        return json.loads(raw) if raw else default
    except ValueError:
        return default


def _opt_int(value: str | None) -> int | None:
    return None if value is None or value == "" else int(value)


def fields_from_reply(reply: Mapping[Any, Any] | Sequence[Any]) -> dict[str, str]:
    """A hash's fields as str: from ``HGETALL``'s mapping, or a flat ``[field, value, ...]``
    reply; bytes are decoded (str, from a client that decodes replies, are kept)."""
    try:
        return {k if type(k) is str else k.decode(): v if type(v) is str else v.decode()
                for k, v in _pairs(reply)}  # fmt: skip
    except AttributeError:  # numbers
        return {as_str(k): as_str(v) for k, v in _pairs(reply)}


def _pairs(reply: Mapping[Any, Any] | Sequence[Any]) -> Any:
    if isinstance(reply, Mapping):
        return reply.items()
    it = iter(reply)
    return zip(it, it)


def as_str(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
