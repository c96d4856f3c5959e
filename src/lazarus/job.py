"""Jobs and their states.

A job is a hash in Redis; :class:`Job` is a snapshot of it. Its options are in
:mod:`.job_options`, and what its failures leave (attempts, a dead letter's metadata) in
:mod:`.history`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from . import _codec
from ._codec import json_or, optional_int
from ._job_actions import JobActions
from ._progress import JobHandle
from .history import AttemptRecord, DeadLetterMetadata
from .job_options import JobOptions

JobState = Literal[
    "waiting", "paused", "prioritized", "delayed", "active", "completed", "failed", "unknown"
]

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

    ``opts`` are the options as the job was added; ``priority`` is its priority now
    (:meth:`~lazarus.Queue.change_job_priority` changes it).
    """

    id: str
    name: str
    original_data: Any
    opts: JobOptions
    queue_name: str
    timestamp: int
    priority: int = 0
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
    retried_on: int | None = None  # when retry_job last sent it back from failed
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
    def expires_at(self) -> int | None:
        """When the job must have started (ms since the epoch; ``expires`` of
        :meth:`~lazarus.Queue.add`, from its add or from its last ``retry_job``), or ``None``
        when it has no expiry."""
        if self.opts.expires is None:
            return None
        return max(self.timestamp, self.retried_on or 0) + self.opts.expires

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
        job, state = cls._blank(_JOB_DEFAULTS)
        state.update(fields)
        if len(state) != _JOB_FIELD_COUNT:  # a name that is no field, or a field left out
            cls(**fields)  # raises the dataclass's TypeError naming it
        return job

    @classmethod
    def _blank(cls, base: dict[str, Any]) -> tuple[Job, dict[str, Any]]:
        """A job holding ``base`` (every field with a default, at least) and lists of its
        own, and its state to fill in: how the builders below skip the frozen ``__init__``."""
        job = object.__new__(cls)
        state = job.__dict__
        state.update(base)
        state["stacktrace"], state["attempts"] = [], []
        return job, state

    @staticmethod
    def _added_fields(queue_name: str, timestamp: int, handle: JobHandle | None) -> dict[str, Any]:
        """The fields the jobs of one add share, for :meth:`_added`."""
        return {**_JOB_DEFAULTS, "queue_name": queue_name, "timestamp": timestamp,
                "_handle": handle}  # fmt: skip

    @classmethod
    def _added(
        cls, shared: dict[str, Any], job_id: str, name: str, raw_data: str, opts_json: str,
        data: Any, opts: JobOptions,
    ) -> Job:  # fmt: skip
        """A job as an add wrote it, bound: :meth:`_build` without its keyword arguments, for
        every job of a bulk."""
        job, state = cls._blank(shared)
        state["id"], state["name"], state["raw_data"], state["opts_json"] = (
            job_id, name, raw_data, opts_json
        )  # fmt: skip
        state["original_data"], state["opts"], state["priority"] = data, opts, opts.priority
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
        job, state = cls._blank(_JOB_DEFAULTS)
        state["id"], state["name"], state["queue_name"] = job_id, f.get("name", ""), queue_name
        state["original_data"], state["raw_data"] = original_data, raw_data
        state["opts"], state["opts_json"] = JobOptions.from_json(opts_json), opts_json
        state["timestamp"] = int(f.get("timestamp") or f.get("dlq:deadLetteredAt") or 0)
        state["priority"] = int(f.get("priority") or f.get("dlq:priority") or 0)
        state["dead_letter"] = dead_letter
        # The other fields: only those the hash has (a job waiting or running has few).
        for field, value in f.items():
            read = _FIELD_READERS.get(field)
            if read is not None:
                state[read[0]] = read[1](value)
        return job


def _same(value: str) -> str:
    return value


def _int(value: str) -> int:
    return int(value or 0)


def _or_none(value: str) -> str | None:
    return value or None


def _stacktrace(value: str) -> list[str]:
    return json.loads(value) if value else []


def _attempts(value: str) -> list[AttemptRecord]:
    return [AttemptRecord.from_json(a) for a in json.loads(value)] if value else []


# Job.from_fields: the job hash's fields other than those every job has, each with the Job
# field it sets and how its text is read; a field the hash lacks keeps the Job's default.
_FIELD_READERS: dict[str, tuple[str, Any]] = {
    "attemptsMade": ("attempts_made", _int),
    "ats": ("attempts_started", _int),
    "processedOn": ("processed_on", optional_int),
    "finishedOn": ("finished_on", optional_int),
    "failedReason": ("failed_reason", _same),
    "errorType": ("error_type", _same),
    "stacktrace": ("stacktrace", _stacktrace),
    "attempts": ("attempts", _attempts),
    "returnvalue": ("return_value", _codec.decode),
    "rc": ("replay_count", _int),
    "stalledCounter": ("stalled_counter", _int),
    "retriedOn": ("retried_on", optional_int),
    "deid": ("deduplication_id", _same),
    "progress": ("progress", lambda value: json_or(value, None)),
    "rpk": ("repeat_key", _same),
    "replayOf": ("replay_of", _or_none),
    "replayDlq": ("replay_dead_letter_queue", _or_none),
}

_JOB_FIELD_COUNT = len(dataclasses.fields(Job))
_JOB_DEFAULTS = {
    f.name: f.default for f in dataclasses.fields(Job) if f.default is not dataclasses.MISSING
}
# The fields with a default factory, each given a new list by Job._build.
assert {
    f.name for f in dataclasses.fields(Job) if f.default_factory is not dataclasses.MISSING
} == {"stacktrace", "attempts"}


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
