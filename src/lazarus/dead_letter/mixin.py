"""The dead letter methods of :class:`~lazarus.Queue`: inspection, search and statistics over
the queue's dead letter store (replay and purge are in :mod:`.moves`, status changes in
:mod:`.actions`). Each method is a thin shell over the modules of this package."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from .. import _scripts
from .._checks import at_least
from .._connection import reports_unavailable
from .._indexes import check_range
from .._keys import QueueKeys, validate_job_id
from ..errors import ErrorCode
from ..job import Job
from . import bulk, search, stats, store
from .actions import DeadLetterActionsMixin
from .filters import DeadLetterFilter, check_filter
from .moves import DeadLetterMovesMixin
from .search import DeadLetterPage, Order, Position
from .upkeep import DeadLetterUpkeepMixin

if TYPE_CHECKING:
    from .._connection import Client
MIGRATE_BATCH = 50


class DeadLetterMixin(DeadLetterMovesMixin, DeadLetterActionsMixin, DeadLetterUpkeepMixin):
    """The dead-letter half of :class:`~lazarus.Queue`."""

    name: str
    prefix: str
    keys: QueueKeys
    max_events: int
    _client: Client

    async def get_job(self, job_id: str) -> Job | None:
        raise NotImplementedError

    async def _get_jobs(self, ids: list[str]) -> list[Job]:
        raise NotImplementedError

    # -- inspection ------------------------------------------------------------------------

    @reports_unavailable
    async def get_dead_letter_count(self) -> int:
        """How many dead letters wait for a decision here (status ``pending``, ``manual`` or
        ``failed``)."""
        return await store.count_in(
            self._client, self.keys, store.LIVE_STATUSES, DeadLetterFilter()
        )

    @reports_unavailable
    async def get_dead_letter_jobs(self, start: int = 0, end: int = -1) -> list[Job]:
        """Dead letters from index ``start`` to ``end`` (inclusive), newest first, of those
        :meth:`get_dead_letter_count` counts."""
        start, end = check_range(start, end)
        ids = await store.newest_first(self._client, self.keys, store.LIVE_STATUSES, start, end)
        return await self._get_jobs(ids)

    @reports_unavailable
    async def peek_dead_letter(self, job_id: str) -> Job | None:
        """One dead letter with its ``_dlqMeta``, or ``None``."""
        return await self.get_job(job_id)

    @reports_unavailable
    async def find_dead_letter_by_original_id(self, job_id: str) -> Job | None:
        """The dead letter of the job whose id in its source queue was ``job_id``, or
        ``None``: "where did job X go?"."""
        validate_job_id(job_id)
        dl_id = await self._client.hget(self.keys.dl_origins, job_id)
        return None if dl_id is None else await self.get_job(_text(dl_id))

    @reports_unavailable
    async def search_dead_letters(
        self,
        filter: DeadLetterFilter | None = None,
        *,
        limit: int = 50,
        cursor: str | None = None,
        order: Order = "newest",
        time_budget: float = search.TIME_BUDGET,
    ) -> DeadLetterPage:
        """A page of the dead letters matching ``filter`` with a cursor for the next one.

        Pages follow arrival order (``order="newest"`` first, or ``"oldest"``) and stay
        stable while dead letters arrive and leave. A substring search stops after
        ``time_budget`` seconds (it begins no bounded step it could not finish by then) with
        what it found so far and a cursor to go on from.

        Example::

            page = await dlq.search_dead_letters(DeadLetterFilter(error_type="TimeoutError"))
            while page.next_cursor:
                page = await dlq.search_dead_letters(flt, cursor=page.next_cursor)
        """
        flt, limit = check_filter(filter), search.check_limit(limit)
        order, budget = search.check_order(order), search.check_time_budget(time_budget)
        position = None if cursor is None else search.decode_cursor(cursor, order)[0]
        total_task = asyncio.ensure_future(store.exact_count(self._client, self.keys, flt))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + budget
        ids: list[str] = []
        slowest = 0.0  # no step is begun that would likely end past the deadline
        while True:
            began = loop.time()
            result = await search.step(
                self._client, self.keys, flt, order=order, position=position,
                limit=limit - len(ids),
            )  # fmt: skip
            ids += result.matches
            position = result.position
            now = loop.time()
            slowest = max(slowest, now - began)
            if result.done or len(ids) >= limit or now + slowest >= deadline:
                break
        jobs = await self._get_jobs(ids)
        more = not result.done and position is not None
        next_cursor = search.encode_cursor(order, position) if more and position else None
        return DeadLetterPage(jobs, next_cursor, await total_task)

    @reports_unavailable
    async def find_dead_letters(
        self, filter: DeadLetterFilter | None = None, *, limit: int = 50, offset: int = 0
    ) -> list[Job]:
        """Matching dead letters, newest first: at most ``limit`` after skipping ``offset``.
        For deep pages, :meth:`search_dead_letters` with a cursor costs less."""
        flt, limit = check_filter(filter), search.check_limit(limit)
        at_least(offset, "offset", 0)
        ids: list[str] = []
        async for result in search.walk(self._client, self.keys, flt, batch=offset + limit):
            ids += result.matches
            if len(ids) >= offset + limit:
                break
        return await self._get_jobs(ids[offset : offset + limit])

    @reports_unavailable
    async def count_dead_letters(self, filter: DeadLetterFilter | None = None) -> int:
        """How many dead letters match ``filter`` (what a bulk operation would touch): from
        the store's counters, or by a bounded walk for substring searches."""
        return await bulk.count_matches(self._client, self.keys, check_filter(filter))

    async def iter_dead_letter_ids(
        self, filter: DeadLetterFilter | None = None, *, batch_size: int = bulk.DEFAULT_BATCH
    ) -> AsyncIterator[tuple[str, str]]:
        """``(dead letter id, source queue)`` of every match, oldest first, batch by batch."""
        flt, batch = check_filter(filter), bulk.check_batch(batch_size)
        async for result in search.walk(
            self._client, self.keys, flt, order="oldest", batch=batch, sources=True
        ):
            for row in result.matches:
                yield row[0], row[1]

    @reports_unavailable
    async def get_dead_letter_stats(
        self, filter: DeadLetterFilter | None = None, *, batch_size: int = bulk.DEFAULT_BATCH
    ) -> stats.DeadLetterStats:
        """Totals of the dead letters matching ``filter`` by job name, error type, source
        queue, reason and status, with the oldest and newest arrival times. Exact filters are
        answered from counters; substring searches and time ranges by a bounded walk."""
        bulk.check_batch(batch_size)
        return await stats.compute_stats(self._client, self.keys, check_filter(filter))

    @reports_unavailable
    async def get_oldest_dead_letter_at(self) -> int | None:
        """When the oldest dead letter still here was dead-lettered (ms), or ``None``."""
        live = [self.keys.dl_index("s", s) for s in store.LIVE_STATUSES]
        return (await store.index_ends(self._client, live))[0]

    @reports_unavailable
    async def get_dead_letter_rate(
        self, minutes: int = 60, *, now: int | None = None
    ) -> list[tuple[int, int]]:
        """Dead letters that arrived per minute over the last ``minutes`` (at most 120):
        ``(minute start in ms, count)`` pairs, oldest first, zeros included."""
        return await stats.rate(self._client, self.keys, minutes, now)

    @reports_unavailable
    async def get_dead_letter_counters(self) -> stats.DeadLetterCounters:
        """Running totals kept by this dead letter queue since it was created."""
        return await stats.counters(self._client, self.keys)

    # -- upgrading -------------------------------------------------------------------------

    @reports_unavailable
    async def migrate_dead_letters(self) -> int:
        """Move the dead letters that lazarus 0.1 kept in this queue's waiting list into its
        dead letter store, in bounded batches; returns how many moved. Safe to run again and
        while workers run."""
        remaining = int(await self._client.llen(self.keys.wait))
        moved = 0
        script = _scripts.load("migrate_dead_letters")
        while remaining > 0:
            looked, count = await script(
                self._client, self.keys.group, [min(MIGRATE_BATCH, remaining)]
            )
            moved += int(count)
            remaining = 0 if int(looked) == 0 else remaining - int(looked)
        if moved or await self.get_dead_letter_count():  # a dead letter queue: the view lists it
            await self._client.sadd(self.keys.dead_letter_registry, self.name)
        return moved


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


__all__ = ["DeadLetterMixin", "DeadLetterPage", "ErrorCode", "Position"]
