"""The exporter: drains the outbox of every dead letter queue of a prefix into the record.

Each step takes at most ``batch`` entries of one queue (first those a crashed exporter left
unacknowledged), applies them in one transaction with idempotent upserts, then acknowledges
them: a crash at any point leaves entries to apply again, never a change lost or applied out
of order. Several exporters may run at once: they share one consumer group.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections.abc import Mapping
from typing import Any

from .._connection import Client
from .database import Database, Statement
from .outbox import Outbox, OutboxEntry
from .rows import statements

log = logging.getLogger("lazarus.record")
GROUP = "record"


class RecordExporter:
    """Copies every change of the dead letters of ``prefix`` into the record ``db``.

    >>> exporter = RecordExporter(redis, db, prefix="lazarus")
    >>> await exporter.run(stop)   # until the event is set
    """

    def __init__(
        self,
        redis: Client,
        db: Database,
        *,
        prefix: str = "lazarus",
        batch: int = 200,
        claim_idle_ms: int = 30_000,
        consumer: str | None = None,
    ) -> None:
        if not isinstance(batch, int) or isinstance(batch, bool):
            raise TypeError(f"batch must be an int, not {type(batch).__name__}")
        if not 1 <= batch <= 10_000:
            raise ValueError(f"batch must be from 1 to 10000, got {batch}")
        self.redis = redis
        self.db = db
        self.batch = batch
        name = consumer or f"{socket.gethostname()}:{os.getpid()}"
        self.outbox = Outbox(redis, prefix, group=GROUP, consumer=name, claim_idle_ms=claim_idle_ms)
        self._enabled: set[str] = set()

    async def enable(self) -> list[str]:
        """Switch on the outbox of every dead letter queue of the prefix not yet seen, copying
        the dead letters a newly enabled one already holds; returns every queue's name."""
        queues = await self.outbox.dead_letter_queues()
        for queue in queues:
            if queue not in self._enabled:
                await self.outbox.enable(queue)
                # Until a copy is complete (one cut short by an error or a kill is done again:
                # the copy is idempotent, position 0 losing to any outbox entry).
                if not await self.outbox.copied(queue):
                    await self._copy_existing(queue)
                    await self.outbox.mark_copied(queue)
                self._enabled.add(queue)
        return queues

    async def step(self) -> int:
        """Apply at most one batch per dead letter queue; returns how many entries."""
        done = 0
        for queue in await self.enable():
            entries = await self.outbox.take(queue, count=self.batch)
            if not entries:
                continue
            await self.apply(entries)
            await self.outbox.ack(queue, [e.position for e in entries])
            await self.outbox.trim(queue)
            done += len(entries)
        return done

    async def apply(self, entries: list[OutboxEntry]) -> None:
        """Write ``entries`` (of one queue, in order) to the record in one transaction."""
        live = await self._read_live(entries)
        sql: list[Statement] = []
        for entry in entries:
            sql.extend(statements(entry, live.get(entry.id)))
        await self.db.run(sql)

    async def _read_live(self, entries: list[OutboxEntry]) -> dict[str, Mapping[str, str] | None]:
        ids = sorted({e.id for e in entries if not e.snapshot})
        if not ids:
            return {}
        keys = self.outbox.keys(entries[0].queue)
        async with self.redis.pipeline(transaction=False) as pipe:
            for dead_letter_id in ids:
                pipe.hgetall(keys.job(dead_letter_id))
            hashes = await pipe.execute()
        return {i: (h or None) for i, h in zip(ids, hashes)}

    async def _copy_existing(self, queue: str) -> None:
        # Dead letters that arrived before the outbox was on: copied once, as position 0, so
        # that any change recorded in the outbox since then wins over them.
        keys = self.outbox.keys(queue)
        statuses: Any = await self.redis.zrange(keys.dl_values("s"), 0, -1)
        # Each keeps its place among the arrivals: its store score, dead-lettered at (ms) *
        # 1000 + a sequence, read as a stream position.
        # Read by score, not by rank: a dead letter leaving the index meanwhile (replayed,
        # purged) would shift the ranks, and the next page skip one that did not change.
        for index in [keys.dl_index("s", str(status)) for status in statuses]:
            bound: float | str = "-inf"
            at_bound: set[str] = set()  # the ids read already whose score is `bound`
            while True:
                found: Any = await self.redis.zrangebyscore(
                    index, bound, "+inf", start=0, num=self.batch + len(at_bound),
                    withscores=True,
                )  # fmt: skip
                fresh = [(i, score) for i, score in found
                         if not (score == bound and str(i) in at_bound)]  # fmt: skip
                if not fresh:
                    break
                top = fresh[-1][1]
                if top != bound:
                    bound, at_bound = top, set()
                at_bound |= {str(i) for i, score in fresh if score == top}
                now = int(time.time() * 1000)
                entries = [
                    OutboxEntry(queue, "0-0", "recorded", str(i), now, "", {},
                                arrival=f"{int(score) // 1000}-{int(score) % 1000}")
                    for i, score in fresh
                ]  # fmt: skip
                await self.apply(entries)

    async def run(self, stop: asyncio.Event, *, idle: float = 1.0) -> None:
        """Export until ``stop`` is set; errors of Redis or the database are logged and retried
        after ``idle`` seconds (the entries stay in the outbox)."""
        while not stop.is_set():
            try:
                done = await self.step()
            except Exception:  # a database or Redis outage: wait, then try again
                log.exception("record export failed; retrying")
                done = 0
            if done == 0:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), idle)
