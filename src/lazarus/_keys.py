"""The only place Redis key names are built. ``docs/redis-keys.md`` documents each key.

Every key of one queue shares the hash tag ``{<queue>}`` so that a queue lives in one Redis
Cluster slot::

    <prefix>:{<queue>}:wait         LIST   waiting job ids; LPUSH in, RPOP out (FIFO)
    <prefix>:{<queue>}:prioritized  ZSET   prioritized job ids, score priority * 2^32 + counter
    <prefix>:{<queue>}:pc           STRING counter that keeps FIFO order within one priority
    <prefix>:{<queue>}:delayed      ZSET   delayed job ids, score = due time (ms)
    <prefix>:{<queue>}:active       LIST   job ids being processed
    <prefix>:{<queue>}:leases       ZSET   active job ids, score = lock expiry (ms)
    <prefix>:{<queue>}:completed    ZSET   completed job ids, score = finish time (ms)
    <prefix>:{<queue>}:failed       ZSET   failed job ids, score = finish time (ms)
    <prefix>:{<queue>}:marker       ZSET   wake-up marker that idle workers block on
    <prefix>:{<queue>}:meta         HASH   queue flags (paused) and settings
    <prefix>:{<queue>}:events       STREAM events, trimmed to about ``max_events`` entries
    <prefix>:{<queue>}:job:<id>     HASH   one job
    <prefix>:{<queue>}:wake:<worker>            ZSET   wakes one worker's blocking claim
    <prefix>:{<queue>}:reply:<worker>:<slot>    STRING the last reply of one worker slot
    <prefix>:queues                 SET    names of every queue with this prefix

Scripts that pick a job they cannot know in advance (claim, stall sweep, retention) receive
``<prefix>:{<queue>}:job:`` as a key and append the id: the only key suffix built in Lua, and
always inside the queue's own hash tag.
"""

from __future__ import annotations

import dataclasses
import functools
import re

# Braces would break the hash tag; control characters and whitespace make keys unreadable.
_FORBIDDEN = re.compile(r"[{}\s\x00-\x1f\x7f]")
MAX_NAME_LENGTH = 200


def validate_name(value: object, field: str) -> str:
    """Return ``value`` if it is a usable queue name or prefix, else raise naming ``field``."""
    if not isinstance(value, str):
        raise TypeError(f"{field} must be a str, not {type(value).__name__}")
    if not value:
        raise ValueError(f"{field} must not be empty")
    if len(value) > MAX_NAME_LENGTH:
        raise ValueError(f"{field} is longer than {MAX_NAME_LENGTH} characters")
    if _FORBIDDEN.search(value):
        raise ValueError(f"{field} {value!r} must not contain braces, whitespace or control chars")
    return value


def validate_job_id(value: object, field: str = "job_id") -> str:
    """Return ``value`` if it is a usable job id, else raise naming ``field``."""
    if not isinstance(value, str):
        raise TypeError(f"{field} must be a str, not {type(value).__name__}")
    if not value or len(value) > MAX_NAME_LENGTH or _FORBIDDEN.search(value):
        raise ValueError(
            f"{field} {value!r} must be 1 to {MAX_NAME_LENGTH} characters without "
            "braces, whitespace or control characters"
        )
    return value


@dataclasses.dataclass(frozen=True)
class QueueKeys:
    """The key names of one queue."""

    prefix: str
    queue: str

    def __post_init__(self) -> None:
        validate_name(self.prefix, "prefix")
        validate_name(self.queue, "queue name")

    @property
    def base(self) -> str:
        return f"{self.prefix}:{{{self.queue}}}:"

    @property
    def wait(self) -> str:
        return self.base + "wait"

    @property
    def prioritized(self) -> str:
        return self.base + "prioritized"

    @property
    def pc(self) -> str:
        return self.base + "pc"

    @property
    def delayed(self) -> str:
        return self.base + "delayed"

    @property
    def active(self) -> str:
        return self.base + "active"

    @property
    def leases(self) -> str:
        return self.base + "leases"

    @property
    def completed(self) -> str:
        return self.base + "completed"

    @property
    def failed(self) -> str:
        return self.base + "failed"

    @property
    def marker(self) -> str:
        return self.base + "marker"

    @property
    def meta(self) -> str:
        return self.base + "meta"

    @property
    def events(self) -> str:
        return self.base + "events"

    @functools.cached_property
    def group(self) -> tuple[str, ...]:
        """The ten keys a transition script receives for a queue, in ``queue_keys`` order."""
        return (
            self.wait, self.prioritized, self.pc, self.delayed, self.active, self.leases,
            self.marker, self.meta, self.events, self.job_prefix,
        )  # fmt: skip

    @functools.cached_property
    def dead_letter_group(self) -> tuple[str, ...]:
        """The four keys of a dead letter queue that a dead-lettering script writes."""
        return (self.wait, self.marker, self.events, self.meta)

    @property
    def job_prefix(self) -> str:
        return self.base + "job:"

    def job(self, job_id: str) -> str:
        return self.base + "job:" + job_id

    def wake(self, worker_name: str) -> str:
        """The sorted set a worker's blocking claim also waits on, so close() can wake it."""
        return self.base + "wake:" + worker_name

    def reply(self, worker_name: str, slot: str) -> str:
        """The memo of the last state-changing call of one worker slot (a job slot's number,
        or ``claim`` for the worker's own claims): a call re-sent after a dropped connection
        finds its reply there instead of running twice."""
        return self.base + "reply:" + worker_name + ":" + slot

    @property
    def registry(self) -> str:
        return f"{self.prefix}:queues"
