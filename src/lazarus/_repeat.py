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
that falls due while the last one that ran has not ended. What a schedule is (the option,
its due times, its occurrences' ids, a schedule as listed) is :mod:`._schedule`'s.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

from . import _scripts
from ._codec import text as _text
from ._connection import Client, now_ms, reports_unavailable
from ._keys import QueueKeys, validate_name
from ._schedule import Repeat, RepeatableJob, occurrence_due
from ._scripts.wait_search import call_searching_wait
from .job import Job

log = logging.getLogger("lazarus.worker")

SKIPPED = 3  # repeat_job.lua: the claimed occurrence was removed without running
NOT_HELD = -3  # repeat_job.lua: the claimed occurrence is not held under the claim's token


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
            shared = Job._added_fields(self.name, now, None)
            job = dataclasses.replace(prepared.job(shared), id=_text(job_id))
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
