"""Beside the worker loop: renew the leases of running jobs, and sweep stalled ones.

A lease is a job id in the queue's ``leases`` set scored by its expiry. The worker renews the
leases of its jobs every half lock duration; any live worker sweeps expired leases every
``stalled_interval`` and gives those jobs back to the queue (or fails / dead-letters them
after too many stalls).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from . import _moves, _scripts
from ._codec import text as _text
from ._connection import is_cluster, now_ms
from ._execution import ExecutionContext
from ._scripts import CALL_BUDGET_US
from ._supervision import Incident
from .dead_letter.lifecycle import settle_sample

log = logging.getLogger("lazarus.worker")

SWEEP_BATCH = 100
SETTLE_SAMPLE = 100  # processing dead letters a sweep looks at


CANCEL_POLL = 0.5  # seconds between looks for cancelled running jobs while jobs run


class LeaseKeeper:
    """Renews this worker's leases and sweeps the queue for stalled jobs."""

    def __init__(
        self,
        ctx: ExecutionContext,
        held: Callable[[], dict[str, str]],
        *,
        stalled_interval_ms: int,
        max_stalled_count: int,
        on_lost: Callable[[str, str], None],
        on_error: Callable[[BaseException, Incident], None],
        on_cancel: Callable[[str, str, str], None] = lambda job_id, token, reason: None,
    ) -> None:
        self._ctx = ctx
        self._held = held
        self._stalled_interval = stalled_interval_ms / 1000
        self._max_stalled = max_stalled_count
        self._on_lost = on_lost
        self._on_cancel = on_cancel
        self._cancels_seen: object = None  # the queue's cancels count at the last renewal
        self._on_error = on_error
        self._stop = asyncio.Event()
        self._renewing = Incident(log, f"queue {ctx.keys.queue}: lease renewal")
        self._sweeping = Incident(log, f"queue {ctx.keys.queue}: stall sweep")

    def stop(self) -> None:
        """Ask :meth:`run` to return; it does at its next pause."""
        self._stop.set()

    async def renew(self) -> None:
        """Extend the lease of every job this worker holds; report the ones it lost, and the
        ones it holds that were cancelled (``Queue.cancel_job``), with their reasons."""
        held = self._held()
        if not held:
            return
        args: list[str | int] = [now_ms() + self._ctx.lock_ms]
        for job_id, token in held.items():
            args += [job_id, token]
        keys = [self._ctx.keys.leases, self._ctx.keys.job_prefix]
        script = _scripts.load("extend_locks")
        lost, cancelled, self._cancels_seen = await script(self._ctx.client, keys, args)
        for gone in lost:
            job_id = _text(gone)
            self._on_lost(job_id, held[job_id])
        for i in range(0, len(cancelled), 2):
            job_id = _text(cancelled[i])
            self._on_cancel(job_id, held[job_id], _text(cancelled[i + 1]))

    async def sweep(self) -> int:
        """Recover jobs whose lease expired; returns how many were swept."""
        ctx, total = self._ctx, 0
        keys = [*ctx.keys.group, ctx.keys.failed]
        dlq_name, across = "", 0
        if ctx.dlq_keys is not None:
            # A dead letter queue in another cluster slot: the sweep records moves (_moves).
            across = int(_moves.crosses(ctx.client, ctx.keys, ctx.dlq_keys))
            keys += [ctx.keys.moves] if across else [*ctx.dlq_keys.dead_letter_group,
                                                     ctx.dlq_keys.job_prefix]  # fmt: skip
            dlq_name = ctx.dlq_keys.queue
            # Replays of this dead letter queue that will never report back (removed,
            # cleaned, stalled out elsewhere) are found by a bounded random sample each sweep.
            await settle_sample(ctx.client, ctx.dlq_keys, ctx.max_events, SETTLE_SAMPLE)
        while True:
            requeued, failed, dead, more, moves = await _scripts.load("sweep_stalled")(
                ctx.client, keys,
                [now_ms(), self._max_stalled, ctx.max_events, ctx.keys.queue, dlq_name,
                 SWEEP_BATCH, across, CALL_BUDGET_US, *ctx.keep_failed.args()],
            )  # fmt: skip
            # Replays going back to their own dead letter queue, and dead letters for one in
            # another cluster slot: if this stops half-way, _moves.sweep below finishes them.
            for move_id in moves:
                await _moves.finish(ctx.client, ctx.keys, _text(move_id), ctx.max_events)
            swept = len(requeued) + len(failed) + len(dead)
            total += swept
            if swept:
                log.warning(
                    "queue %s: %d stalled job(s) requeued, %d failed, %d dead-lettered",
                    ctx.keys.queue,
                    len(requeued),
                    len(failed),
                    len(dead),
                )
            if swept < SWEEP_BATCH and not int(more):
                break
        # Moves out of these queues that a crash interrupted.
        await _moves.sweep(ctx.client, ctx.keys, ctx.max_events)
        if ctx.dlq_keys is not None and is_cluster(ctx.client):  # replays into other slots
            await _moves.sweep(ctx.client, ctx.dlq_keys, ctx.max_events)
        return total

    async def run(self) -> None:
        """Renew and sweep until stopped. No error ends it: a failed renewal is retried
        after a short backoff (a lease must not lapse for want of a retry), a failed sweep
        at the next tick; each failure is reported, the log kept to one line per change."""
        renew_every = max(self._ctx.lock_ms / 2000, 0.01)
        next_sweep = 0.0
        loop = asyncio.get_running_loop()
        while not self._stop.is_set():
            pause = min(renew_every, self._stalled_interval)
            # Renew first: after an outage, this worker's expired leases are renewed before
            # its own sweep could take their jobs back.
            if not await self._attempt(self.renew, self._renewing):
                pause = min(pause, self._renewing.backoff())
            if loop.time() >= next_sweep and await self._attempt(self.sweep, self._sweeping):
                next_sweep = loop.time() + self._stalled_interval
            await self._wait(pause)

    async def _wait(self, pause: float) -> None:
        """Wait up to ``pause`` seconds: less when stopped, or when a job of the queue was
        cancelled while this worker runs some (``cancel_job`` counts it in the queue's
        ``cancels`` key, read every :data:`CANCEL_POLL` seconds): the renewal that follows
        reads which, and a cancelled processor stops within about that."""
        loop = asyncio.get_running_loop()
        until = loop.time() + pause
        while not self._stop.is_set() and (left := until - loop.time()) > 0:
            # An event, not a bare sleep: cancelling a task inside a Redis call is not always
            # delivered, and stop() must not wait a whole renew period.
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._stop.wait(), min(left, CANCEL_POLL))
            if self._held() and await self._cancels_changed():
                return

    async def _cancels_changed(self) -> bool:
        """Whether the queue's count of cancelled running jobs moved since the last renewal
        read it (which read every request made before). An unreadable count: no; the
        renewal's own retries report the outage."""
        try:
            seen = await self._ctx.client.get(self._ctx.keys.cancels)
        except Exception:
            return False
        return _text(seen or "") != _text(self._cancels_seen or "")

    async def _attempt(self, step: Callable[[], Awaitable[object]], incident: Incident) -> bool:
        try:
            await step()
        except Exception as exc:
            self._on_error(exc, incident)
            return False
        incident.succeeded()
        return True
