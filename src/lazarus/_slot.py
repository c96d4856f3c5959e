"""A worker's slots: each runs claimed jobs one after another, from the processor to the
recorded outcome, and nothing Redis answers ends a slot: recording an outcome is retried on
any Redis error until the job's lease would expire, and a job that is gone meanwhile (lock
lost, or removed) is reported as ``lost``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from ._connection import now_ms
from ._execution import ClaimedJob, ExecutionContext, Outcome, Processor, finish, run_processor
from ._supervision import Incident
from .errors import JobNotFoundError, LockLostError
from .job import Job

log = logging.getLogger("lazarus.worker")


@dataclasses.dataclass
class SlotRunner:
    """What a worker's slots share: its processor, settings and callbacks."""

    ctx: ExecutionContext
    processor: Processor
    worker_name: str
    held: dict[str, str]  # job id -> lock token, for lease renewal
    emit: Callable[..., Awaitable[None]]
    report_error: Callable[[BaseException, Incident], None]
    closing: Callable[[], bool]
    recording: Incident

    async def work(self, claimed: ClaimedJob | None) -> None:
        """Run jobs one after another in this slot while the outcome script hands out more."""
        while claimed is not None:
            self.held[claimed.job.id] = claimed.token
            claimed = await self._execute(claimed)

    async def _execute(self, claimed: ClaimedJob) -> ClaimedJob | None:
        job = claimed.job
        await self.emit("active", job)
        result: Any = None
        error: BaseException | None = None
        try:
            result = await run_processor(self.processor, job, self.ctx.executor)
        except Exception as exc:
            error = exc
        # No more renewals once the outcome is on its way: a renewal racing the outcome
        # script would find the job finished and report a lock that was not lost. If
        # recording outlasts the lease, the job stalls and runs again (at least once).
        self.held.pop(job.id, None)
        outcome, next_job = await self._record(claimed, result, error, fetch_next=True)
        if outcome is not None:
            await self._announce(job, outcome)
        return next_job

    async def _record(
        self, claimed: ClaimedJob, result: Any, error: BaseException | None, *, fetch_next: bool
    ) -> tuple[Outcome | None, ClaimedJob | None]:
        """Record the outcome, retrying any Redis error until the lease would expire."""
        deadline = now_ms() + self.ctx.lock_ms
        incident = self.recording
        while True:
            try:
                recorded = await finish(
                    self.ctx, claimed, result, error, fetch_next and not self.closing()
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
        else:
            await self.emit("failed", job, outcome.error)
            if outcome.kind == "dead_lettered":
                await self.emit("deadLettered", job, outcome.dead_letter_id)
