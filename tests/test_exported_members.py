"""The public API is pinned: a change to it is a deliberate change to this list."""

from __future__ import annotations

import lazarus


def test_public_api_is_exactly_these_names() -> None:
    assert lazarus.__all__ == [
        "AlertRule",
        "AttemptRecord",
        "Backoff",
        "DeadLetterCounters",
        "DeadLetterError",
        "DeadLetterFilter",
        "DeadLetterHealth",
        "DeadLetterMetadata",
        "DeadLetterPage",
        "DeadLetterQueueOptions",
        "DeadLetterStats",
        "DeadLetterStatus",
        "DeadLetterView",
        "Job",
        "JobCancelledError",
        "JobExistsError",
        "JobExpiredError",
        "JobFailedError",
        "JobLogs",
        "JobNotFoundError",
        "JobOptions",
        "JobState",
        "JobStateError",
        "JobTimeoutError",
        "LazarusError",
        "LockLostError",
        "NotADeadLetterError",
        "Queue",
        "QueueEvents",
        "QueueMetrics",
        "RateLimit",
        "RateLimitError",
        "RedisUnavailableError",
        "RedriveRule",
        "Redriver",
        "RepeatableJob",
        "RetentionPolicy",
        "StatusChange",
        "StatusRetention",
        "UnrecoverableError",
        "Worker",
        "__version__",
        "list_queues",
    ]
    for name in lazarus.__all__:
        assert getattr(lazarus, name) is not None


def test_job_not_found_is_a_lookup_error() -> None:
    assert issubclass(lazarus.JobNotFoundError, LookupError)
    assert issubclass(lazarus.DeadLetterError, lazarus.UnrecoverableError)
