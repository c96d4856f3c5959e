"""lazarus: a Python job queue on Redis in which no failed job is ever lost.

Terminal failures move, atomically, to a dead letter queue with their full history, where
operators inspect, search, replay and purge them.
"""

from __future__ import annotations

from ._limiter import RateLimit
from ._progress import JobLogs
from ._schedule import RepeatableJob
from ._throughput import QueueMetrics
from .dead_letter import (
    DeadLetterCounters,
    DeadLetterFilter,
    DeadLetterPage,
    DeadLetterQueueOptions,
    DeadLetterStats,
    DeadLetterStatus,
    DeadLetterView,
    RetentionPolicy,
    StatusRetention,
)
from .dead_letter.health import DeadLetterHealth
from .errors import (
    DeadLetterError,
    JobCancelledError,
    JobExistsError,
    JobExpiredError,
    JobFailedError,
    JobNotFoundError,
    JobStateError,
    JobTimeoutError,
    LazarusError,
    LockLostError,
    NotADeadLetterError,
    RateLimitError,
    RedisUnavailableError,
    UnrecoverableError,
)
from .events import QueueEvents
from .history import AttemptRecord, DeadLetterMetadata, StatusChange
from .job import Job, JobState
from .job_options import Backoff, JobOptions
from .queue import Queue, list_queues
from .redrive import AlertRule, Redriver, RedriveRule
from .worker import Worker

__version__ = "0.1.0"

__all__ = [
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
