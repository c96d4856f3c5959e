"""What a job is added with: its options (attempts, backoff, delay, priority, retention,
timeout, expiry, on_exhaustion) and their bounds. They are validated when a job is added, before
anything is written, and every error names the offending field.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import json
import random
import types
from collections.abc import Callable, Mapping
from typing import Any

from ._checks import check_int
from ._entry import OnExhaustion, check_on_exhaustion

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
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_MS = datetime.timedelta(milliseconds=1)

Delay = int | datetime.timedelta
"""A wait: milliseconds, or a :class:`~datetime.timedelta` (rounded up to the millisecond)."""


def delay_ms(delay: object, field: str = "delay") -> int:
    """``delay`` (an int of milliseconds or a timedelta, rounded up to the millisecond) in
    milliseconds, from 0 to :data:`MAX_DURATION_MS`; else an error naming ``field``."""
    if isinstance(delay, datetime.timedelta):
        if delay < datetime.timedelta(0):
            raise ValueError(f"{field} must not be negative, got {delay}")
        delay = -(-delay // datetime.timedelta(microseconds=1) // 1000)  # ceiling
    return check_int(delay, field, minimum=0, maximum=MAX_DURATION_MS)


def _ms_until(moment: object, now: int, field: str) -> int:
    """Milliseconds from ``now`` (ms since the epoch) to ``moment``, a timezone-aware
    datetime, rounded up; negative once it has passed. Raises naming ``field``."""
    if not isinstance(moment, datetime.datetime):
        raise TypeError(f"{field} must be a datetime, not {type(moment).__name__}")
    if moment.utcoffset() is None:
        raise ValueError(
            f"{field} must be timezone-aware, got the naive {moment.isoformat()} (which names "
            "no moment): give it a tzinfo, e.g. datetime.now(timezone.utc) + timedelta(hours=1)"
        )
    wait = -(-(moment - _EPOCH) // _MS) - now
    if wait > MAX_DURATION_MS:
        raise ValueError(f"{field} must be at most {MAX_DURATION_MS} ms away, got {moment}")
    return wait


def run_at_delay(run_at: object, now: int) -> int:
    """The delay in milliseconds from ``now`` (ms since the epoch) to ``run_at``, a
    timezone-aware datetime; 0 when it has passed."""
    return max(_ms_until(run_at, now, "run_at"), 0)


def resolve_delay(options: Mapping[str, Any], now: int) -> dict[str, Any]:
    """``options`` of an add with its ``delay`` and ``expires`` in milliseconds: from
    timedeltas, or from ``run_at`` and ``expires_at`` (which then leave them). A ``run_at``
    beside a ``delay``, or an ``expires_at`` beside an ``expires``, raises, and so does an
    ``expires_at`` that has passed."""
    out = dict(options)
    run_at = out.pop("run_at", None)
    if run_at is None:
        out["delay"] = delay_ms(out.get("delay", 0))
    elif out.get("delay"):
        raise ValueError("give delay or run_at, not both")
    else:
        out["delay"] = run_at_delay(run_at, now)
    expires_at = out.pop("expires_at", None)
    if expires_at is None:
        if out.get("expires") is not None:
            out["expires"] = delay_ms(out["expires"], "expires")
    elif out.get("expires") is not None:
        raise ValueError("give expires or expires_at, not both")
    else:
        window = _ms_until(expires_at, now, "expires_at")
        if window <= 0:
            raise ValueError(f"expires_at has passed: {expires_at.isoformat()}")
        out["expires"] = window
    return out


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
    # Milliseconds after the job was added past which it must not start: it then fails
    # with JobExpiredError, not retried, instead of running.
    expires: int | None = None

    def __post_init__(self) -> None:
        check_int(self.attempts, "attempts", minimum=1, maximum=MAX_ATTEMPTS)
        check_on_exhaustion(self.on_exhaustion)
        if self.timeout is not None:
            check_int(self.timeout, "timeout", minimum=1, maximum=MAX_DURATION_MS)
        check_int(self.delay, "delay", minimum=0, maximum=MAX_DURATION_MS)
        if self.expires is not None:
            check_int(self.expires, "expires", minimum=1, maximum=MAX_DURATION_MS)
            if self.expires <= self.delay:
                raise ValueError(
                    f"expires ({self.expires} ms) must be longer than the delay "
                    f"({self.delay} ms): the job would expire before it is due"
                )
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
        if self.expires is not None:
            out["expires"] = self.expires
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
            expires=raw.get("expires"),
        )


def _retention_json(value: Retention) -> Any:
    return dict(value) if isinstance(value, Mapping) else value
