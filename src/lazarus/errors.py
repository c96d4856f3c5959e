"""The exceptions lazarus raises, and the error codes its Lua scripts return.

The tree::

    LazarusError
    ├── RedisUnavailableError          Redis could not be reached (names the address)
    ├── ScriptError                    a script answered with a code lazarus does not know
    ├── JobNotFoundError (LookupError) no such job (or dead letter) in this queue
    ├── NotADeadLetterError            the job exists but has no dead-letter metadata
    ├── LockLostError                  the worker no longer owns the job it tries to finish
    ├── JobStateError                  the job is not in the state the operation needs
    ├── JobExistsError                 a job with this id already exists
    ├── JobFailedError                 the job waited for failed for good (or was dead-lettered)
    └── JobTimeoutError (TimeoutError) a job ran past its timeout (recorded as its error)

    UnrecoverableError (Exception)     raised by a processor: no more retries
    RateLimitError (Exception)         raised by a processor: run again later, attempt not spent
    DeadLetterError (UnrecoverableError)  raised by a processor: dead-letter this job now
    JobCancelledError (UnrecoverableError)  what a cancelled job fails with (Queue.cancel_job)
    JobExpiredError (UnrecoverableError)    what a job claimed past its expiry fails with

Bad input raises the built-in ``ValueError`` or ``TypeError`` with the offending field named,
before anything is written to Redis.
"""

from __future__ import annotations

import datetime
import enum


class LazarusError(Exception):
    """Base class of every error lazarus raises on its own account."""


class RedisUnavailableError(LazarusError, ConnectionError):
    """Redis could not be reached; the message names the address that was tried."""


class ScriptError(LazarusError):
    """A Lua script answered with an error code that has no mapping."""


class JobNotFoundError(LazarusError, LookupError):
    """No job with the given id exists in the queue."""


class NotADeadLetterError(LazarusError):
    """The job exists but is not a dead letter (its source queue is unknown); it is untouched."""


class LockLostError(LazarusError):
    """The worker lost the lock of the job (it stalled or was taken over) and cannot finish it."""


class JobStateError(LazarusError):
    """The job is not in a state that allows the operation."""


class JobExistsError(LazarusError):
    """A job with the requested id already exists."""


class JobFailedError(LazarusError):
    """The job :meth:`~lazarus.Job.wait_until_finished` waited for failed for good.

    ``failed_reason`` is its last error's message; when it was dead-lettered,
    ``dead_letter_queue`` and ``dead_letter_id`` say where it went (else ``None``).
    """

    def __init__(
        self,
        job_id: str,
        failed_reason: str,
        *,
        dead_letter_queue: str | None = None,
        dead_letter_id: str | None = None,
    ) -> None:
        where = f" (dead letter {dead_letter_id} in {dead_letter_queue})" if dead_letter_id else ""
        super().__init__(f"job {job_id} failed: {failed_reason}{where}")
        self.job_id = job_id
        self.failed_reason = failed_reason
        self.dead_letter_queue = dead_letter_queue
        self.dead_letter_id = dead_letter_id


class JobTimeoutError(LazarusError, TimeoutError):
    """A job ran longer than its ``timeout``: the worker records it as the attempt's error.

    It is retried or dead-lettered like any other failure, and the dead letter's
    ``error_type`` is ``JobTimeoutError``.
    """


class UnrecoverableError(Exception):
    """Raise from a processor to fail the job at once, without the remaining retries.

    With a dead letter queue configured the job is dead-lettered with reason ``unrecoverable``.
    """


class RateLimitError(Exception):
    """Raise from a processor when a service it calls is rate-limiting it: the job goes back
    to the queue, delayed by ``retry_after_ms``, without spending an attempt.

    Example::

        async def sync(job):
            response = await client.post(...)
            if response.status_code == 429:
                raise RateLimitError(int(response.headers["Retry-After"]) * 1000)
    """

    def __init__(self, retry_after_ms: int = 0, message: str = "") -> None:
        if isinstance(retry_after_ms, bool) or not isinstance(retry_after_ms, int):
            raise TypeError(f"retry_after_ms must be an int, not {type(retry_after_ms).__name__}")
        if retry_after_ms < 0:
            raise ValueError(f"retry_after_ms must be >= 0, got {retry_after_ms}")
        super().__init__(message or f"rate limited: retry after {retry_after_ms} ms")
        self.retry_after_ms = retry_after_ms


class DeadLetterError(UnrecoverableError):
    """Raise from a processor to send the job straight to the dead letter queue.

    The job is dead-lettered with reason ``discarded`` whatever attempts it has left. Without
    a dead letter queue configured it fails terminally, like :class:`UnrecoverableError`.

    Example::

        async def charge(job):
            if job.data["amount"] < 0:
                raise DeadLetterError("negative amount: needs a human")
    """


class JobCancelledError(UnrecoverableError):
    """What a cancelled job fails with (``Queue.cancel_job``): its worker stops the processor
    (or, for a job that had not started, never runs it) and records this as the attempt's
    error. It is not retried: the job goes where its failures go, a dead letter queue with
    reason ``cancelled``, or ``failed``."""


class JobExpiredError(UnrecoverableError):
    """What a job fails with when a worker claims it after its expiry (``expires`` or
    ``expires_at`` of :meth:`~lazarus.Queue.add`): it does not run, and is not retried. It
    goes where its failures go, a dead letter queue with reason ``expired``, or ``failed``."""

    @classmethod
    def claimed_late(cls, expires_at: int, now: int) -> JobExpiredError:
        """The error of a job that expired at ``expires_at`` and was claimed at ``now``."""
        moment = datetime.datetime.fromtimestamp(expires_at / 1000, datetime.timezone.utc)
        return cls(
            f"the job expired at {moment.isoformat(timespec='milliseconds')} before it "
            f"started; a worker claimed it {now - expires_at} ms later"
        )


class ErrorCode(enum.IntEnum):
    """Negative integers a script returns instead of a result; see each script's header."""

    JOB_NOT_FOUND = -1
    LOCK_MISMATCH = -2
    NOT_ACTIVE = -3
    NOT_A_DEAD_LETTER = -4
    JOB_EXISTS = -5
    JOB_STATE = -6


_ERRORS: dict[ErrorCode, type[LazarusError]] = {
    ErrorCode.JOB_NOT_FOUND: JobNotFoundError,
    ErrorCode.LOCK_MISMATCH: LockLostError,
    ErrorCode.NOT_ACTIVE: LockLostError,
    ErrorCode.NOT_A_DEAD_LETTER: NotADeadLetterError,
    ErrorCode.JOB_EXISTS: JobExistsError,
    ErrorCode.JOB_STATE: JobStateError,
}


def error_for_code(code: int, context: str) -> LazarusError:
    """The exception for a script's error ``code``; ``context`` says which job and operation."""
    try:
        known = ErrorCode(code)
    except ValueError:
        return ScriptError(f"{context}: script returned unknown code {code}")
    return _ERRORS[known](f"{context}: {known.name.lower().replace('_', ' ')}")
