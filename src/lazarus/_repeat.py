"""Repeatable jobs: ``queue.add(name, data, repeat={"every": ms})`` or
``repeat={"pattern": cron, "tz": zone}``.

A schedule is stored in Redis with its job template; its pending occurrence is an ordinary
delayed job with the id ``repeat:<key>:<due ms>`` (or a UUIDv7 made of the due time and the
key, with ``job_ids="uuid7"``). The worker that claims an occurrence computes the next due
time (cron expressions by ``cronsim``) and has ``repeat_job.lua`` add the next occurrence: a
compare-and-set on the schedule's next due time plus the per-occurrence job id make every
occurrence exist once, whatever number of producers and workers race. A worker that dies
before advancing leaves its occurrence to stall and be claimed again, by a worker that then
advances the schedule. With ``overlap="skip"`` the same script removes, unrun, an occurrence
that falls due while the last one that ran has not ended.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from . import _scripts
from ._checks import check_int
from ._codec import text as _text
from ._connection import Client, now_ms, reports_unavailable
from ._keys import QueueKeys, validate_name
from ._scripts.wait_search import call_searching_wait
from .job import Job
from .job_options import MAX_DURATION_MS, MAX_TIMESTAMP_MS

log = logging.getLogger("lazarus.worker")

_REPEAT_KEYS = {"every", "pattern", "tz", "limit", "end_date", "key", "overlap", "job_ids"}
OVERLAPS = ("allow", "skip")
JOB_IDS = ("repeat", "uuid7")
SKIPPED = 3  # repeat_job.lua: the claimed occurrence was removed without running
NOT_HELD = -3  # repeat_job.lua: the claimed occurrence is not held under the claim's token


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


def schedule_keys(keys: QueueKeys, key: str) -> list[str]:
    """The keys a schedule script receives: the queue's group, the index, the schedule."""
    return [*keys.group, keys.repeat_index, keys.repeat(key)]


async def advance(
    client: Client, keys: QueueKeys, max_events: int, key: str, job_id: str, token: str
) -> int:
    """Add the occurrence that follows ``job_id``, just claimed under ``token``, unless its
    schedule skips it; returns what ``repeat_job.lua`` answered (0 when another producer did
    it first, :data:`SKIPPED`, :data:`NOT_HELD`)."""
    raw = await client.hgetall(keys.repeat(key))
    if not raw:
        return 0
    fields = {_text(k): _text(v) for k, v in raw.items()}
    current = occurrence_due(job_id)
    if fields.get("next") != str(current):
        return 0
    schedule = RepeatableJob.from_fields(key, fields)
    now = now_ms()
    following = schedule.repeat.following(current, schedule.count, now)
    reply = await _scripts.load("repeat_job")(
        client, [*schedule_keys(keys, key), keys.completed, keys.failed],
        [now, max_events, key, current, following, job_id, token],
    )  # fmt: skip
    return int(reply)


class RepeatMixin:
    """The repeatable-jobs half of :class:`~lazarus.Queue`."""

    name: str
    keys: QueueKeys
    max_events: int
    _client: Client

    def _prepare(self, name: object, data: Any, options: Mapping[str, Any]) -> Any:
        raise NotImplementedError

    async def get_job(self, job_id: str) -> Job | None:
        raise NotImplementedError

    async def _register(self) -> None:
        raise NotImplementedError

    @reports_unavailable
    async def _add_repeatable(
        self, name: str, data: Any, options: Mapping[str, Any], value: Any
    ) -> Job:
        """Add (or update) the schedule ``value`` of jobs ``name``; returns its pending
        occurrence. Bad input raises before anything is written."""
        repeat = Repeat.parse(value)
        for option in ("delay", "run_at", "deduplication", "expires", "expires_at"):
            if options.get(option):
                raise ValueError(f"{option} does not apply to a repeatable job")
        prepared = self._prepare(name, data, {**options, "job_id": None})
        _, _, payload, opts_json, _, priority, attempts = prepared.args
        key = repeat.schedule_key(name, options.get("job_id"))
        now = now_ms()
        first = repeat.next_after(now)
        if repeat.end_date is not None and first > repeat.end_date:
            raise ValueError("repeat.end_date comes before the first occurrence")
        await self._register()  # listed like a queue any job was added to
        _, _, job_id = await _scripts.load("add_repeatable")(
            self._client, schedule_keys(self.keys, key),
            [now, self.max_events, key, name, payload, opts_json, priority, attempts,
             repeat.every or "", repeat.pattern or "", repeat.tz or "", repeat.limit or "",
             repeat.end_date or "", first, "skip" if repeat.overlap == "skip" else "",
             "uuid7" if repeat.job_ids == "uuid7" else ""],
        )  # fmt: skip
        job = await self.get_job(_text(job_id))
        if job is None:  # already run and removed by retention: what is known of it
            job = dataclasses.replace(prepared.job(self.name, now), id=_text(job_id))
        return job

    @reports_unavailable
    async def get_repeatable_jobs(self) -> list[RepeatableJob]:
        """Every schedule of this queue, the soonest due first."""
        keys = [_text(k) for k in await self._client.zrange(self.keys.repeat_index, 0, -1)]
        async with self._client.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.hgetall(self.keys.repeat(key))
            replies = await pipe.execute()
        return [
            RepeatableJob.from_fields(key, {_text(k): _text(v) for k, v in reply.items()})
            for key, reply in zip(keys, replies)
            if reply
        ]

    @reports_unavailable
    async def remove_repeatable_by_key(self, key: str) -> bool:
        """Remove the schedule ``key`` and its pending occurrence (unless already running);
        returns whether there was such a schedule."""
        validate_name(key, "key")
        reply = await call_searching_wait(
            _scripts.load("remove_repeatable"),
            self._client,
            self.keys.wait,
            [*schedule_keys(self.keys, key), self.keys.completed, self.keys.failed],
            [key, self.max_events],
        )
        return int(reply) == 1

    async def remove_repeatable(
        self, name: str, repeat: Mapping[str, Any], job_id: str | None = None
    ) -> bool:
        """Remove the schedule added with ``name``, ``repeat`` (and ``job_id``), as
        :meth:`remove_repeatable_by_key` does."""
        return await self.remove_repeatable_by_key(Repeat.parse(repeat).schedule_key(name, job_id))


async def produce_next(
    client: Client, keys: QueueKeys, max_events: int, job_id: str, key: str, token: str
) -> int:
    """Advance the schedule of the occurrence ``job_id`` a worker just claimed under
    ``token``; returns what :func:`advance` answered. The occurrence must not run when that is
    :data:`SKIPPED` or :data:`NOT_HELD` (see :func:`runs`). Never raises: a failure is
    logged, 0 returned, and the occurrence runs all the same (its schedule then waits for the
    occurrence to be claimed again, after a stall, or for the schedule to be added again)."""
    try:
        return await advance(client, keys, max_events, key, job_id, token)
    except Exception:
        log.exception("queue %s: cannot add the occurrence after %s", keys.queue, job_id)
        return 0


def runs(reply: int) -> bool:
    """Whether an occurrence runs after :func:`produce_next` answered ``reply``."""
    return reply not in (SKIPPED, NOT_HELD)
