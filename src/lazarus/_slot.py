"""A worker's slots: each runs claimed jobs one after another, from the processor to the
recorded outcome, and nothing a processor raises or Redis answers ends a slot.

- Whatever the processor raises — any ``BaseException``, a ``CancelledError`` of its own
  included — is a failed attempt, retried or dead-lettered per the job's policy. Only the
  worker's shutdown cancelling the slot hands the job back to the queue, at once.
- A job past its timeout fails its attempt with :class:`~lazarus.JobTimeoutError`.
- Recording an outcome is retried on any Redis error until the job's lease would expire; a
  job that is gone meanwhile (lock lost, or removed) is reported as ``lost``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from redis.exceptions import ResponseError

from . import _scripts, _tracing
from ._ahead import CLAIM_AHEAD_OVER, CLAIM_AHEAD_UNDER, Ahead, Holds, claim_one
from ._burst import PAST_MAX_JOBS, Budget
from ._connection import now_ms
from ._execution import ClaimedJob, ExecutionContext, Outcome, Processor, finish, run_processor
from ._progress import JobHandle
from ._repeat import produce_next, runs
from ._supervision import Incident
from .errors import (
    JobCancelledError,
    JobExpiredError,
    JobNotFoundError,
    JobTimeoutError,
    LockLostError,
)
from .job import Job
from .schema import PayloadSchema

log = logging.getLogger("lazarus.worker")

HAND_BACK_TIMEOUT = 5.0  # seconds a job cut short by shutdown may take to be handed back
HAND_BACK_ATTEMPTS = 3  # sends of a hand-back whose reply does not come


@dataclasses.dataclass
class SlotRunner:
    """What a worker's slots share: its processor, settings and callbacks."""

    ctx: ExecutionContext
    processor: Processor
    worker_name: str
    job_timeout: int | None
    held: dict[str, str]  # job id -> lock token, for lease renewal
    emit: Callable[..., Awaitable[None]]
    report_error: Callable[[BaseException, Incident], None]
    closing: Callable[[], bool]
    recording: Incident
    # Whether an outcome also claims the slot's next job of the same queue. A worker with
    # several queues turns it off where the next job must be chosen across its queues.
    fetch_next: bool = True
    claim_ahead: bool = True  # see _ahead
    schema: PayloadSchema | None = None  # the worker's: a job's update_data checks with it
    budget: Budget | None = None  # the jobs started, with burst or max_jobs (see _burst)
    # While a processor runs: job id -> its lock token and the slot's task (see stop).
    running: dict[str, tuple[str, asyncio.Task[Any]]] = dataclasses.field(default_factory=dict)
    # Stops asked of running processors (Queue.cancel_job): job id -> lock token, reason.
    stops: dict[str, tuple[str, str]] = dataclasses.field(default_factory=dict)

    @functools.cached_property
    def holds(self) -> Holds:
        """The jobs this worker's slots hold ahead."""
        return Holds(self.hand_back, self.held)

    @functools.cached_property
    def handle(self) -> JobHandle:
        """What the jobs this worker runs use to report progress and logs."""
        return JobHandle(self.ctx.client, self.ctx.keys, self.ctx.max_events, schema=self.schema)

    def unhold(self, claimed: ClaimedJob) -> None:
        """Stop renewing the lease of ``claimed``: only under its own token, for the same job
        may run in another slot meanwhile, claimed again after its lease here lapsed."""
        if self.held.get(claimed.job.id) == claimed.token:
            del self.held[claimed.job.id]

    async def work(self, claimed: ClaimedJob | None, slot: str) -> None:
        """Run jobs one after another in slot ``slot`` (which names its reply memo) while
        the outcome script hands out more; with short jobs, one job ahead (``_ahead``)."""
        ahead: Ahead | None = None
        try:
            while claimed is not None:
                self.held[claimed.job.id] = claimed.token
                claimed, ahead = await self._execute(claimed, slot, ahead)
                if claimed is not None and self.budget is not None and not self.budget.take():
                    await self.hand_back(claimed, PAST_MAX_JOBS)  # claimed as max_jobs began
                    claimed = None
        finally:
            if ahead is not None:  # shutdown, or an exiting error, with a call on its way
                await ahead.give_back(HAND_BACK_TIMEOUT)

    async def _execute(
        self, claimed: ClaimedJob, slot: str, ahead: Ahead | None
    ) -> tuple[ClaimedJob | None, Ahead | None]:
        """Run ``claimed``; the slot's next job, and what it holds ahead of that."""
        begun = await self._begin(claimed)
        if begun is None:  # skipped by its schedule: removed, nothing to run nor record
            self.unhold(claimed)
            next_job = await ahead.take() if ahead is not None else None
            if next_job is not None and self.closing():
                await self.hand_back(next_job, "was claimed ahead when the worker stopped")
                next_job = None
            return next_job, None
        job, span = begun
        started = asyncio.get_running_loop().time()
        result, error = await self._run(claimed, job, span)
        short = (
            self.claim_ahead
            and CLAIM_AHEAD_OVER <= asyncio.get_running_loop().time() - started < CLAIM_AHEAD_UNDER
        )
        # No more renewals once the outcome is on its way: a renewal racing the outcome
        # script would find the job finished and report a lock that was not lost. If
        # recording outlasts the lease, the job stalls and runs again (at least once).
        self.unhold(claimed)
        if isinstance(error, JobTimeoutError) and self.ctx.executor is not None:
            log.warning("worker %s: job %s timed out; its thread cannot be stopped and is "
                        "abandoned, still running", self.worker_name, job.id)  # fmt: skip
        # SystemExit or KeyboardInterrupt in the event loop's own thread still ends the
        # process, once the attempt is recorded.
        exiting = isinstance(error, (SystemExit, KeyboardInterrupt)) and not self.ctx.executor
        fetch_next = self.fetch_next and not exiting
        next_job = await ahead.take() if ahead is not None else None
        if next_job is not None and (exiting or self.closing()):
            await self.hand_back(next_job, "was claimed ahead when the worker stopped")
            next_job = None
        if next_job is not None:
            # It runs now. This outcome is recorded meanwhile, and claims the job after it
            # while the jobs stay short.
            settle = self._settle(claimed, job, span, result, error, slot, fetch_next and short)
            return next_job, Ahead(self, settle)
        next_job = await self._settle(claimed, job, span, result, error, slot, fetch_next)
        if exiting:
            raise error  # type: ignore[misc]
        if next_job is not None and short and not self.closing():
            return next_job, Ahead(self, claim_one(self, slot))
        return next_job, None

    async def _settle(
        self, claimed: ClaimedJob, job: Job, span: Any, result: Any,
        error: BaseException | None, slot: str, fetch_next: bool,
    ) -> ClaimedJob | None:  # fmt: skip
        """Record the outcome and announce it; the job claimed next, if any."""
        outcome, next_job = await self._record(claimed, result, error, slot, fetch_next=fetch_next)
        _end_span(span, outcome, error)
        try:
            if outcome is not None:
                await self._announce(job, outcome)
        except asyncio.CancelledError:  # shutdown: the job claimed next has not started
            if next_job is not None:
                await self.hand_back(next_job)
            raise
        return next_job

    async def _begin(self, claimed: ClaimedJob) -> tuple[Job, Any] | None:
        """The job, bound to its queue, and its span (or None); a repeatable job's schedule
        gets its next occurrence first, and None when the schedule skipped this one."""
        job = claimed.job.bind(self.handle)
        if job.repeat_key is not None:
            reply = await produce_next(self.ctx.client, self.ctx.keys, self.ctx.max_events,
                                       job.id, job.repeat_key, claimed.token)  # fmt: skip
            if not runs(reply):
                return None
        return job, (_tracing.start_process(job) if _tracing.active() else None)

    async def _run(
        self, claimed: ClaimedJob, job: Job, span: Any
    ) -> tuple[Any, BaseException | None]:
        """Run the processor on ``job``: its result, or the error its attempt failed with."""
        if claimed.undecodable is not None:  # then the processor cannot run
            return None, claimed.undecodable
        if claimed.cancelled is not None:  # cancelled before it started
            return None, JobCancelledError(claimed.cancelled)
        expires_at = job.expires_at
        if expires_at is not None and (now := now_ms()) >= expires_at:  # by this worker's clock
            return None, JobExpiredError.claimed_late(expires_at, now)
        self.running[job.id] = (claimed.token, _this_task())
        try:
            await self.emit("active", job)
            timeout = job.opts.timeout or self.job_timeout
            return await run_processor(self.processor, job, self.ctx.executor, timeout), None
        except asyncio.CancelledError as exc:
            stopped = self._stopped(claimed)
            if stopped is None and self._cancelled_by_shutdown():
                _end_span(span, None, exc)
                await self.hand_back(claimed)
                raise
            return None, stopped or exc  # else the processor's own: a failure like any other
        except BaseException as exc:  # GeneratorExit, SystemExit from a thread, ...
            return None, exc
        finally:
            # Nothing awaits between the processor's end and here: a stop cannot reach the
            # slot once it records the outcome. (Another slot may run another claim of the
            # same job, taken back from this one: its entries stay.)
            if self.running.get(job.id, ("",))[0] == claimed.token:
                del self.running[job.id]
            if self.stops.get(job.id, ("",))[0] == claimed.token:
                del self.stops[job.id]

    def stop(self, job_id: str, token: str, reason: str) -> None:
        """Stop the processor running job ``job_id`` under ``token`` (Queue.cancel_job): its
        slot records the attempt as failed with :class:`~lazarus.JobCancelledError`. A
        processor that has returned, or runs another claim of the job, is left alone."""
        running = self.running.get(job_id)
        if running is None or running[0] != token or job_id in self.stops:
            return
        self.stops[job_id] = (token, reason)
        running[1].cancel()

    def _stopped(self, claimed: ClaimedJob) -> JobCancelledError | None:
        """The error of a processor stopped by :meth:`stop`, with the cancellation it
        delivered taken back (Python >= 3.11), or ``None`` for any other cancellation."""
        stop = self.stops.get(claimed.job.id)
        if stop is None or stop[0] != claimed.token:
            return None
        uncancel = getattr(asyncio.current_task(), "uncancel", None)
        if uncancel is not None:
            uncancel()
        if self.ctx.executor is not None:
            log.warning("worker %s: job %s was cancelled; its thread cannot be stopped and is "
                        "abandoned, still running", self.worker_name, claimed.job.id)  # fmt: skip
        return JobCancelledError(stop[1])

    def _cancelled_by_shutdown(self) -> bool:
        """Whether the CancelledError at hand is the worker's shutdown (or the event loop's
        end) cancelling this slot, rather than one the processor raised or let through."""
        cancelling = getattr(asyncio.current_task(), "cancelling", None)
        if cancelling is not None:  # Python >= 3.11: a cancel() of this task is pending
            return bool(cancelling())
        return self.closing()

    async def hand_back(
        self, claimed: ClaimedJob, why: str = "was cut short by shutdown"
    ) -> bool | None:
        """Give a job that did not run to its end (``why``, for the log) back to the queue at
        once: True once Redis was told, False when Redis refused (an error reply: nothing
        ran), None when no reply came (a timeout, a dropped connection). Unless it was told,
        the job stays this worker's, unrenewed: its lease expires, and the stall sweep gives
        it back later.

        A hand-back whose reply is lost may have run, so it is sent again: the job's lock
        token makes the second one a no-op when the first ran (and the first, should it run
        late, a no-op after the second), and the answer of either says the job is not this
        worker's any more."""
        job_id = claimed.job.id
        self.unhold(claimed)
        release = _scripts.load("release_job")
        for attempt in range(HAND_BACK_ATTEMPTS):
            call = release(
                self.ctx.client, self.ctx.keys.group, [job_id, claimed.token, self.ctx.max_events]
            )
            try:
                code = await asyncio.wait_for(call, HAND_BACK_TIMEOUT)
            except ResponseError as exc:
                if attempt == 0:  # refused: it did not run
                    log.warning("worker %s: cannot hand job %s back (%s)", self.worker_name,
                                job_id, exc)  # fmt: skip
                    return False
            except Exception as exc:
                log.warning("worker %s: cannot hand job %s back (%s)", self.worker_name, job_id,
                            exc or type(exc).__name__)  # fmt: skip
                continue
            else:
                if code == 0:
                    log.info("worker %s: job %s %s and is back in the queue", self.worker_name,
                             job_id, why)  # fmt: skip
                return True
        return None

    async def _record(
        self,
        claimed: ClaimedJob,
        result: Any,
        error: BaseException | None,
        slot: str,
        *,
        fetch_next: bool,
    ) -> tuple[Outcome | None, ClaimedJob | None]:
        """Record the outcome, retrying any Redis error until the lease would expire."""
        deadline = now_ms() + self.ctx.lock_ms
        incident = self.recording
        while True:
            try:
                recorded = await finish(
                    self.ctx, claimed, result, error, fetch_next and not self.closing(), slot
                )
            except (LockLostError, JobNotFoundError) as exc:
                log.warning("worker %s: %s; the outcome is dropped", self.worker_name, exc)
                await self.emit("lost", claimed.job.id)
                return None, None
            except Exception as exc:
                self.report_error(exc, incident)
                left = deadline - now_ms()
                if left <= 0:
                    log.error("worker %s: giving up on job %s; it will stall and be retried",
                              self.worker_name, claimed.job.id)  # fmt: skip
                    return None, None
                await asyncio.sleep(min(incident.backoff(), left / 1000))
            else:
                if incident.failures:
                    incident.succeeded()
                return recorded

    async def _announce(self, job: Job, outcome: Outcome) -> None:
        if outcome.kind == "completed":
            await self.emit("completed", job, outcome.result)
        elif outcome.kind == "retrying":
            await self.emit("retrying", job, outcome.error)
        elif outcome.kind == "rate_limited":
            await self.emit("rateLimited", job, outcome.error)
        else:
            await self.emit("failed", job, outcome.error)
            if outcome.kind == "dead_lettered":
                await self.emit("deadLettered", job, outcome.dead_letter_id)
            elif outcome.kind == "discarded":
                await self.emit("discarded", job, outcome.error)


def _end_span(span: Any, outcome: Outcome | None, error: BaseException | None) -> None:
    if span is not None:
        _tracing.end_process(span, outcome, error)


def _this_task() -> asyncio.Task[Any]:
    task = asyncio.current_task()
    assert task is not None  # a slot runs in a task of its own
    return task
