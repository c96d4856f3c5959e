"""What a schedule is: the ``repeat`` option of an add (:class:`Repeat`), its due times, the
job ids of its occurrences, and a schedule as a queue lists it (:class:`RepeatableJob`).
How schedules are stored and advanced is :mod:`._repeat`'s.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from ._checks import check_int
from ._keys import validate_name
from .job_options import MAX_DURATION_MS, MAX_TIMESTAMP_MS

_REPEAT_KEYS = {"every", "pattern", "tz", "limit", "end_date", "key", "overlap", "job_ids"}
OVERLAPS = ("allow", "skip")
JOB_IDS = ("repeat", "uuid7")


@dataclasses.dataclass(frozen=True)
class Repeat:
    """A validated ``repeat`` option: ``every`` ms, or a cron ``pattern`` in time zone ``tz``;
    at most ``limit`` occurrences, none due after ``end_date`` (ms); ``overlap`` ``"skip"``
    skips an occurrence due while the last one that ran has not ended; ``job_ids``
    ``"uuid7"`` names occurrences by UUIDv7s instead of ``repeat:<key>:<due>``."""

    every: int | None = None
    pattern: str | None = None
    tz: str | None = None
    limit: int | None = None
    end_date: int | None = None
    key: str | None = None
    overlap: str = "allow"
    job_ids: str = "repeat"

    @classmethod
    def parse(cls, value: Any) -> Repeat:
        if not isinstance(value, Mapping):
            raise TypeError(f"repeat must be a dict, not {type(value).__name__}")
        unknown = set(value) - _REPEAT_KEYS
        if unknown:
            raise ValueError(f"repeat has unknown keys: {sorted(unknown)}")
        every, pattern, tz = value.get("every"), value.get("pattern"), value.get("tz")
        if (every is None) == (pattern is None):
            raise ValueError("repeat needs exactly one of repeat.every and repeat.pattern")
        if every is not None:
            check_int(every, "repeat.every", minimum=1, maximum=MAX_DURATION_MS)
            if tz is not None:
                raise ValueError("repeat.tz applies to repeat.pattern only")
        else:
            _check_pattern(pattern, tz)
        limit, end_date, key = value.get("limit"), value.get("end_date"), value.get("key")
        return cls(
            every=every, pattern=pattern, tz=tz,
            limit=None if limit is None else check_int(limit, "repeat.limit", minimum=1),
            end_date=None if end_date is None
            else check_int(end_date, "repeat.end_date", minimum=1, maximum=MAX_TIMESTAMP_MS),
            key=None if key is None else validate_name(key, "repeat.key"),
            overlap=_one_of(value.get("overlap", "allow"), "repeat.overlap", OVERLAPS),
            job_ids=_one_of(value.get("job_ids", "repeat"), "repeat.job_ids", JOB_IDS),
        )  # fmt: skip

    def schedule_key(self, name: str, job_id: str | None) -> str:
        """The schedule's key: ``repeat.key``, else derived from what identifies it, so that
        adding the same schedule twice (from any process) finds the first."""
        if self.key is not None:
            return self.key
        what = [name, job_id, self.every, self.pattern, self.tz]
        return hashlib.sha1(json.dumps(what).encode()).hexdigest()

    def next_after(self, after_ms: int) -> int:
        """The first due time strictly after ``after_ms``. ``every`` schedules fall on
        multiples of ``every`` (so producers agree without talking to each other)."""
        if self.every is not None:
            return (after_ms // self.every + 1) * self.every
        assert self.pattern is not None
        zone = ZoneInfo(self.tz) if self.tz else timezone.utc
        start = datetime.fromtimestamp(after_ms / 1000, zone)
        return int(next(iter(CronSim(self.pattern, start))).timestamp() * 1000)

    def following(self, current: int, count: int, now: int) -> int:
        """When the occurrence after the one due at ``current`` is due (ms; missed ones are
        skipped, not run late), or -1 once ``limit`` or ``end_date`` ends the schedule."""
        if self.limit is not None and count >= self.limit:
            return -1
        due = self.next_after(max(current, now - 1))
        if self.end_date is not None and due > self.end_date:
            return -1
        return due


def _one_of(value: Any, field: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ValueError(f"{field} must be one of {', '.join(map(repr, allowed))}, not {value!r}")
    return str(value)


def occurrence_id(key: str, due: int, job_ids: str = "repeat") -> str:
    """The job id of the occurrence of schedule ``key`` due at ``due`` (ms), as
    ``includes/repeat.lua`` names it: ``repeat:<key>:<due>``, or with ``job_ids`` ``"uuid7"``
    a UUIDv7 whose time is ``due`` and whose other bits are those of the SHA-1 of
    ``<key>:<due>``."""
    if job_ids != "uuid7":
        return f"repeat:{key}:{due}"
    ms, h = f"{due:012x}", hashlib.sha1(f"{key}:{due}".encode()).hexdigest()
    variant = "89ab"[int(h[18], 16) % 4]  # the variant bits: 10
    return f"{ms[:8]}-{ms[8:12]}-7{h[:3]}-{variant}{h[3:6]}-{h[6:18]}"


def occurrence_due(job_id: str) -> int:
    """When the occurrence ``job_id`` was due (ms): the end of ``repeat:<key>:<due>``, or the
    time of a UUIDv7."""
    if job_id.startswith("repeat:"):
        return int(job_id.rsplit(":", 1)[1])
    return int(job_id.replace("-", "")[:12], 16)


def _check_pattern(pattern: Any, tz: Any) -> None:
    if not isinstance(pattern, str):
        raise TypeError(f"repeat.pattern must be a str, not {type(pattern).__name__}")
    if tz is not None:
        if not isinstance(tz, str):
            raise TypeError(f"repeat.tz must be a str, not {type(tz).__name__}")
        try:
            ZoneInfo(tz)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"repeat.tz {tz!r} is not a known time zone") from exc
    try:
        CronSim(pattern, datetime.now(timezone.utc))
    except CronSimError as exc:
        raise ValueError(f"repeat.pattern {pattern!r} is not a cron expression: {exc}") from exc


@dataclasses.dataclass(frozen=True)
class RepeatableJob:
    """One schedule of a queue, as :meth:`~lazarus.Queue.get_repeatable_jobs` lists it:
    besides its ``repeat`` options, ``next`` (when its pending occurrence is due, ms),
    ``count`` (occurrences added), ``last_run`` and ``last_skipped`` (the job ids of the last
    occurrence that ran and of the last one its ``overlap="skip"`` skipped)."""

    key: str
    name: str
    next: int
    every: int | None
    pattern: str | None
    tz: str | None
    limit: int | None
    end_date: int | None
    count: int
    overlap: str = "allow"
    job_ids: str = "repeat"
    last_run: str | None = None
    last_skipped: str | None = None

    @property
    def repeat(self) -> Repeat:
        return Repeat(self.every, self.pattern, self.tz, self.limit, self.end_date, self.key,
                      self.overlap, self.job_ids)  # fmt: skip

    @classmethod
    def from_fields(cls, key: str, f: Mapping[str, str]) -> RepeatableJob:
        def number(field: str) -> int | None:
            return int(f[field]) if f.get(field) else None

        return cls(
            key=key, name=f.get("name", ""), next=int(f.get("next") or 0),
            every=number("every"), pattern=f.get("pattern") or None, tz=f.get("tz") or None,
            limit=number("limit"), end_date=number("endDate"), count=int(f.get("count") or 0),
            overlap=f.get("overlap") or "allow", job_ids=f.get("jobIds") or "repeat",
            last_run=f.get("run") or None, last_skipped=f.get("skipped") or None,
        )  # fmt: skip
