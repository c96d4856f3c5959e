"""Worker: claim jobs, run the processor, record the outcome — with leases and stall recovery.

Example::

    async def send(job: Job) -> str:
        await mailer.send(**job.data)
        return "sent"

    worker = Worker("emails", send, concurrency=20, dead_letter_queue="emails-dlq")
    await worker.run()          # until worker.close() is awaited elsewhere

    batch = Worker("emails", send, burst=True, autorun=False)
    ran = await batch.run()     # until the queue has nothing ready to run: the jobs started

Processors may be ``async def`` functions or plain functions (run in daemon threads, one per
running job). A job is processed at least once: make processors idempotent.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from . import _running, _scripts, _shutdown
from ._backoff import BackoffStrategy
from ._burst import Budget
from ._checks import at_least, positive_or_none, seconds
from ._connection import CLIENT_TYPES, Client, address, connect
from ._entry import NonRetryable, check_non_retryable
from ._execution import Processor
from ._failure import DEFAULT_MAX_ERROR_BYTES, DEFAULT_MAX_STACK_BYTES, MIN_CAP_BYTES
from ._keys import QueueKeys, validate_name
from ._lanes import check_weights, make_lanes, queue_names
from ._limiter import RateLimit
from ._listeners import Listeners
from ._processes import check_processes
from ._slot import SlotRunner
from ._supervision import Incident
from ._worker_options import (
    MAX_CONCURRENCY,
    WorkerEvent,
    check_event,
    check_flag,
    dead_letter_options,
    execution_context,
    waits_for_delayed,
    worker_name,
)
from .dead_letter import DeadLetterQueueOptions
from .job_options import MAX_DURATION_MS, KeepPolicy, Retention
from .queue import DEFAULT_MAX_EVENTS
from .schema import PayloadSchema, Schema, with_payload

log = logging.getLogger("lazarus.worker")


class Worker:
    """Processes the jobs of one queue, or of several: ``Worker(["critical", "default"],
    ...)`` claims from them in that order (strict priority), or with ``weights={"critical":
    3, "default": 1}`` in a weighted random order (see docs/workers.md).

    ``dead_letter_queue`` (a queue name or :class:`DeadLetterQueueOptions`) receives jobs that
    fail for good: attempts exhausted, :class:`UnrecoverableError`, :class:`DeadLetterError`,
    or stalled more than ``max_stalled_count`` times. Without it they go to ``failed``.

    With ``autorun`` (the default) a worker created inside a running event loop starts at
    once; otherwise call :meth:`run`. A worker started before Redis answers keeps trying.

    While it has a dead letter queue, a worker also prunes that queue by its retention policy
    every ``prune_interval`` seconds (``None``: never) when no other process (a redriver, or
    another worker) leads pruning.

    ``non_retryable`` lists exception classes and name patterns (``"*Timeout*"``,
    ``"billing.errors.*"``) whose failures skip the remaining attempts: the job is
    dead-lettered at once with reason ``unrecoverable``. A job's ``on_exhaustion`` option
    (``fail`` or ``discard``) overrides the dead letter queue for that job.

    ``job_timeout`` (ms) fails an attempt that runs longer with :class:`JobTimeoutError`,
    unless the job has a ``timeout`` of its own. ``max_error_bytes`` and ``max_stack_bytes``
    cap the message and the stack trace recorded for each failed attempt.

    With ``schema`` (a pydantic model or a callable, see :mod:`lazarus.schema`) the processor
    is called as ``processor(job, payload)`` with the parsed payload; a payload that does not
    parse fails the job as unrecoverable.

    ``backoff_strategy(attempts_made, backoff_type, error, job)`` computes the wait (ms)
    before a retry of a job whose ``backoff`` type is neither ``fixed`` nor ``exponential``.

    ``limiter={"max": n, "duration": ms}`` sets the queue's rate limit when the worker starts:
    at most ``n`` jobs started per ``duration`` ms by all the queue's workers together.
    ``processes=n`` runs a plain-function processor in ``n`` processes instead of threads,
    for CPU-bound work (see docs/workers.md). With ``claim_ahead`` (the default), a slot whose
    jobs take 1 to 50 ms claims its next job while the current one runs (see docs/workers.md).

    With ``burst=True`` the worker ends on its own, as :meth:`close` would, once its queues
    have nothing ready to run (none waiting or prioritized, no delayed job due: later ones are
    not waited for; a paused queue counts as empty) and none of its jobs is running; with
    ``burst_waits_for_delayed=True`` too, it waits for its queues' delayed jobs to fall due
    and runs them (schedules' next occurrences excepted). With ``max_jobs=n`` it ends once it
    has started ``n`` jobs (jobs claimed beyond them go back to the queue unrun). :meth:`run`
    then returns how many jobs it started (see docs/workers.md).
    """

    def __init__(
        self,
        queue_name: str | Sequence[Any],
        processor: Processor,
        *,
        connection: str | Client | None = None,
        prefix: str = "lazarus",
        concurrency: int = 1,
        lock_duration: int = 30_000,
        stalled_interval: int = 30_000,
        max_stalled_count: int = 1,
        autorun: bool = True,
        dead_letter_queue: str | DeadLetterQueueOptions | None = None,
        prune_interval: float | None = 300.0,
        block_timeout: float = 5.0,
        max_events: int = DEFAULT_MAX_EVENTS,
        shutdown_timeout: float = 30.0,
        name: str | None = None,
        job_timeout: int | None = None,
        max_error_bytes: int = DEFAULT_MAX_ERROR_BYTES,
        max_stack_bytes: int = DEFAULT_MAX_STACK_BYTES,
        schema: Schema | None = None,
        backoff_strategy: BackoffStrategy | None = None,
        limiter: Mapping[str, int] | None = None,
        processes: int | None = None,
        weights: Mapping[str, int] | None = None,
        non_retryable: Iterable[NonRetryable] | None = None,
        claim_ahead: bool = True,
        remove_on_complete: Retention = False,
        remove_on_fail: Retention = False,
        burst: bool = False,
        max_jobs: int | None = None,
        burst_waits_for_delayed: bool = False,
    ) -> None:
        if not callable(processor):
            raise TypeError("processor must be callable")
        if backoff_strategy is not None and not callable(backoff_strategy):
            raise TypeError("backoff_strategy must be callable")
        self.backoff_strategy = backoff_strategy
        self.limiter = RateLimit.parse(limiter)
        self.processes = check_processes(processes, processor)
        # The processor is called as processor(job, parsed payload); a job's update_data
        # checks its new payload with the same schema.
        payload_schema = None if schema is None else PayloadSchema(schema)
        if payload_schema is not None:
            processor = with_payload(processor, payload_schema)
        names = queue_names(queue_name)
        self.queue_name, self.queue_names = names[0], tuple(names)
        self.keys = QueueKeys(validate_name(prefix, "prefix"), self.queue_name)
        self.concurrency = at_least(concurrency, "concurrency", maximum=MAX_CONCURRENCY)
        self.lock_duration = at_least(lock_duration, "lock_duration", maximum=MAX_DURATION_MS)
        self.stalled_interval = at_least(
            stalled_interval, "stalled_interval", maximum=MAX_DURATION_MS
        )
        self.max_stalled_count = at_least(max_stalled_count, "max_stalled_count", minimum=0)
        self.dead_letter_queue = dead_letter_options(dead_letter_queue, self.queue_name)
        self.prune_interval = positive_or_none(prune_interval, "prune_interval", "seconds")
        self.non_retryable = check_non_retryable(non_retryable)
        claim_ahead = check_flag(claim_ahead, "claim_ahead")
        self.burst = check_flag(burst, "burst")
        self.burst_waits_for_delayed = waits_for_delayed(burst_waits_for_delayed, self.burst)
        self.max_jobs = None if max_jobs is None else at_least(max_jobs, "max_jobs")
        keep_completed = KeepPolicy.parse(remove_on_complete, "remove_on_complete")
        keep_failed = KeepPolicy.parse(remove_on_fail, "remove_on_fail")
        self.block_timeout = seconds(block_timeout, "block_timeout")
        self.shutdown_timeout = seconds(shutdown_timeout, "shutdown_timeout", zero=True)
        self.job_timeout = (
            None if job_timeout is None
            else at_least(job_timeout, "job_timeout", maximum=MAX_DURATION_MS)
        )  # fmt: skip
        max_events = at_least(max_events, "max_events")
        error_cap = at_least(max_error_bytes, "max_error_bytes", MIN_CAP_BYTES)
        stack_cap = at_least(max_stack_bytes, "max_stack_bytes", MIN_CAP_BYTES)
        self.name = worker_name(name)
        self._wake_key = self.keys.wake(self.name)
        self._processor = processor
        self._owns_client = not isinstance(connection, CLIENT_TYPES)
        self._client = connect(connection, max_connections=None)
        if self._owns_client:  # halves of the slots' calls take turns in Redis and here
            batches = _scripts.coalesced(self._client)
            batches.limit = -(-self.concurrency // _scripts.IN_FLIGHT)
            batches.alone_first = False
        self._ctx = execution_context(self, processor, max_events=max_events, error_cap=error_cap,
                                      stack_cap=stack_cap, keep_completed=keep_completed,
                                      keep_failed=keep_failed)  # fmt: skip
        self._held: dict[str, str] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        # Each running job has a slot of its own, whose reply memo its outcome calls use.
        self._free_slots = [str(i) for i in reversed(range(self.concurrency))]
        self._claim_keys = (*self.keys.group, self.keys.reply(self.name, "claim"))
        self._claim_id = uuid.uuid4().hex  # kept until a claim's reply arrives
        self._slot_freed = asyncio.Event()
        self._listeners = Listeners(log, f"worker {self.name}")
        self._emit = self._listeners.emit
        self._closing = False
        self._stopping = asyncio.Event()  # set by close(): ends backoff pauses at once
        self._starting = False  # registering at start-up: nothing to lose by cancelling
        self._close_called = False
        self._closed = False
        self._woke_itself = False  # its blocking claim was woken when max_jobs were started
        # Counts the jobs started, only for a worker that ends on its own: others' slots test
        # one attribute per job.
        self._budget = Budget(self.max_jobs, self._stop_claiming) \
            if self.burst or self.max_jobs is not None else None  # fmt: skip
        where = f"worker {self.name}"
        self._start_incident = Incident(log, f"{where}: start-up at {address(self._client)}")
        self._claim_incident = Incident(log, f"{where}: claiming jobs")
        self._slots = SlotRunner(
            self._ctx, processor, self.name, self.job_timeout, self._held, self._emit,
            self._report_error, lambda: self._closing, Incident(log, f"{where}: recording"),
            claim_ahead=claim_ahead, schema=payload_schema, budget=self._budget,
        )  # fmt: skip
        self._lanes = make_lanes(self, names, check_weights(weights, names))
        self._run_task: asyncio.Task[int | None] | None = None
        self._blocking = False  # in the blocking claim round trip
        self._clock_offset = 0  # this machine's clock minus the server's, in ms
        self._clock_checked = float("-inf")
        self._background: set[asyncio.Task[Any]] = set()
        if autorun:
            self._run_task = _running.autostart(self)

    # -- events ----------------------------------------------------------------------------

    def on(self, event: WorkerEvent, callback: Callable[..., Any]) -> None:
        """Call ``callback`` on a local event: ``active(job)``, ``completed(job, result)``,
        ``failed(job, error)``, ``retrying(job, error)``, ``deadLettered(job, dead_letter_id)``,
        ``discarded(job, error)``, ``rateLimited(job, error)``, ``lost(job_id)``,
        ``error(exception)``. Callbacks may be sync or async."""
        self._listeners.add(check_event(event), callback)

    def off(self, event: WorkerEvent, callback: Callable[..., Any]) -> None:
        """Stop calling ``callback`` on ``event`` (one never added with :meth:`on` is
        ignored)."""
        self._listeners.remove(check_event(event), callback)

    # -- running ---------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._run_task is not None and not self._run_task.done()

    @property
    def jobs_started(self) -> int | None:
        """How many jobs this worker has started, counted with ``burst`` or ``max_jobs``
        (``None`` without either). A job that fails without its processor running (expired,
        cancelled before it started, unreadable) counts; one claimed and handed back unrun
        does not."""
        return None if self._budget is None else self._budget.started

    async def run(self) -> int | None:
        """Process jobs until :meth:`close`; with ``burst``, until its queues have nothing
        ready to run, and with ``max_jobs`` until it has started that many: then it closes
        itself and returns :attr:`jobs_started` (``None`` for a worker without either).

        Redis errors never end it: an unreachable Redis (at start-up too) is retried with
        backoff, each failure reported to ``error`` listeners and logged without flooding.
        Only settings Redis refuses (a wrong password, a database index it does not have, a
        server that does not speak its protocol) raise :class:`RedisUnavailableError`.
        """
        return await _running.run(self)

    def _stop_claiming(self) -> None:
        """``max_jobs`` were started: claim no more, and let :meth:`run` end (and close the
        worker) once the jobs in flight are done."""
        _shutdown.stop_claiming(self)

    def _mark_lost(self, job_id: str, token: str) -> None:
        # A job that finished while its lease was being renewed is not lost: it is done.
        if any(lane.held.get(job_id) == token for lane in self._lanes):
            log.warning("worker %s: lost the lock of job %s", self.name, job_id)

    def _report_error(self, exc: BaseException, incident: Incident | None = None) -> None:
        """Emit ``error``, and log ``exc`` as part of ``incident`` (without flooding)."""
        if incident is not None:
            incident.failed(exc)
        if self._listeners.has("error"):
            # Listeners may be async: run them beside the loop that hit the error.
            task = asyncio.get_running_loop().create_task(self._emit("error", exc))
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def close(self, timeout: float | None = None) -> None:
        """Stop claiming, let running jobs finish (up to ``timeout`` seconds, by default
        ``shutdown_timeout``), then release the connection. Jobs still running after the
        timeout are cancelled and handed back to the queue at once (a plain function's thread
        cannot be stopped: it is abandoned, and its result is not recorded). A worker that
        closed already (a burst that ended, say) is left as it is."""
        await _shutdown.close(self, timeout)

    async def __aenter__(self) -> Worker:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
