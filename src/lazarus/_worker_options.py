"""The checks of :class:`~lazarus.Worker`'s options and event names: each raises naming the
option, before the worker writes anything or connects. And the execution context, which the
worker's slots run jobs in, made of its checked options."""

from __future__ import annotations

import os
import socket
import uuid
from typing import TYPE_CHECKING, Literal

from ._execution import ExecutionContext, Processor
from ._keys import QueueKeys, validate_name
from ._processes import executor_for
from .dead_letter import DeadLetterQueueOptions
from .job_options import KeepPolicy

if TYPE_CHECKING:
    from .worker import Worker

WorkerEvent = Literal[
    "active",
    "completed",
    "failed",
    "deadLettered",
    "discarded",
    "retrying",
    "rateLimited",
    "error",
    "lost",
]
EVENTS = (
    "active", "completed", "failed", "deadLettered", "discarded", "retrying", "rateLimited",
    "error", "lost",
)  # fmt: skip

MAX_CONCURRENCY = 100_000


def check_event(event: object) -> str:
    if event not in EVENTS:
        raise ValueError(f"unknown worker event {event!r}; expected one of {EVENTS}")
    return str(event)


def check_flag(value: object, field: str) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{field} must be a bool, got {value!r}")
    return value


def waits_for_delayed(value: object, burst: bool) -> bool:
    """``burst_waits_for_delayed``, which only a burst worker takes."""
    if check_flag(value, "burst_waits_for_delayed") and not burst:
        raise ValueError("burst_waits_for_delayed applies to a burst worker only (burst=True)")
    return bool(value)


def dead_letter_options(
    value: str | DeadLetterQueueOptions | None, queue_name: str
) -> DeadLetterQueueOptions | None:
    """The dead letter queue of a worker of ``queue_name``."""
    if value is None:
        return None
    options = DeadLetterQueueOptions(value) if isinstance(value, str) else value
    if not isinstance(options, DeadLetterQueueOptions):
        raise TypeError("dead_letter_queue must be a queue name or DeadLetterQueueOptions")
    if options.queue_name == queue_name:
        raise ValueError("dead_letter_queue must not be the worker's own queue")
    return options


def worker_name(name: str | None) -> str:
    """``name`` checked, or one of this host and process, unique to this worker."""
    if name is not None:
        return validate_name(name, "name")
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def execution_context(
    worker: Worker, processor: Processor, *, max_events: int, error_cap: int, stack_cap: int,
    keep_completed: KeepPolicy, keep_failed: KeepPolicy,
) -> ExecutionContext:  # fmt: skip
    """The context the slots of ``worker`` (of its first queue) run jobs in."""
    dlq = worker.dead_letter_queue
    return ExecutionContext(
        client=worker._client,
        keys=worker.keys,
        dlq_keys=QueueKeys(worker.keys.prefix, dlq.queue_name) if dlq else None,
        token_base=worker.name,
        lock_ms=worker.lock_duration,
        max_events=max_events,
        executor=executor_for(processor, worker.queue_name, worker.processes),
        max_error_bytes=error_cap,
        max_stack_bytes=stack_cap,
        backoff_strategy=worker.backoff_strategy,
        non_retryable=worker.non_retryable,
        keep_completed=keep_completed,
        keep_failed=keep_failed,
    )  # fmt: skip
