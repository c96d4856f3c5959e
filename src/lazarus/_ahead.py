"""Claiming ahead: a slot whose jobs are short holds its next job before the current one ends.

A slot that finishes a job records the outcome and claims its next job in one call, and
without a job in hand it waits for that round trip before it runs anything again. For short
jobs on a busy worker the wait is a large share of each job: 10 ms jobs at concurrency 200
spent about 2.5 ms of every 13 between jobs. So a slot whose last job ran under
:data:`CLAIM_AHEAD_UNDER` seconds keeps one job ahead: it starts that job at once when the
current one ends, and the outcome of the one that ended, sent meanwhile, claims the job after.

A job claimed ahead is claimed like any other (active, under a lease the worker renews), but
it has not started. It waits at most about :data:`HOLD` seconds: if its slot is still busy by
then, it goes back to the queue (``release_job``), where any worker may take it. So a short job
never waits behind a long one for more than that, and at most one job per slot is held this way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any

from . import _scripts
from ._connection import now_ms
from ._execution import ClaimedJob, parse_claimed
from ._keys import new_id

if TYPE_CHECKING:
    from ._slot import SlotRunner

CLAIM_AHEAD_UNDER = 0.05  # seconds: a slot whose last job ran shorter claims its next ahead
CLAIM_AHEAD_OVER = 0.001  # seconds: ... and longer (shorter jobs keep Redis busy as they are)
HOLD = 0.25  # seconds a job claimed ahead waits for its slot before it goes back to the queue


class Ahead:
    """The next job of one slot, on its way or in hand; taken once, by the slot."""

    def __init__(self, runner: SlotRunner, call: Awaitable[ClaimedJob | None]) -> None:
        self._runner = runner
        self.job: ClaimedJob | None = None
        self.returning: asyncio.Task[bool] | None = None  # on its way back to the queue
        self.task = asyncio.ensure_future(self._receive(call))

    async def _receive(self, call: Awaitable[ClaimedJob | None]) -> None:
        job = await call
        if job is not None:
            self._runner.held[job.job.id] = job.token  # renewed from now on, like a running job
            self.job = job
            self._runner.holds.keep(self)

    async def take(self) -> ClaimedJob | None:
        """The job, once the call is back (None: there was none, or it went back)."""
        if not self.task.done():  # shielded: a slot cancelled meanwhile still gives it back
            await asyncio.shield(self.task)
        self._runner.holds.taken(self)
        if self.returning is not None and await asyncio.shield(self.returning):
            self.job = None  # back in the queue (or maybe); if Redis refused it, it runs here
        job, self.job = self.job, None
        return job

    async def give_back(self, timeout: float) -> None:
        """The slot ends: wait up to ``timeout`` for the call, and hand back what it got."""
        try:
            await asyncio.wait_for(asyncio.shield(self.task), timeout)
        except BaseException:  # the call is abandoned: its job, if any, stalls and comes back
            self.task.cancel()
        job = None if not self.task.done() or self.task.cancelled() else await self.take()
        if job is not None:
            await self._runner.hand_back(job, "was claimed ahead when the worker stopped")


HandBack = Callable[[ClaimedJob, str], Coroutine[Any, Any, bool | None]]


class Holds:
    """The jobs a worker's slots hold ahead, each given back once it has waited :data:`HOLD`
    seconds; one timer task for all of them, running while any is held. A job that cannot be
    given back (Redis does not answer) stays held, under its lease, and its slot runs it."""

    def __init__(self, hand_back: HandBack, held: dict[str, str]) -> None:
        self._hand_back = hand_back
        self._leases = held  # job id -> lock token of the worker's jobs, renewed
        self._held: dict[Ahead, float] = {}  # -> when it goes back (the event loop's time)
        self._timer: asyncio.Task[None] | None = None
        self._giving: set[asyncio.Task[bool]] = set()

    def keep(self, ahead: Ahead) -> None:
        loop = asyncio.get_running_loop()
        self._held[ahead] = loop.time() + HOLD
        if self._timer is None:
            self._timer = loop.create_task(self._expire())

    def taken(self, ahead: Ahead) -> None:
        self._held.pop(ahead, None)

    async def _expire(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._held:
                await asyncio.sleep(HOLD / 4)
                now = loop.time()
                for ahead in [a for a, until in self._held.items() if until <= now]:
                    del self._held[ahead]
                    if ahead.job is not None:  # its slot is still busy: anyone may take it
                        task = loop.create_task(self._give(ahead.job))
                        ahead.returning = task
                        self._giving.add(task)
                        task.add_done_callback(self._giving.discard)
        finally:
            self._timer = None

    async def _give(self, job: ClaimedJob) -> bool:
        """Whether the job left its slot: it did unless Redis refused to take it back. A
        hand-back whose reply was lost may have run, and the job be claimed elsewhere: it is
        not run here (its lease, unrenewed, runs out if Redis never got it)."""
        if await self._hand_back(job, f"waited {HOLD} s for its slot") is not False:
            return True
        self._leases[job.job.id] = job.token  # still this worker's: renewed, and run
        return False

    async def close(self, timeout: float) -> None:
        """Wait up to ``timeout`` for the jobs on their way back."""
        if self._timer is not None and not self._held:
            self._timer.cancel()
        if self._giving:
            await asyncio.wait(set(self._giving), timeout=timeout)


async def claim_one(runner: SlotRunner, slot: str) -> ClaimedJob | None:
    """Claim one job of the slot's queue, under the slot's reply memo; None when there is none.

    A claim whose reply is lost is sent again with the same call id, which answers with the
    job the first run claimed, until the lease it would have given runs out (or the worker
    stops): after that, a job it claimed stalls and the sweep gives it back.
    """
    ctx = runner.ctx
    keys = [*ctx.keys.group, ctx.keys.reply(ctx.token_base, slot)]
    call_id, deadline = new_id(), now_ms() + ctx.lock_ms
    incident = runner.recording
    while True:
        args = [now_ms(), ctx.token_base, ctx.lock_ms, 1, ctx.max_events, call_id]
        try:
            reply = await _scripts.load("claim_jobs")(ctx.client, keys, args)
        except Exception as exc:
            runner.report_error(exc, incident)
            left = deadline - now_ms()
            if left <= 0 or runner.closing():
                return None
            await asyncio.sleep(min(incident.backoff(), left / 1000))
            continue
        if incident.failures:
            incident.succeeded()
        return parse_claimed(reply[1], ctx.keys.queue) if len(reply) > 1 else None
