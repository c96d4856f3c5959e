"""The :class:`Record`: the durable SQL record of a prefix's dead letters, read and acted on.

Replay and delete go to Redis first, where the dead letter still is (Redis is the source of
truth, and its outbox brings the change into the record); a dead letter Redis no longer holds
(replayed already, purged, pruned, archived) is replayed from the record's copy of its payload,
byte for byte, as the new job ``<dead letter id>-replay``: at most once, however often asked.
"""

from __future__ import annotations

import contextlib
import datetime
from typing import Any

from .. import _scripts
from .._connection import CLIENT_TYPES, Client, connect, now_ms
from .._keys import QueueKeys, validate_job_id
from ..errors import ErrorCode, JobNotFoundError, JobStateError
from ..queue import Queue
from . import queries
from .database import Database, open_database
from .schema import check

# Sorts after any outbox position of the same millisecond: a change made in the record itself
# wins over the outbox entries that led to it.
_RECORD_SEQ = 9_999_999_999
FINAL_POSITION = f"{10**15 - 1}-{_RECORD_SEQ}"


def record_position(ms: int) -> str:
    """The guard position of a change made in the record at ``ms``."""
    return f"{ms:015d}-{_RECORD_SEQ:010d}"


class Record:
    """The record at ``url`` beside the Redis at ``connection``.

    >>> record = Record("sqlite:////var/lib/lazarus/record.db")
    >>> page = await record.list(job_type="email.send")
    >>> new_id = await record.replay(page.rows[0]["id"])
    """

    def __init__(
        self, url: str, *, connection: str | Client | None = None, prefix: str = "lazarus"
    ) -> None:
        self.db: Database = open_database(url)
        self.redis = connect(connection)
        self._owns_redis = not isinstance(connection, CLIENT_TYPES)
        self.prefix = prefix
        self._checked = False

    async def _ready(self) -> Database:
        if not self._checked:
            await check(self.db)
            self._checked = True
        return self.db

    async def check(self) -> None:
        """Raise :class:`~lazarus.record.RecordSchemaError` unless the record's schema is
        this lazarus's (``lazarus record migrate`` brings it there)."""
        await self._ready()

    async def list(self, **options: Any) -> queries.RecordPage:
        """A page of dead letters, newest first (see :func:`queries.list_dead_letters`)."""
        return await queries.list_dead_letters(await self._ready(), **options)

    async def get(self, dead_letter_id: str) -> dict[str, Any] | None:
        """One dead letter with its events, or None."""
        validate_job_id(dead_letter_id, "dead_letter_id")
        return await queries.get_dead_letter(await self._ready(), dead_letter_id)

    async def stats(self) -> dict[str, Any]:
        """The figures of every dead letter recorded (total, by type, oldest, newest)."""
        return await queries.stats(await self._ready())

    async def replay(self, dead_letter_id: str) -> str:
        """Replay a recorded dead letter into its source queue; returns the new job's id.

        Raises :class:`JobNotFoundError` when the record does not hold it, and
        :class:`JobStateError` when it was replayed already.
        """
        row = await self._row(dead_letter_id)
        dlq = Queue(row["dead_letter_queue"], connection=self.redis, prefix=self.prefix)
        try:
            return await dlq.replay_dead_letter(dead_letter_id)
        except JobNotFoundError:
            pass  # gone from Redis: the record's copy is all there is
        if row["status"] == "replayed":
            raise JobStateError(f"dead letter {dead_letter_id!r} was replayed already")
        new_id = await self._enqueue_copy(row)
        await self._mark(row, "replayed", {"replay_count": int(row["replay_count"]) + 1})
        return new_id

    async def delete(self, dead_letter_id: str) -> None:
        """Purge a dead letter from Redis (if there) and from the record: its row stays as a
        ``deleted`` tombstone without payload, so the outbox cannot bring it back."""
        row = await self._row(dead_letter_id)
        dlq = Queue(row["dead_letter_queue"], connection=self.redis, prefix=self.prefix)
        with contextlib.suppress(JobNotFoundError):
            await dlq.purge_dead_letter(dead_letter_id)
        await self._mark(row, "deleted", {"job_payload": "null"}, final=True)

    async def _row(self, dead_letter_id: str) -> dict[str, Any]:
        row = await self.get(dead_letter_id)
        if row is None or row["status"] == "deleted":
            raise JobNotFoundError(f"no dead letter {dead_letter_id!r} in the record")
        return row

    async def _enqueue_copy(self, row: dict[str, Any]) -> str:
        new_id = f"{row['id']}-replay"
        keys = QueueKeys(self.prefix, row["source_queue"])
        # Integers as add_jobs stores them: it keeps their text (see its header).
        args = [now_ms(), 10_000, 0, "", new_id, row["job_name"], row["job_payload"],
                row["original_opts"], int(row["job_delay"]), int(row["job_priority"]),
                int(row["job_attempts"])]  # fmt: skip
        await self.redis.sadd(keys.registry, keys.queue)
        [result] = await _scripts.load("add_jobs")(
            self.redis, [*keys.group, keys.job(new_id)], args
        )
        if result != ErrorCode.JOB_EXISTS:
            await self.redis.hset(
                keys.job(new_id),
                mapping={"rc": int(row["replay_count"]) + 1, "replayOf": row["id"]},
            )
        return new_id

    async def _mark(
        self, row: dict[str, Any], status: str, changes: dict[str, Any], *, final: bool = False
    ) -> None:
        # A final change (deletion) takes the highest position: no outbox entry, even one
        # stamped by a Redis clock ahead of ours, can undo it.
        ms = now_ms()
        at = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)
        position = FINAL_POSITION if final else record_position(ms)
        sets = ", ".join(f"{c} = ?json" if c == "job_payload" else f"{c} = ?" for c in changes)
        await self.db.run([
            (f"UPDATE dead_letters SET status = ?, {sets}, removed_at = COALESCE(removed_at, ?), "
             "updated_at = ?, outbox_position = ? WHERE id = ?",
             [status, *changes.values(), at, at, position, row["id"]]),
            ("INSERT INTO dead_letter_events (dead_letter_id, outbox_position, "
             "dead_letter_queue, event, status, at) VALUES (?, ?, ?, ?, ?, ?)",
             [row["id"], position, row["dead_letter_queue"], status, status, at]),
        ])  # fmt: skip

    async def close(self) -> None:
        """Close the database, and the Redis client when the record made it."""
        await self.db.close()
        if self._owns_redis:
            await self.redis.aclose()
