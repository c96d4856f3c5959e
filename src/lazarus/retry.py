"""Moving jobs on by hand: the ``retry_job``, ``retry_jobs``, ``promote_job`` and
``promote_jobs`` methods of :class:`~lazarus.Queue`.

A delayed job (waiting out its own delay, a retry's backoff or a rate limit's postponement)
is made ready at once by ``promote_job``; ``promote_jobs`` does it for as many jobs as are
delayed when it begins, soonest due first, in bounded script calls as a bulk retry.

A job in ``failed`` (it failed for good on a queue without a dead letter queue) goes back to
``waiting`` (or ``prioritized``) with its attempts afresh, keeping its failure history. Each
script call moves at most ``batch_size`` jobs, and stops at its time budget (4 ms) before
that, so a bulk retry never holds Redis for long, whatever its batch size; it
retries the jobs that had failed when it began, oldest first, so a job that fails again
during the bulk is not retried twice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, cast

from . import _scripts
from ._codec import text
from ._connection import now_ms, reports_unavailable
from ._keys import QueueKeys, validate_job_id
from ._scripts import CALL_BUDGET_US
from .dead_letter.bulk import DEFAULT_BATCH, Progress, check_batch, check_progress, report
from .errors import error_for_code
from .job import JobState

if TYPE_CHECKING:
    from ._connection import Client
RetryState = Literal["failed"]


class RetryMixin:
    """The retry half of :class:`~lazarus.Queue`."""

    name: str
    keys: QueueKeys
    max_events: int
    _client: Client

    def _retry_keys(self) -> list[str]:
        return [*self.keys.group, self.keys.failed]

    @reports_unavailable
    async def retry_job(self, job_id: str) -> None:
        """Move one failed job back to ``waiting`` with its attempts afresh.

        Raises :class:`JobNotFoundError` when there is no such job and :class:`JobStateError`
        when it is not in ``failed`` (it may be waiting, running, done, or retried already).
        """
        validate_job_id(job_id)
        script = _scripts.load("retry_failed_jobs")
        (code,) = await script(
            self._client, self._retry_keys(), [now_ms(), self.max_events, 0, 0, job_id]
        )
        if int(code) != 1:
            raise error_for_code(int(code), f"retry job {job_id!r} of {self.name!r}")

    @reports_unavailable
    async def promote_job(self, job_id: str) -> JobState:
        """Make a delayed job ready now: it goes to ``waiting`` (or ``prioritized``, by its
        priority) as if its delay had just ended, and its delay becomes 0; returns the state
        it entered. Emits ``promoted``, then ``waiting``.

        Raises :class:`JobNotFoundError` when there is no such job and :class:`JobStateError`
        when it is not delayed (nothing is written). Not sent again after a dropped
        connection: :meth:`get_job_state` tells whether it was promoted.
        """
        validate_job_id(job_id)
        reply = await _scripts.load("promote_job")(
            self._client, [*self.keys.group, self.keys.job(job_id)],
            [job_id, now_ms(), self.max_events],
        )  # fmt: skip
        if isinstance(reply, int):
            raise error_for_code(reply, f"promote job {job_id!r} of {self.name!r}")
        return cast(JobState, text(reply))

    @reports_unavailable
    async def promote_jobs(
        self,
        *,
        dry_run: bool = False,
        batch_size: int = DEFAULT_BATCH,
        on_progress: Progress | None = None,
    ) -> int:
        """Make the delayed jobs ready now, soonest due first, as :meth:`promote_job` each;
        returns how many were promoted (with ``dry_run``, how many are delayed).

        It promotes at most as many as are delayed when the call begins: jobs that become
        delayed meanwhile (a retry's backoff, a rate limit's postponement) may be among them,
        but never make it run for good. ``batch_size`` jobs per script call;
        ``on_progress(done)`` is called after each batch (it may be async).
        """
        batch, on_progress = check_batch(batch_size), check_progress(on_progress)
        remaining = int(await self._client.zcard(self.keys.delayed))
        if dry_run:
            return remaining
        script = _scripts.load("promote_jobs")
        done = 0
        while remaining > 0:
            left, dropped, *promoted = await script(
                self._client, list(self.keys.group),
                [now_ms(), self.max_events, min(batch, remaining), CALL_BUDGET_US],
            )  # fmt: skip
            done += len(promoted)
            remaining -= len(promoted) + int(dropped)
            if on_progress is not None:
                await report(on_progress, done)
            if not int(left):
                break
        return done

    @reports_unavailable
    async def retry_jobs(
        self,
        state: RetryState = "failed",
        *,
        dry_run: bool = False,
        batch_size: int = DEFAULT_BATCH,
        on_progress: Progress | None = None,
    ) -> int:
        """Retry every job that is in ``state`` (``"failed"``) when the call begins; returns
        how many were retried (with ``dry_run``, how many would be).

        ``batch_size`` jobs per script call, oldest failure first; ``on_progress(done)`` is
        called after each batch (it may be async).
        """
        if state != "failed":
            raise ValueError(f"state must be 'failed', got {state!r}")
        batch, on_progress = check_batch(batch_size), check_progress(on_progress)
        until = now_ms()
        if dry_run:
            return int(await self._client.zcount(self.keys.failed, "-inf", until))
        script = _scripts.load("retry_failed_jobs")
        done = 0
        while True:
            more, *retried = await script(
                self._client, self._retry_keys(),
                [now_ms(), self.max_events, until, batch, CALL_BUDGET_US],
            )  # fmt: skip
            done += len(retried)
            if on_progress is not None:
                await report(on_progress, done)
            if not int(more):
                return done
