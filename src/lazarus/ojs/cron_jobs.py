"""The jobs OJS cron jobs produce, as OJS jobs.

lazarus's schedule adds each occurrence (a plain engine job, named by a UUIDv7) and, with
``overlap="skip"``, skips one that falls due while the last one that ran has not ended. What
an occurrence lacks to be an OJS job is its OJS record: the envelope, retry policy, leases
and timeouts OJS reads (:mod:`~lazarus.ojs.records`). An occurrence gets it when it starts,
from its cron job's definition, and is then an OJS job like a pushed one (``job.enqueued``
and ``cron.triggered`` are told then):

- a remote worker's FETCH advances the schedule of each occurrence it claims (as an
  in-process worker does), hands out none that the schedule skipped, and gives the others
  their records before their leases (:func:`started`);
- an occurrence an in-process :class:`~lazarus.Worker` runs is found by the server's upkeep,
  which reads each cron job's last run and last skip (:class:`CronWatch`).

An occurrence that has not started (the pending one) has no record: it is not an OJS job yet,
and one that is skipped never becomes one (``cron.skipped`` tells of it).
"""

from __future__ import annotations

import json
from typing import Any

from .._codec import text as _text
from .._execution import ClaimedJob
from .._repeat import SKIPPED, produce_next, runs
from .._schedule import occurrence_due
from ..job import Job
from .backend import Backend
from .cron import definition_of, name_of, registry, skip_marker
from .states import iso

WATCH_BATCH = 100  # cron jobs looked at per round of the server's upkeep


async def started(backend: Backend, queue: str, claimed: ClaimedJob) -> bool:
    """Advance the schedule of a repeatable job a fetch claimed; whether to hand it out (not
    when its schedule skipped it, or it is no longer held). An OJS cron job's occurrence gets
    its OJS record first."""
    key = claimed.job.repeat_key
    if key is None:
        return True
    reply = await produce_next(backend.client, backend.keys(queue), backend.max_events,
                               claimed.job.id, key, claimed.token)  # fmt: skip
    name = name_of(key)
    definition = await definition_of(backend, name) if name is not None else None
    if definition is not None and reply == SKIPPED:
        running = await backend.client.hget(backend.keys(queue).repeat(key), "run")
        await announce_skip(backend, definition, claimed.job.id,
                            None if running is None else _text(running))  # fmt: skip
    if not runs(reply):
        return False
    if definition is not None:
        await materialize(backend, definition, claimed.job)
    return True


async def materialize(backend: Backend, definition: dict[str, Any], job: Job) -> bool:
    """Give the occurrence ``job`` its OJS record, unless it has one; whether it was made
    (then ``job.enqueued`` and ``cron.triggered`` are told)."""
    due = occurrence_due(job.id)
    fields: dict[str, Any] = {
        "env": {**definition["env"], "id": job.id, "scheduled_at": iso(due)},
        "policy": definition["policy"], "created_at": job.timestamp or backend.now(),
        "enqueued_at": due, "cron": definition["name"],
    }  # fmt: skip
    for field in ("vis", "timeout"):
        if definition.get(field) is not None:
            fields[field] = definition[field]
    if not await backend.records.create(job.queue_name, job.id, fields):
        return False
    await backend.emit("job.enqueued", await backend.load_in(job.queue_name, job.id))
    await backend.records.emit("cron.triggered", {
        **_about(definition), "job_id": job.id, "scheduled_at": iso(due),
    })  # fmt: skip
    return True


async def announce_skip(
    backend: Backend, definition: dict[str, Any], job_id: str, running: str | None
) -> None:
    """Tell ``cron.skipped`` of the occurrence ``job_id``, once whoever notices it."""
    told = await backend.client.set(skip_marker(backend, definition["name"]), job_id, get=True)
    if told is not None and _text(told) == job_id:
        return
    data = {**_about(definition), "reason": "overlap_prevention", "job_id": job_id,
            "scheduled_at": iso(occurrence_due(job_id))}  # fmt: skip
    if running:
        data["existing_job_id"] = running
    await backend.records.emit("cron.skipped", data)


def _text_or_none(value: Any) -> str | None:
    return None if value is None else _text(value)


def _about(definition: dict[str, Any]) -> dict[str, Any]:
    return {"cron_name": definition["name"], "cron_expr": definition["expression"],
            "job_type": definition["env"]["type"], "queue": definition["queue"]}  # fmt: skip


class CronWatch:
    """The server's upkeep of cron jobs: each round, up to :data:`WATCH_BATCH` cron jobs'
    last run and last skip, to give an occurrence an in-process worker started its OJS
    record and to tell of a skip. A cron job is read again only when one of them moved."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self._cursor = 0
        self._seen: dict[str, tuple[str | None, str | None]] = {}  # name -> (run, skipped)
        self._walk: set[str] = set()  # the names this walk over the registry found

    async def step(self) -> None:
        """One step of the walk over the registry."""
        backend = self.backend
        reply: Any = await backend.client.hscan(registry(backend), self._cursor,
                                                count=WATCH_BATCH)  # fmt: skip
        self._cursor, entries = int(reply[0]), reply[1]
        found = [json.loads(v) for v in entries.values()]
        async with backend.client.pipeline(transaction=False) as pipe:
            for definition in found:
                keys = backend.keys(definition["queue"])
                pipe.hmget(keys.repeat(definition["key"]), ["run", "skipped"])
            fields = await pipe.execute()
        for definition, (run, skipped) in zip(found, fields, strict=True):
            await self._look(definition, _text_or_none(run), _text_or_none(skipped))
        if self._cursor == 0:  # a walk ended: forget the cron jobs it did not find
            self._seen = {n: v for n, v in self._seen.items() if n in self._walk}
            self._walk = set()

    async def _look(self, definition: dict[str, Any], run: str | None, skipped: str | None) -> None:
        name = definition["name"]
        self._walk.add(name)
        seen_run, seen_skipped = self._seen.get(name, (None, None))
        if run and run != seen_run:
            job = await self.backend.queue(definition["queue"]).get_job(run)
            if job is not None:  # else ended and removed meanwhile: it stays unknown to OJS
                await materialize(self.backend, definition, job)
        if skipped and skipped != seen_skipped:
            await announce_skip(self.backend, definition, skipped, run)
        self._seen[name] = (run, skipped)
