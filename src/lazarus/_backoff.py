"""The wait before a retry: the job's own backoff, or the worker's custom strategy.

A job's ``backoff`` of type ``fixed`` or ``exponential`` (optionally jittered) is computed
from the job alone. Any other type names a custom strategy, and the worker's
``backoff_strategy`` callable computes the wait, as BullMQ's ``backoffStrategy`` does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from .job import Job

log = logging.getLogger("lazarus.worker")

BackoffStrategy = Callable[[int, str, BaseException, Job], "int | float | None"]
"""``strategy(attempts_made, backoff_type, error, job)``: milliseconds to wait before the next
attempt, or ``None`` for the job's own ``delay`` (jittered as the job says)."""


def retry_delay(job: Job, error: BaseException, strategy: BackoffStrategy | None) -> int:
    """Milliseconds to wait before retrying ``job``, which just failed with ``error``.

    A strategy that raises or returns something other than a number >= 0 must not lose the
    job: the wait falls back to the job's own ``delay``, and the problem is logged.
    """
    backoff = job.opts.backoff
    if backoff is None:
        return 0
    attempts = job.attempts_made + 1
    if backoff.builtin or strategy is None:
        return backoff.wait_ms(attempts)
    try:
        wait = strategy(attempts, backoff.type, error, job)
    except Exception:
        log.exception("backoff strategy failed for job %s; waiting its delay instead", job.id)
        return backoff.wait_ms(attempts)
    if wait is None:
        return backoff.wait_ms(attempts)
    if isinstance(wait, bool) or not isinstance(wait, (int, float)) or not wait >= 0:
        log.error("backoff strategy returned %r for job %s (not a number of ms >= 0); "
                  "waiting its delay instead", wait, job.id)  # fmt: skip
        return backoff.wait_ms(attempts)
    return int(wait)
