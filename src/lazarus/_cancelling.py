"""Cancelling a job that has not ended (``Queue.cancel_job``, ``cancel_job.lua``).

A cancelled job ends as a failure that is not retried, :class:`~lazarus.JobCancelledError`,
recorded by a worker with the outcome scripts of every other failure, so that it lands where
the job's failures go (its dead letter queue with reason ``cancelled``, its replay's dead
letter, or ``failed``), once. A running job's worker reads the request when it next renews
its leases, at once when it sees the queue's ``cancels`` count move (it looks every 0.5 s),
and stops the processor; a job that waits is
put first in line, and the worker that claims it records the failure without running it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from . import _codec, _scripts
from ._codec import text
from ._connection import reports_unavailable
from ._failure import DEFAULT_MAX_ERROR_BYTES
from ._keys import QueueKeys, validate_job_id
from ._scripts.wait_search import call_searching_wait
from .errors import ErrorCode, JobStateError, error_for_code

if TYPE_CHECKING:
    from ._connection import Client
    from .job import JobState

DEFAULT_REASON = "cancelled"


def reason_value(reason: object) -> str:
    """``reason`` checked: a non-empty str of at most DEFAULT_MAX_ERROR_BYTES of JSON (what a
    worker keeps of an error's message by default)."""
    if not isinstance(reason, str):
        raise TypeError(f"reason must be a str, not {type(reason).__name__}")
    if not reason:
        raise ValueError("reason must not be empty")
    size = len(_codec.encode(reason, field="reason").encode())
    if size > DEFAULT_MAX_ERROR_BYTES:
        limit = DEFAULT_MAX_ERROR_BYTES
        raise ValueError(f"reason must be at most {limit} bytes of JSON, got {size}")
    return reason


class CancellingMixin:
    """The cancelling part of :class:`~lazarus.Queue`."""

    name: str
    keys: QueueKeys
    max_events: int
    _client: Client

    @reports_unavailable
    async def cancel_job(self, job_id: str, reason: str = DEFAULT_REASON) -> JobState:
        """Cancel job ``job_id``, which has not ended; returns its state after the request.

        The job fails with :class:`~lazarus.JobCancelledError` (``reason`` its message),
        which is not retried: it goes where the job's failures go, a dead letter queue with
        reason ``cancelled`` or ``failed``. A running job (``active``) is stopped by its
        worker when the worker next renews its leases, within about a second (the workers
        running jobs look for cancelled ones every 0.5 s); a plain-function processor's
        thread cannot be stopped and is abandoned, as on a timeout. A waiting, prioritized or
        delayed job is put first in line (``waiting``, or ``paused`` while the queue is
        paused), and the next worker to claim it records the failure without running it.
        Raises ``JobNotFoundError``, or ``JobStateError`` for a job that has ended
        (completed, failed, a dead letter): nothing is written. Records ``cancelling``
        (jobId, reason)."""
        validate_job_id(job_id)
        reason = reason_value(reason)
        k = self.keys
        reply = await call_searching_wait(
            _scripts.load("cancel_job"),
            self._client,
            k.wait,
            [*k.group, k.completed, k.failed, k.job(job_id)],
            [job_id, reason, self.max_events],
        )
        if isinstance(reply, int):
            what = f"cancel job {job_id!r} of {self.name!r}"
            if reply == ErrorCode.JOB_STATE:
                raise JobStateError(f"{what}: it has ended (completed, failed or dead-lettered)")
            raise error_for_code(reply, what)
        return cast("JobState", text(reply))
