"""The OJS server's own upkeep: remote workers run no lease keeper, so the server sweeps the
queues that hold OJS jobs for expired leases (``sweep_stalled``: the job is available again;
after too many stalls it is dead-lettered), fails attempts that outran their
``timeout_ms``, gives the jobs of cron jobs that in-process workers started their OJS
records (:class:`~lazarus.ojs.cron_jobs.CronWatch`), lets the OJS records of jobs the engine
let go of expire (:meth:`~lazarus.ojs.records.Records.prune`, a bounded step per round, which
also finds the records of jobs a dying server never added, and adds them), and
advances open workflows (:func:`~lazarus.ojs.workflows.repair_step`, a bounded step a
second)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from .. import _moves, _scripts
from .._codec import text as _text
from .._scripts import CALL_BUDGET_US
from .backend import Backend
from .cron_jobs import CronWatch
from .jobs import finish_orphans
from .nack import expire
from .workers import MAX_STALLED
from .workflow_retention import retire_owners
from .workflows import repair_step

log = logging.getLogger("lazarus.ojs")

SWEEP_EVERY = 0.25  # seconds: a lease expiry is noticed within this
SWEEP_BATCH = 100
RECORDS_PAUSE = 60.0  # seconds between two walks over the OJS index (Records.prune)
TIMEOUTS_PER_TICK = 1000  # attempts past their timeout handled per tick, at most
WORKFLOWS_EVERY = 1.0  # seconds between two steps of the walk over open workflows
MOVES_EVERY = 5.0  # seconds between two looks for moves a crash cut short


class Sweeper:
    """Runs :meth:`tick` every :data:`SWEEP_EVERY` seconds until stopped."""

    def __init__(self, backend: Backend, *, records_pause: float = RECORDS_PAUSE) -> None:
        self.backend = backend
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self.failures = 0  # ticks failed in a row
        self._records_pause = records_pause
        self._records_cursor = 0  # where the walk over the OJS index goes on
        self._records_walk_at = 0.0  # when the next walk may begin (monotonic seconds)
        self._moves_at = 0.0  # when the next look for moves cut short is due (the same)
        self._crons = CronWatch(backend)
        self._workflows_cursor = 0  # where the walk over open workflows goes on
        self._workflows_at = 0.0  # when its next step is due (the same)

    def start(self) -> None:
        """Begin the rounds, in the running event loop."""
        self._stop.clear()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self, timeout: float = 5.0) -> None:
        """Stop at the next pause. A cancel is only the fallback: one that lands inside a
        Redis call is not always delivered, and the app's shutdown must not hang on it."""
        self._stop.set()
        task, self._task = self._task, None
        if task is None:
            return
        _, pending = await asyncio.wait({task}, timeout=timeout)
        if pending:
            task.cancel()
            await asyncio.wait({task}, timeout=timeout)

    async def _run(self) -> None:
        while not self._stop.is_set():
            try:
                await self.tick()
            except Exception as exc:  # Redis away: try again at the next tick
                if not self.failures:  # one line per outage, not one per tick
                    log.warning("OJS upkeep failed (retrying every %ss): %s", SWEEP_EVERY, exc)
                self.failures += 1
            else:
                if self.failures:
                    log.warning("OJS upkeep works again")
                self.failures = 0
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._stop.wait(), SWEEP_EVERY)

    async def tick(self) -> None:
        """One round: expired leases, attempts past their timeout, a step of the records'
        upkeep, one of the cron jobs', and (once a second) one of the open workflows'."""
        backend = self.backend
        records = backend.records
        dlq = backend.keys(backend.dead_letter_queue)
        loop = asyncio.get_running_loop()
        # Moves a crash cut short (the ones a sweep records, it finishes at once; a nack's
        # dead letter into another cluster slot): a look every few seconds, one HSCAN a queue.
        moves_due = loop.time() >= self._moves_at
        if moves_due:
            self._moves_at = loop.time() + min(MOVES_EVERY, self._records_pause)
        for raw in await backend.client.smembers(records.queues):
            name = raw.decode() if isinstance(raw, bytes) else str(raw)
            keys = backend.keys(name)
            # A dead letter queue in another cluster slot: the sweep records moves (_moves).
            across = _moves.crosses(backend.client, keys, dlq)
            target = [keys.moves] if across else [*dlq.dead_letter_group, dlq.job_prefix]
            _, _, dead, _, moves = await _scripts.load("sweep_stalled")(
                backend.client, [*keys.group, keys.failed, *target],
                [backend.now(), MAX_STALLED, backend.max_events, name,
                 backend.dead_letter_queue, SWEEP_BATCH, int(across), CALL_BUDGET_US],
            )  # fmt: skip
            for move_id in moves:  # a replay of another dead letter queue goes back there
                await _moves.finish(backend.client, keys, _text(move_id), backend.max_events)
            if moves_due:
                await _moves.sweep(backend.client, keys, backend.max_events)
            if dead:  # the dead letter queue must be known to the store's global view
                await backend.client.sadd(dlq.dead_letter_registry, backend.dead_letter_queue)
        # The attempts past their timeout, TIMEOUTS_PER_TICK at most (the rest at the next tick).
        due: list[Any] = await backend.client.zrangebyscore(
            records.timeouts, "-inf", backend.now(), start=0, num=TIMEOUTS_PER_TICK
        )
        for item in due:
            member = item.decode() if isinstance(item, bytes) else str(item)
            if await backend.client.zrem(records.timeouts, member):  # one server acts on it
                queue, job_id, token = member.split(" ", 2)
                await expire(backend, queue, job_id, token)
        await self._prune_step()
        await self._crons.step()
        if loop.time() >= self._workflows_at:  # workflows an ACK did not move on
            self._workflows_at = loop.time() + WORKFLOWS_EVERY
            self._workflows_cursor = await repair_step(backend, self._workflows_cursor)

    async def _prune_step(self) -> None:
        """A step of the walk over the OJS records (a bounded one, every round), then a
        pause once the walk is over."""
        loop = asyncio.get_running_loop()
        if self._records_cursor == 0 and loop.time() < self._records_walk_at:
            return
        backend = self.backend
        self._records_cursor, let_go, orphans = await backend.records.prune(
            self._records_cursor, dead_letters=backend.keys(backend.dead_letter_queue)
        )
        await retire_owners(backend, let_go)  # the failed workflows over for good
        await finish_orphans(backend, orphans)  # the jobs whose server died before adding them
        if self._records_cursor == 0:
            self._records_walk_at = loop.time() + self._records_pause
