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
        job = object.__new__(cls)
        state = job.__dict__
        state.update(_JOB_DEFAULTS)
        state["stacktrace"], state["attempts"] = [], []
        state.update(fields)
        if len(state) != _JOB_FIELD_COUNT:  # a name that is no field, or a field left out
            cls(**fields)  # raises the dataclass's TypeError naming it
        return job

    @staticmethod
    def _added_fields(queue_name: str, timestamp: int, handle: JobHandle) -> dict[str, Any]:
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
        job = object.__new__(cls)
        state = job.__dict__
        state.update(shared)
        state["stacktrace"], state["attempts"] = [], []
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
        return cls._build(
            id=job_id,
            name=f.get("name", ""),
            original_data=original_data,
            opts=JobOptions.from_json(opts_json),
            queue_name=queue_name,
            timestamp=int(f.get("timestamp") or f.get("dlq:deadLetteredAt") or 0),
            priority=int(f.get("priority") or f.get("dlq:priority") or 0),
            attempts_made=int(f.get("attemptsMade") or 0),
            attempts_started=int(f.get("ats") or 0),
            processed_on=optional_int(f.get("processedOn")),
            finished_on=optional_int(f.get("finishedOn")),
            failed_reason=f.get("failedReason"),
            error_type=f.get("errorType"),
            stacktrace=json.loads(f["stacktrace"]) if f.get("stacktrace") else [],
            attempts=[AttemptRecord.from_json(a) for a in json.loads(f["attempts"])]
            if f.get("attempts")
            else [],
            return_value=_codec.decode(f["returnvalue"]) if "returnvalue" in f else None,
            replay_count=int(f.get("rc") or 0),
            stalled_counter=int(f.get("stalledCounter") or 0),
            retried_on=optional_int(f.get("retriedOn")),
            dead_letter=dead_letter,
            deduplication_id=f.get("deid"),
            progress=json_or(f.get("progress"), None),
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
