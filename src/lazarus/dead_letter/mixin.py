"""The dead letter methods of :class:`~lazarus.Queue`: inspection, search, replay, purge and
statistics over the queue's dead letter store. Each method is a thin shell over the modules
of this package."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from .. import _codec, _scripts
from .._connection import reports_unavailable
from .._keys import QueueKeys, validate_job_id, validate_name
from ..errors import ErrorCode, JobNotFoundError, NotADeadLetterError, error_for_code
from ..job import Job
from . import bulk, replay, search, stats, store
from .actions import DeadLetterActionsMixin
from .filters import LIVE_STATUSES, DeadLetterFilter, check_filter
from .search import DeadLetterPage, Order, Position
from .upkeep import DeadLetterUpkeepMixin

if TYPE_CHECKING:
    from redis.asyncio import Redis

MIGRATE_BATCH = 50
REPLAYABLE = ("pending", "manual", "failed")  # the statuses a dead letter is replayed from


class DeadLetterMixin(DeadLetterActionsMixin, DeadLetterUpkeepMixin):
    """The dead-letter half of :class:`~lazarus.Queue`."""

    name: str
    prefix: str
    keys: QueueKeys
    max_events: int
    _client: Redis

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
        time_budget: float = 0.05,
    ) -> DeadLetterPage:
        """A page of the dead letters matching ``filter`` with a cursor for the next one.

        Pages follow arrival order (``order="newest"`` first, or ``"oldest"``) and stay
        stable while dead letters arrive and leave. A substring search stops after
        ``time_budget`` seconds with what it found so far and a cursor to go on from.

        Example::

            page = await dlq.search_dead_letters(DeadLetterFilter(error_type="TimeoutError"))
            while page.next_cursor:
                page = await dlq.search_dead_letters(flt, cursor=page.next_cursor)
        """
        flt, limit = check_filter(filter), search.check_limit(limit)
        order = search.check_order(order)
        position = None if cursor is None else search.decode_cursor(cursor, order)[0]
        total_task = asyncio.ensure_future(store.exact_count(self._client, self.keys, flt))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + time_budget
        ids: list[str] = []
        while True:
            result = await search.step(
                self._client, self.keys, flt, order=order, position=position,
                limit=limit - len(ids),
            )  # fmt: skip
            ids += result.matches
            position = result.position
            if result.done or len(ids) >= limit or loop.time() >= deadline:
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
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValueError(f"offset must be an int >= 0, got {offset!r}")
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
            self._client, self.keys, flt, order="oldest", batch=batch, detail=True
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

    # -- replay ----------------------------------------------------------------------------

    @reports_unavailable
    async def replay_dead_letter(
        self,
        job_id: str,
        *,
        attempts: int | None = None,
        priority: int | None = None,
        queue: str | None = None,
        data: Any = replay.UNCHANGED,
        actor: str = replay.DEFAULT_ACTOR,
        note: str | None = None,
        rule: str | None = None,
    ) -> str:
        """Replay one dead letter into its source queue (or ``queue``); returns the new job's id.

        The new job has the original payload (or ``data``, any JSON value, which then also
        replaces the dead letter's payload; the timeline keeps the old one) and options
        (``attempts`` and ``priority`` may be changed), no attempts made, ``replay_count`` one
        higher, and a reference to its dead letter. The dead letter stays, ``processing``,
        until the new job completes (``resolved``) or fails for good (back to ``pending``).
        ``actor``, ``note`` and ``rule`` (the redrive rule that decided it) go in its
        timeline. Raises :class:`JobNotFoundError` when the dead letter is gone,
        :class:`JobStateError` when it is not replayable (``processing``, ``resolved`` or
        ``archived``: someone replayed it first; or a worker of this queue holds it) and
        :class:`NotADeadLetterError` for a job without dead-letter metadata.
        """
        validate_job_id(job_id)
        if queue is not None:
            validate_name(queue, "queue")
        by = replay.check_replayer(actor, note, rule)
        payload = "" if data is replay.UNCHANGED else _codec.encode(data, field="data")
        source = await self._client.hget(self.keys.job(job_id), "dlq:sourceQueue")
        if source is None:
            if await self._client.exists(self.keys.job(job_id)):
                raise NotADeadLetterError(f"job {job_id!r} in {self.name!r} is not a dead letter")
            raise JobNotFoundError(f"no dead letter {job_id!r} in {self.name!r}")
        target = queue if queue is not None else _text(source)
        override = list(replay.KEEP)
        if attempts is not None or priority is not None:
            override = await replay.overridden_options(
                self._client, self.keys, job_id, attempts, priority
            )
        override[3] = payload
        ((new_id, result),) = await replay.replay(
            self._client, self.keys, self.max_events, target, [(job_id, override)], by=by
        )
        if isinstance(result, int):
            raise error_for_code(result, f"replay dead letter {job_id!r}")
        return new_id

    @reports_unavailable
    async def replay_all_dead_letters(
        self,
        filter: DeadLetterFilter | None = None,
        *,
        batch_size: int = bulk.DEFAULT_BATCH,
        on_progress: bulk.Progress | None = None,
        rate: float | None = None,
        dry_run: bool = False,
        actor: str = replay.DEFAULT_ACTOR,
        note: str | None = None,
        rule: str | None = None,
    ) -> int:
        """Replay every replayable dead letter (``pending``, ``manual`` or ``failed``) that
        matches ``filter`` into its source queue; returns how many were replayed (with
        ``dry_run``, how many would be). Each becomes ``processing``, as with
        :meth:`replay_dead_letter`.

        A cursor walk over the matches that had arrived when the call began, oldest first
        within each status, ``batch_size`` per script call: none is skipped or replayed twice,
        whatever runs beside it. ``on_progress(done)`` is called after each batch (it may be
        async); ``rate`` caps the dead letters replayed per second.
        """
        by = replay.check_replayer(actor, note, rule)
        registered: set[str] = set()  # target queues registered by this run already
        return await self._bulk(
            filter, lambda matches: self._replay_batch(matches, registered, by),
            batch_size=batch_size, on_progress=on_progress, rate=rate, dry_run=dry_run,
            statuses=REPLAYABLE,
        )  # fmt: skip

    async def _bulk(
        self,
        filter: DeadLetterFilter | None,
        act: bulk.Act,
        *,
        batch_size: int,
        on_progress: bulk.Progress | None,
        rate: float | None,
        dry_run: bool,
        statuses: tuple[str, ...] | None = None,
    ) -> int:
        """Check a bulk operation's arguments, then count (dry run) or act on the matches;
        with ``statuses``, only on dead letters of those statuses, one status at a time."""
        flt, batch = check_filter(filter), bulk.check_batch(batch_size)
        limit = bulk.check_rate(rate)
        parts = [flt]
        if statuses is not None:
            wanted = statuses if flt.status is None else [s for s in statuses if s == flt.status]
            parts = [dataclasses.replace(flt, status=s) for s in wanted]
        if dry_run:
            counts = [await bulk.count_matches(self._client, self.keys, p) for p in parts]
            return sum(counts)
        done = 0

        async def progress(count: int) -> None:
            if on_progress is not None:
                reply = on_progress(done + count)
                if inspect.isawaitable(reply):
                    await reply

        for part in parts:
            done += await bulk.run(
                self._client, self.keys, part, act,
                batch_size=batch, on_progress=progress, rate=limit,
            )  # fmt: skip
        return done

    async def _replay_batch(
        self,
        matches: list[tuple[str, str]],
        registered: set[str] | None = None,
        by: replay.Replayer | None = None,
    ) -> int:
        by_source: dict[str, list[tuple[str, replay.Override]]] = {}
        for dl_id, source in matches:
            by_source.setdefault(source, []).append((dl_id, replay.KEEP))
        done = 0
        for source, items in by_source.items():
            results = await replay.replay(
                self._client, self.keys, self.max_events, source, items,
                register=registered is None or source not in registered, by=by,
            )  # fmt: skip
            if registered is not None:
                registered.add(source)
            done += sum(1 for _, r in results if isinstance(r, str))
        return done

    # -- purge -----------------------------------------------------------------------------

    @reports_unavailable
    async def purge_dead_letter(self, job_id: str) -> None:
        """Delete one dead letter; raises :class:`JobNotFoundError` if it is gone."""
        validate_job_id(job_id)
        (result,) = await replay.purge(self._client, self.keys, self.max_events, [job_id])
        if result != 1:
            raise error_for_code(result, f"purge dead letter {job_id!r}")

    @reports_unavailable
    async def purge_dead_letters(
        self,
        filter: DeadLetterFilter | None = None,
        *,
        batch_size: int = bulk.DEFAULT_BATCH,
        on_progress: bulk.Progress | None = None,
        rate: float | None = None,
        dry_run: bool = False,
    ) -> int:
        """Delete every dead letter that matches ``filter``, batch by batch, as
        :meth:`replay_all_dead_letters` walks; returns the count."""
        return await self._bulk(
            filter, lambda matches: self._purge_batch(matches, _scope(filter)),
            batch_size=batch_size, on_progress=on_progress, rate=rate, dry_run=dry_run,
        )  # fmt: skip

    async def _purge_batch(self, matches: list[tuple[str, str]], statuses: str) -> int:
        ids = [dl_id for dl_id, _ in matches]
        results = await replay.purge(self._client, self.keys, self.max_events, ids, statuses)
        return sum(1 for r in results if r == 1)

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


def _scope(filter: DeadLetterFilter | None) -> str:
    """The statuses a bulk operation over ``filter`` may touch, as scripts take them: its
    status, or the live ones. A dead letter that left them meanwhile is left alone."""
    if isinstance(filter, DeadLetterFilter) and filter.status is not None:
        return str(filter.status)
    return ",".join(LIVE_STATUSES)


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


__all__ = ["DeadLetterMixin", "DeadLetterPage", "ErrorCode", "Position"]
