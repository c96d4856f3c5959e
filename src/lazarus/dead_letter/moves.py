"""Replay and purge, the methods of :class:`~lazarus.Queue` that move dead letters: one by
id, or every match of a filter batch by batch (:mod:`.bulk`), through the scripts of
:mod:`.replay`."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from .. import _codec
from .._codec import text as _text
from .._connection import reports_unavailable
from .._keys import QueueKeys, validate_job_id, validate_queue_name
from ..errors import JobNotFoundError, NotADeadLetterError, error_for_code
from . import bulk, detach, replay
from .filters import LIVE_STATUSES, DeadLetterFilter, TimeBound, check_filter

if TYPE_CHECKING:
    from .._connection import Client
REPLAYABLE = ("pending", "manual", "failed")  # the statuses a dead letter is replayed from


class DeadLetterMovesMixin:
    """Replay and purge of a dead letter queue's dead letters."""

    name: str
    keys: QueueKeys
    max_events: int
    max_payload_bytes: int
    _client: Client

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

        The new job has the original payload (or ``data``, any JSON value of at most this
        queue's ``max_payload_bytes`` encoded, which then also replaces the dead letter's
        payload; the timeline keeps the old one) and options
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
            validate_queue_name(queue, "queue")
        by = replay.check_replayer(actor, note, rule)
        payload = ""
        if data is not replay.UNCHANGED:
            payload = _codec.encode(data, field="data", max_bytes=self.max_payload_bytes)
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
        batch_size: int = bulk.BULK_BATCH,
        on_progress: bulk.Progress | None = None,
        rate: float | None = None,
        dry_run: bool = False,
        actor: str = replay.DEFAULT_ACTOR,
        note: str | None = None,
        rule: str | None = None,
        as_of: TimeBound = None,
        tally: str | None = None,
    ) -> int:
        """Replay every replayable dead letter (``pending``, ``manual`` or ``failed``) that
        matches ``filter`` into its source queue; returns how many were replayed (with
        ``dry_run``, how many would be). Each becomes ``processing``, as with
        :meth:`replay_dead_letter`.

        A cursor walk over the matches that had arrived when the call began, oldest first
        within each status, ``batch_size`` per script call: none is skipped or replayed twice,
        whatever runs beside it, and a dead letter replayed since the call began (by anyone)
        is left alone, even when its replay failed back into a replayable status.
        ``on_progress(done)`` is called after each batch (it may be async); ``rate`` caps the
        dead letters replayed per second.

        ``as_of`` (ms since the epoch, or a datetime) is the moment the call counts as its
        beginning, by default now. A run that stopped half-way (its process killed) is
        resumed by calling again with its ``as_of``: what it replayed is not replayed again,
        and it returns how many this call replayed. ``tally`` names a count in Redis that
        every call given it adds its replays to, atomically with them: so a run and its
        resumptions, from whatever processes, count exactly what they replayed, even what a
        killed process did after its last ``on_progress``
        (:meth:`get_dead_letter_tally`).
        """
        by = replay.check_replayer(actor, note, rule)
        began, named = bulk.check_as_of(as_of), bulk.check_tally(tally)
        registered: set[str] = set()  # target queues registered by this run already
        return await self._bulk(
            filter,
            lambda matches, budget: self._replay_batch(
                matches, registered, by, budget, began, named
            ),
            batch_size=batch_size, on_progress=on_progress, rate=rate, dry_run=dry_run,
            statuses=REPLAYABLE, as_of=began,
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
        as_of: int,
        statuses: tuple[str, ...] | None = None,
        sources: bool = True,
    ) -> int:
        """Check a bulk operation's arguments, then count (dry run) or act on the matches;
        with ``statuses``, only on dead letters of those statuses, one status at a time;
        without ``sources``, ``act`` is not told the matches' source queues."""
        flt, batch = check_filter(filter), bulk.check_batch(batch_size)
        limit, on_progress = bulk.check_rate(rate), bulk.check_progress(on_progress)
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
                await bulk.report(on_progress, done + count)

        for part in parts:
            done += await bulk.run(
                self._client, self.keys, part, act,
                batch_size=batch, on_progress=progress, rate=limit, as_of=as_of,
                sources=sources,
            )  # fmt: skip
        return done

    async def _replay_batch(
        self,
        matches: list[tuple[str, str]],
        registered: set[str] | None,
        by: replay.Replayer | None,
        budget_us: int,
        since: int | None = None,
        tally: str = "",
    ) -> int:
        by_source: dict[str, list[tuple[str, replay.Override]]] = {}
        for dl_id, source in matches:
            by_source.setdefault(source, []).append((dl_id, replay.KEEP))
        # One source queue after another: calls sent together would run back to back, and
        # hold Redis for all of their budgets at once.
        replies = [
            await replay.replay(
                self._client, self.keys, self.max_events, source, items,
                register=registered is None or source not in registered, by=by,
                budget_us=budget_us, since=since, tally=tally,
            )
            for source, items in by_source.items()
        ]  # fmt: skip
        if registered is not None:
            registered.update(by_source)
        return sum(1 for results in replies for _, r in results if isinstance(r, str))

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
        batch_size: int = bulk.BULK_BATCH,
        on_progress: bulk.Progress | None = None,
        rate: float | None = None,
        dry_run: bool = False,
        as_of: TimeBound = None,
        tally: str | None = None,
    ) -> int:
        """Delete every dead letter that matches ``filter`` and had arrived at ``as_of`` (by
        default, when the call began), batch by batch, as :meth:`replay_all_dead_letters`
        walks; returns the count. Calling again with the ``as_of`` of a purge that stopped
        half-way finishes it; ``tally`` counts what the calls given it purged, as for a
        replay.

        A purge of the whole store (no filter but a status, and every dead letter in the
        purge's statuses) empties its indexes at once and then deletes the dead letters in
        bounded calls, without a walk (:mod:`.detach`). A purge also finishes what a purge
        stopped half-way (a killed process) over a minute ago left to delete."""
        flt, limit = check_filter(filter), bulk.check_rate(rate)
        bulk.check_batch(batch_size)
        bulk.check_progress(on_progress)
        began, named = bulk.check_as_of(as_of), bulk.check_tally(tally)
        if not dry_run:
            await detach.drop_leftovers(
                self._client, self.keys, self.max_events, older_than_ms=detach.LEFTOVER_AGE_MS
            )
            whole = await detach.purge(
                self._client, self.keys, self.max_events, flt, on_progress=on_progress,
                rate=limit, as_of=began, tally=named,
            )  # fmt: skip
            if whole is not None:
                return whole
        return await self._bulk(
            filter,
            lambda matches, budget: self._purge_batch(matches, _scope(filter), budget, named),
            batch_size=batch_size, on_progress=on_progress, rate=rate, dry_run=dry_run,
            as_of=began, sources=False,
        )  # fmt: skip

    async def _purge_batch(
        self, matches: list[tuple[str, str]], statuses: str, budget_us: int, tally: str
    ) -> int:
        ids = [dl_id for dl_id, _ in matches]
        results = await replay.purge(
            self._client, self.keys, self.max_events, ids, statuses, budget_us=budget_us,
            tally=tally,
        )  # fmt: skip
        return sum(1 for r in results if r == 1)

    @reports_unavailable
    async def get_dead_letter_tally(self, tally: str) -> int:
        """How many dead letters the bulk replays or purges given ``tally`` have handled so
        far, counted by Redis as they did it; 0 for a tally never counted, or gone (a day
        after its last count)."""
        raw = await self._client.get(self.keys.dl_tally(bulk.check_tally(tally)))
        return 0 if raw is None else int(raw)


def _scope(filter: DeadLetterFilter | None) -> str:
    """The statuses a bulk operation over ``filter`` may touch, as scripts take them: its
    status, or the live ones. A dead letter that left them meanwhile is left alone."""
    if isinstance(filter, DeadLetterFilter) and filter.status is not None:
        return str(filter.status)
    return ",".join(LIVE_STATUSES)
