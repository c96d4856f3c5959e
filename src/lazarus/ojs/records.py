"""What OJS knows of a job beyond the engine's hash: the envelope the client sent, its retry
policy, the error history, the lease of a remote worker and, once the engine has let go of
the job (cancelled, discarded, dead-lettered), its last state.

Keys (``<base>`` is the queue's ``<prefix>:{<queue>}:``, so a record shares its job's slot):

- ``<base>ojs:<id>``        HASH  the record; once the engine no longer holds the job (nor
                                  keeps it as a dead letter of the server's dead letter
                                  queue), kept :data:`RECORD_KEEP_MS` more (:meth:`Records.prune`)
- ``<prefix>:ojs:index``    HASH  job id -> queue, to find a job by id alone; an entry goes
                                  once neither its job nor its record is left
- ``<prefix>:ojs:queues``   SET   queues that hold OJS jobs (swept by the server)
- ``<prefix>:ojs:timeouts`` ZSET  '<queue> <id>' by the deadline of a remote attempt
- ``<prefix>:ojs:events``   STREAM  OJS events (capped)
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from .. import _scripts
from .._codec import text as _text
from .._connection import Client
from .._keys import QueueKeys

MAX_EVENTS = 10_000
ORPHAN_AFTER_MS = 10_000
"""How old the ``adding`` mark of a record whose job the engine does not hold must be for the
record to count as an orphan (the server died between writing it and adding the job): an
enqueue takes milliseconds, so one still under way is never taken for one."""
RECORD_KEEP_MS = 7 * 24 * 3600 * 1000
"""How long a record outlives its job (cancelled, dead-lettered, or removed by retention,
``clean`` or ``remove``): its OJS view stays readable that long, then it goes."""
PRUNE_BATCH = 100


def now_ms() -> int:
    """Wall-clock milliseconds."""
    return int(time.time() * 1000)


class Records:
    """Reads and writes OJS records under one prefix."""

    def __init__(self, client: Client, prefix: str) -> None:
        self.client = client
        self.prefix = prefix
        self.index = f"{prefix}:ojs:index"
        self.queues = f"{prefix}:ojs:queues"
        self.timeouts = f"{prefix}:ojs:timeouts"
        self.events = f"{prefix}:ojs:events"

    def keys(self, queue: str) -> QueueKeys:
        """The engine keys of ``queue``."""
        return QueueKeys(self.prefix, queue)

    def key(self, queue: str, job_id: str) -> str:
        """The record key of job ``job_id`` in ``queue``."""
        return f"{self.keys(queue).base}ojs:{job_id}"

    async def queue_of(self, job_id: str) -> str | None:
        """The queue job ``job_id`` was enqueued in, or ``None`` for an unknown job."""
        value = await self.client.hget(self.index, job_id)
        return None if value is None else _text(value)

    async def create(self, queue: str, job_id: str, fields: dict[str, Any]) -> bool:
        """Write a new job's record (``fields`` hold its ``created_at``) and index it;
        ``False`` if the id is taken."""
        return not await self.create_all([(queue, job_id, fields)])

    async def create_all(
        self, jobs: list[tuple[str, str, dict[str, Any]]], *, adding: bool = False
    ) -> list[int]:
        """:meth:`create` for each ``(queue, id, fields)``, in three round trips whatever their
        number; the positions of those whose id was taken (nothing is written for them).

        With ``adding`` (the jobs are about to be added to the engine), each record keeps an
        ``adding`` mark until :meth:`added` clears it: should the add never happen (the
        server died first), the record is an orphan, which a claim of the same id replaces
        once :data:`ORPHAN_AFTER_MS` have passed (:func:`orphan`)."""
        keys = [self.key(queue, job_id) for queue, job_id, _ in jobs]
        # The record first: an index entry with neither a job nor a record is one that
        # prune() deletes, so none may exist, even for a moment, while a job is being added.
        # Writing the record whole, in one call, is what claims the id in this queue.
        claim, now = _scripts.load("claim_record"), now_ms()
        claimed = await asyncio.gather(*(
            claim(self.client, [key, self.keys(queue).job(job_id), self.keys(queue).gone(job_id)],
                  [now, ORPHAN_AFTER_MS, "1" if adding else "", *_flat(fields)])
            for key, (queue, job_id, fields) in zip(keys, jobs, strict=True)
        ))  # fmt: skip
        # Each id indexed, a refused one too: the record that refused it may be one whose
        # server died before indexing it, which the upkeep's walk must find.
        async with self.client.pipeline(transaction=False) as pipe:
            for queue, job_id, _ in jobs:
                pipe.hsetnx(self.index, job_id, queue)
            indexed = await pipe.execute()
        taken: list[int] = []
        won: list[int] = []
        lost: list[str] = []  # claimed in this queue, but the id is taken in another one
        rows = zip(claimed, indexed, jobs, strict=True)
        for position, (ok, entry_made, (queue, job_id, _)) in enumerate(rows):
            # An entry of this queue is ours: the record, which we hold, claims the id in it
            # (one an orphan or a forget cut short left).
            if ok and (entry_made or await self.queue_of(job_id) == queue):
                won.append(position)
            else:
                taken.append(position)
                if ok:
                    lost.append(keys[position])
        # Keys in several slots on a cluster, so no transaction: the queues are listed before
        # the jobs are added (listing one twice is harmless; an unlisted queue is not swept).
        async with self.client.pipeline(transaction=False) as pipe:
            for key in lost:
                pipe.delete(key)
            for queue in dict.fromkeys(jobs[position][0] for position in won):
                pipe.sadd(self.queues, queue)
            await pipe.execute()
        return taken

    async def added(self, jobs: list[tuple[str, str]]) -> None:
        """Clear the ``adding`` mark of each ``(queue, id)``'s record: its job is in the
        engine (added, or seen there)."""
        async with self.client.pipeline(transaction=False) as pipe:
            for queue, job_id in jobs:
                pipe.hdel(self.key(queue, job_id), "adding")
            await pipe.execute()

    async def adopt(self, queue: str, job_id: str) -> None:
        """Index a job that came into ``queue`` without OJS (added by lazarus itself), so
        that a remote worker that fetched it can report on it, and the server sweeps its
        lease."""
        await self.client.hsetnx(self.index, job_id, queue)
        await self.client.sadd(self.queues, queue)

    async def forget(self, queue: str, job_id: str) -> None:
        """Undo :meth:`create` (the engine refused the job)."""
        await self.client.delete(self.key(queue, job_id))
        await self.client.hdel(self.index, job_id)

    async def read(self, queue: str, job_id: str) -> dict[str, str]:
        """The record's fields, decoded to str (empty when there is none)."""
        raw = await self.client.hgetall(self.key(queue, job_id))
        return {_text(k): _text(v) for k, v in raw.items()}

    async def update(self, queue: str, job_id: str, fields: dict[str, Any]) -> None:
        """Set fields of the record (``None`` deletes a field)."""
        gone = [k for k, v in fields.items() if v is None]
        kept = {k: v for k, v in fields.items() if v is not None}
        async with self.client.pipeline(transaction=True) as pipe:
            if kept:
                pipe.hset(self.key(queue, job_id), mapping=_encode(kept))
            if gone:
                pipe.hdel(self.key(queue, job_id), *gone)
            await pipe.execute()

    async def prune(
        self, cursor: int, keep_ms: int = RECORD_KEEP_MS, dead_letters: QueueKeys | None = None
    ) -> tuple[int, list[str], list[tuple[str, str]]]:
        """One step of the upkeep of the records, over about :data:`PRUNE_BATCH` index entries
        from ``cursor``: the cursor of the next step (0: the walk starts over), the ids of
        the jobs whose records it let go (now expiring) or found gone (the workflows they
        belong to may be over: :mod:`.workflow_retention`), and the ``(queue, id)`` of the
        orphan records it found (:func:`orphan`: their jobs never added,
        :func:`.jobs.finish_orphans`). A
        record whose job the engine no longer holds expires in ``keep_ms``; one whose job is
        back (a dead letter retried under its id) is kept again, and so is one whose job is a
        dead letter of ``dead_letters`` (the server's dead letter queue), as long as that dead
        letter is kept; an index entry whose job and record are both gone is deleted. Each
        step's work is bounded, whatever the index's size, and a step that races a change is
        put right by the next walk."""
        reply: Any = await self.client.hscan(self.index, cursor, count=PRUNE_BATCH)
        cursor, entries = int(reply[0]), reply[1]
        found = [(_text(job_id), _text(queue)) for job_id, queue in entries.items()]
        if not found:
            return cursor, [], []
        async with self.client.pipeline(transaction=False) as pipe:
            for job_id, queue in found:
                pipe.exists(self.keys(queue).job(job_id))
                pipe.pttl(self.key(queue, job_id))
                pipe.hmget(self.key(queue, job_id), ["adding", "state"])
            if dead_letters is not None:
                pipe.hmget(dead_letters.dl_origins, [job_id for job_id, _ in found])
            state = await pipe.execute()
        each = 3 * len(found)
        jobs, ttls, marks = state[0:each:3], state[1:each:3], state[2:each:3]
        letters = state[-1] if dead_letters is not None else [None] * len(found)
        gone: list[str] = []
        let_go: list[str] = []
        orphans: list[tuple[str, str]] = []
        now = now_ms()
        async with self.client.pipeline(transaction=False) as pipe:
            rows = zip(found, jobs, ttls, marks, letters, strict=True)
            for (job_id, queue), job, ttl, (adding, ended), letter in rows:
                held = job or letter is not None
                if not held and orphan(adding, ended, now):
                    orphans.append((queue, job_id))  # kept, to be added (or expire if not)
                    if ttl == -1:
                        pipe.pexpire(self.key(queue, job_id), keep_ms)
                elif held and ttl >= 0:
                    pipe.persist(self.key(queue, job_id))
                elif not held and ttl == -1:
                    pipe.pexpire(self.key(queue, job_id), keep_ms)
                    let_go.append(job_id)
                elif not held and ttl == -2:
                    gone.append(job_id)
            if gone:
                pipe.hdel(self.index, *gone)
            await pipe.execute()
        return cursor, let_go + gone, orphans

    async def add_error(self, queue: str, job_id: str, entry: dict[str, Any]) -> None:
        """Append ``entry`` to the job's error history."""
        record = await self.read(queue, job_id)
        errors = json.loads(record.get("errors") or "[]")
        errors.append(entry)
        await self.update(queue, job_id, {"errors": errors})

    async def emit(self, kind: str, data: dict[str, Any]) -> None:
        """Append an OJS event (``job.enqueued``, ``job.completed``, ...)."""
        await self.emit_all(kind, [data])

    async def emit_all(self, kind: str, events: list[dict[str, Any]]) -> None:
        """Append an OJS event of ``kind`` for each of ``events``' data, in one round trip."""
        async with self.client.pipeline(transaction=False) as pipe:
            for data in events:
                pipe.xadd(
                    self.events, {"type": kind, "time": now_ms(), "data": json.dumps(data)},
                    maxlen=MAX_EVENTS, approximate=True,
                )  # fmt: skip
            await pipe.execute()

    async def read_events(self, limit: int) -> list[dict[str, Any]]:
        """The newest ``limit`` events, oldest first."""
        entries: list[Any] = await self.client.xrevrange(self.events, count=limit) or []
        events = []
        for entry_id, fields in reversed(entries):
            f = {_text(k): _text(v) for k, v in (fields or {}).items()}
            events.append({"id": _text(entry_id), "type": f["type"], "time": int(f["time"]),
                           "data": json.loads(f["data"])})  # fmt: skip
        return events


def stored(fields: dict[str, Any]) -> dict[str, str]:
    """Record ``fields`` as a record holds them, and :meth:`Records.read` returns them."""
    return _encode(fields)


def orphan(adding: object, state: object, now: int) -> bool:
    """Whether a record whose job the engine does not hold, with these ``adding`` and
    ``state`` fields (as read: ``None`` when absent), is an orphan at ``now``
    (``claim_record.lua``, which also looks for the job's tombstone)."""
    return adding is not None and state is None and now - int(_text(adding)) >= ORPHAN_AFTER_MS


def _flat(fields: dict[str, Any]) -> list[Any]:
    """``fields`` encoded, as the field-value pairs of an ``HSET``."""
    return [part for pair in _encode(fields).items() for part in pair]


def _encode(fields: dict[str, Any]) -> dict[Any, Any]:
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in fields.items()}
