"""Worker: claim jobs, run the processor, record the outcome — with leases and stall recovery.

Example::

    async def send(job: Job) -> str:
        await mailer.send(**job.data)
        return "sent"

    worker = Worker("emails", send, concurrency=20, dead_letter_queue="emails-dlq")
    await worker.run()          # until worker.close() is awaited elsewhere

Processors may be ``async def`` functions or plain functions (run in a thread pool of
``concurrency`` threads). A job is processed at least once: make processors idempotent.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import math
import os
import socket
import uuid
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import NoScriptError

from . import _scripts
from ._connection import TRANSIENT_ERRORS, connect, now_ms, reporting
from ._execution import ClaimedJob, ExecutionContext, Outcome, Processor, finish, parse_claimed
from ._execution import run_processor as _run_processor
from ._keys import QueueKeys, validate_name
from ._lease import LeaseKeeper
from .dead_letter import DeadLetterQueueOptions
from .errors import LockLostError
from .queue import DEFAULT_MAX_EVENTS

log = logging.getLogger("lazarus.worker")

WorkerEvent = Literal["active", "completed", "failed", "deadLettered", "retrying", "error", "lost"]
_EVENTS = ("active", "completed", "failed", "deadLettered", "retrying", "error", "lost")
MAX_BACKOFF = 5.0
CLOCK_CHECK_INTERVAL = 60.0  # seconds between measurements of the server's clock
BLOCK_READ_MARGIN = 10.0  # seconds a blocking claim's reply may lag its timeout


def _block_seconds(timeout: float) -> str:
    """A blocking command's timeout argument: whole milliseconds (at least 1) plus half of one.

    Redis turns fractional seconds into milliseconds by truncation, and 0 means "block
    forever": "0.001" can land just below 1 ms (Redis 6.2 does so) and never time out.
    """
    ms = max(math.ceil(timeout * 1000), 1)
    return f"{(ms + 0.5) / 1000:.4f}"


def _positive(value: object, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{field} must be an int >= 1, got {value!r}")
    return value


class Worker:
    """Processes the jobs of one queue.

    ``dead_letter_queue`` (a queue name or :class:`DeadLetterQueueOptions`) receives jobs that
    fail for good: attempts exhausted, :class:`UnrecoverableError`, :class:`DeadLetterError`,
    or stalled more than ``max_stalled_count`` times. Without it they go to ``failed``.

    With ``autorun`` (the default) a worker created inside a running event loop starts at
    once; otherwise call :meth:`run`.
    """

    def __init__(
        self,
        queue_name: str,
        processor: Processor,
        *,
        connection: str | Redis | None = None,
        prefix: str = "lazarus",
        concurrency: int = 1,
        lock_duration: int = 30_000,
        stalled_interval: int = 30_000,
        max_stalled_count: int = 1,
        autorun: bool = True,
        dead_letter_queue: str | DeadLetterQueueOptions | None = None,
        block_timeout: float = 5.0,
        max_events: int = DEFAULT_MAX_EVENTS,
        shutdown_timeout: float = 30.0,
        name: str | None = None,
    ) -> None:
        if not callable(processor):
            raise TypeError("processor must be callable")
        self.queue_name = validate_name(queue_name, "queue_name")
        self.keys = QueueKeys(validate_name(prefix, "prefix"), queue_name)
        self.concurrency = _positive(concurrency, "concurrency")
        self.lock_duration = _positive(lock_duration, "lock_duration")
        self.stalled_interval = _positive(stalled_interval, "stalled_interval")
        if isinstance(max_stalled_count, bool) or not isinstance(max_stalled_count, int) \
                or max_stalled_count < 0:  # fmt: skip
            raise ValueError(f"max_stalled_count must be an int >= 0, got {max_stalled_count!r}")
        self.max_stalled_count = max_stalled_count
        self.dead_letter_queue = self._dlq_options(dead_letter_queue)
        self.block_timeout = block_timeout
        self.shutdown_timeout = shutdown_timeout
        self.name = name or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._wake_key = self.keys.wake(self.name)
        self._processor = processor
        self._owns_client = not isinstance(connection, Redis)
        self._client = connect(connection, max_connections=None)
        self._check_slots()
        self._ctx = ExecutionContext(
            client=self._client,
            keys=self.keys,
            dlq_keys=QueueKeys(prefix, self.dead_letter_queue.queue_name)
            if self.dead_letter_queue else None,
            token_base=self.name,
            lock_ms=self.lock_duration,
            max_events=max_events,
            executor=None if inspect.iscoroutinefunction(processor)
            else ThreadPoolExecutor(concurrency, thread_name_prefix=f"lazarus-{queue_name}"),
        )  # fmt: skip
        self._held: dict[str, str] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        # Each running job has a slot of its own, whose reply memo its outcome calls use.
        self._free_slots = [str(i) for i in reversed(range(self.concurrency))]
        self._claim_keys = (*self.keys.group, self.keys.reply(self.name, "claim"))
        self._claim_id = uuid.uuid4().hex  # kept until a claim's reply arrives
        self._slot_freed = asyncio.Event()
        self._listeners: dict[str, list[Callable[..., Any]]] = defaultdict(list)
        self._closing = False
        self._run_task: asyncio.Task[None] | None = None
        self._blocking = False  # in the blocking claim round trip
        self._clock_offset = 0  # this machine's clock minus the server's, in ms
        self._clock_checked = float("-inf")
        self._background: set[asyncio.Task[Any]] = set()
        if autorun:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                loop = None
            if loop is not None:
                self._run_task = loop.create_task(self.run())

    def _dlq_options(
        self, value: str | DeadLetterQueueOptions | None
    ) -> DeadLetterQueueOptions | None:
        if value is None:
            return None
        options = DeadLetterQueueOptions(value) if isinstance(value, str) else value
        if not isinstance(options, DeadLetterQueueOptions):
            raise TypeError("dead_letter_queue must be a queue name or DeadLetterQueueOptions")
        if options.queue_name == self.queue_name:
            raise ValueError("dead_letter_queue must not be the worker's own queue")
        return options

    def _check_slots(self) -> None:
        if self.dead_letter_queue is None or not isinstance(self._client, RedisCluster):
            return
        own = self._client.keyslot(self.keys.wait)
        other = self._client.keyslot(
            QueueKeys(self.keys.prefix, self.dead_letter_queue.queue_name).wait
        )
        if own != other:
            raise ValueError(
                f"queue {self.queue_name!r} and dead_letter_queue "
                f"{self.dead_letter_queue.queue_name!r} hash to different cluster slots; "
                "give both names the same hash tag, for example 'payments' and "
                "'{payments}-dlq'"
            )

    # -- events ----------------------------------------------------------------------------

    def on(self, event: WorkerEvent, callback: Callable[..., Any]) -> None:
        """Call ``callback`` on a local event: ``active(job)``, ``completed(job, result)``,
        ``failed(job, error)``, ``retrying(job, error)``, ``deadLettered(job, dead_letter_id)``,
        ``lost(job_id)``, ``error(exception)``. Callbacks may be sync or async."""
        if event not in _EVENTS:
            raise ValueError(f"unknown worker event {event!r}; expected one of {_EVENTS}")
        self._listeners[event].append(callback)

    async def _emit(self, event: str, *args: Any) -> None:
        for callback in list(self._listeners.get(event, ())):
            try:
                result = callback(*args)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("worker %s: %r listener failed", self.name, event)

    # -- running ---------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._run_task is not None and not self._run_task.done()

    async def run(self) -> None:
        """Process jobs until :meth:`close`."""
        current = asyncio.current_task()
        if (
            self._run_task is not None
            and self._run_task is not current
            and not self._run_task.done()
        ):
            await asyncio.shield(self._run_task)
            return
        self._run_task = current
        # The dead letter queue is registered too: the dead-letter script writes to it without
        # going through Queue, and list_queues (the CLI, the API, the dashboard) must show it.
        names = [self.queue_name]
        if self.dead_letter_queue is not None:
            names.append(self.dead_letter_queue.queue_name)
        async with reporting(self._client):  # the first call names an unreachable address
            await self._client.sadd(self.keys.registry, *names)
            if self.dead_letter_queue is not None:
                await self._client.sadd(self.keys.dead_letter_registry, names[-1])
        keeper = LeaseKeeper(
            self._ctx, lambda: dict(self._held),
            stalled_interval_ms=self.stalled_interval, max_stalled_count=self.max_stalled_count,
            on_lost=self._mark_lost, on_error=self._report_error,
        )  # fmt: skip
        lease_task = asyncio.create_task(keeper.run())
        try:
            await self._main_loop()
            # Leases are renewed until the jobs in flight are done (close() bounds the wait).
            while self._tasks:
                await asyncio.wait(set(self._tasks))
        finally:
            keeper.stop()
            _, pending = await asyncio.wait({lease_task}, timeout=self.shutdown_timeout)
            for task in pending:
                task.cancel()

    async def _main_loop(self) -> None:
        failures = 0
        idle = False
        next_due = -1
        while not self._closing:
            free = self.concurrency - len(self._tasks)
            if free <= 0:
                self._slot_freed.clear()
                await self._slot_freed.wait()
                continue
            try:
                if idle:
                    claimed, next_due = await self._wait_and_claim(free, next_due)
                else:
                    claimed, next_due = await self._claim(free)
                # Fewer jobs than free slots: the queue is drained for now. A job added from
                # here on sets the marker, so the next call may block at once.
                idle = len(claimed) < free
                failures = 0
            except TRANSIENT_ERRORS as exc:
                failures += 1
                idle = False
                self._report_error(exc)
                await asyncio.sleep(min(0.1 * 2**failures, MAX_BACKOFF))
                continue
            for job in claimed:  # started even when closing: they are claimed
                self._start(job)

    def _claim_args(self, count: int) -> list[Any]:
        return [now_ms(), self.name, self.lock_duration, count, self._ctx.max_events,
                self._claim_id]  # fmt: skip

    async def _claim(self, count: int) -> tuple[list[ClaimedJob], int]:
        reply = await _scripts.load("claim_jobs")(
            self._client, self._claim_keys, self._claim_args(count)
        )
        return self._claimed(reply)

    def _claimed(self, reply: list[Any]) -> tuple[list[ClaimedJob], int]:
        # A claim sent again after its reply was lost returns the jobs its first run claimed;
        # once a reply is in, the next claim is a new call.
        self._claim_id = uuid.uuid4().hex
        jobs = [parse_claimed(item, self.queue_name) for item in reply[1:]]
        return [j for j in jobs if j is not None], int(reply[0])

    async def _wait_and_claim(self, count: int, next_due: int) -> tuple[list[ClaimedJob], int]:
        """Block until a job may be ready (the marker), the next delayed job is due, or
        close() (this worker's wake key), then claim: one round trip.

        The claim is sent behind the BZPOPMIN on the same connection, and Redis runs it as
        soon as the pop returns, so a woken worker has its jobs without asking again. It runs
        on the server's clock corrected to ours, since its send time is stale by then.
        """
        if asyncio.get_running_loop().time() >= self._clock_checked + CLOCK_CHECK_INTERVAL:
            await self._check_clock()
        timeout = self.block_timeout
        if next_due >= 0:
            timeout = min(timeout, max((next_due - now_ms()) / 1000, 0.001))
        script = _scripts.load("claim_jobs")
        claim = script.command(self._claim_keys, [*self._claim_args(count), self._clock_offset])
        self._blocking = True  # from here on, close() wakes this call instead of cancelling
        try:
            if self._closing:
                return [], next_due
            _, reply = await _scripts.execute(
                self._client,
                [("BZPOPMIN", self.keys.marker, self._wake_key, _block_seconds(timeout)), claim],
                timeout=timeout + BLOCK_READ_MARGIN,
                # Not sent again on a dropped connection, where a second BZPOPMIN could block
                # for long: the main loop claims instead, with the same call id.
                repeatable=False,
            )
        finally:
            self._blocking = False
        if isinstance(reply, NoScriptError):
            reply = await script(self._client, self._claim_keys, self._claim_args(count))
        elif isinstance(reply, Exception):
            raise reply
        return self._claimed(reply)

    async def _check_clock(self) -> None:
        """Measure this machine's clock against the server's (to the round trip's precision)."""
        before = now_ms()
        seconds, micros = await self._client.time()
        after = now_ms()
        self._clock_offset = (before + after) // 2 - (seconds * 1000 + micros // 1000)
        self._clock_checked = asyncio.get_running_loop().time()

    def _start(self, claimed: ClaimedJob) -> None:
        slot = self._free_slots.pop()
        task = asyncio.create_task(self._work(claimed, slot))
        self._tasks.add(task)
        task.add_done_callback(lambda done: self._task_done(done, slot))

    def _task_done(self, task: asyncio.Task[None], slot: str) -> None:
        self._tasks.discard(task)
        self._free_slots.append(slot)
        self._slot_freed.set()

    async def _work(self, claimed: ClaimedJob | None, slot: str) -> None:
        """Run jobs one after another in this slot while the outcome script hands out more."""
        while claimed is not None:
            self._held[claimed.job.id] = claimed.token
            claimed = await self._execute(claimed, slot)

    async def _execute(self, claimed: ClaimedJob, slot: str) -> ClaimedJob | None:
        job = claimed.job
        await self._emit("active", job)
        result: Any = None
        error: BaseException | None = None
        try:
            result = await _run_processor(self._processor, job, self._ctx.executor)
        except Exception as exc:
            error = exc
        # No more renewals once the outcome is on its way: a renewal racing the outcome
        # script would find the job finished and report a lock that was not lost. If
        # recording outlasts the lease, the job stalls and runs again (at least once).
        self._held.pop(job.id, None)
        outcome, next_job = await self._record(claimed, result, error, slot)
        if outcome is not None:
            await self._announce(job, outcome)
        return next_job

    async def _record(
        self, claimed: ClaimedJob, result: Any, error: BaseException | None, slot: str
    ) -> tuple[Outcome | None, ClaimedJob | None]:
        """Record the outcome, retrying transient Redis errors until the lease would expire."""
        deadline = now_ms() + self.lock_duration
        attempt = 0
        while True:
            try:
                return await finish(self._ctx, claimed, result, error, not self._closing, slot)
            except LockLostError as exc:
                log.warning("worker %s: %s; the outcome is dropped", self.name, exc)
                await self._emit("lost", claimed.job.id)
                return None, None
            except TRANSIENT_ERRORS as exc:
                attempt += 1
                self._report_error(exc)
                if now_ms() >= deadline:
                    log.error("worker %s: giving up on job %s; it will stall and be retried",
                              self.name, claimed.job.id)  # fmt: skip
                    return None, None
                await asyncio.sleep(min(0.05 * 2**attempt, MAX_BACKOFF))

    async def _announce(self, job: Any, outcome: Outcome) -> None:
        if outcome.kind == "completed":
            await self._emit("completed", job, outcome.result)
        elif outcome.kind == "retrying":
            await self._emit("retrying", job, outcome.error)
        else:
            await self._emit("failed", job, outcome.error)
            if outcome.kind == "dead_lettered":
                await self._emit("deadLettered", job, outcome.dead_letter_id)

    def _mark_lost(self, job_id: str, token: str) -> None:
        # A job that finished while its lease was being renewed is not lost: it is done.
        if self._held.get(job_id) == token:
            log.warning("worker %s: lost the lock of job %s", self.name, job_id)

    def _report_error(self, exc: BaseException) -> None:
        log.warning("worker %s: %s: %s", self.name, type(exc).__name__, exc)
        if self._listeners.get("error"):
            # Listeners may be async: run them beside the loop that hit the error.
            task = asyncio.get_running_loop().create_task(self._emit("error", exc))
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def close(self, timeout: float | None = None) -> None:
        """Stop claiming, let running jobs finish (up to ``timeout`` seconds, by default
        ``shutdown_timeout``), then release the connection. Jobs still running after the
        timeout are cancelled; their leases expire and another worker retries them."""
        self._closing = True
        self._slot_freed.set()
        woken = self._blocking and await self._wake()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (timeout or self.shutdown_timeout)
        # The run() task, unless close() is called from inside it.
        run_task = self._run_task if self._run_task is not asyncio.current_task() else None
        if run_task is not None:
            if self._blocking and not woken:  # Redis is unreachable: no reply to lose
                run_task.cancel()
            # run() returns once the jobs in flight are done, renewing their leases meanwhile.
            await asyncio.wait({run_task}, timeout=max(deadline - loop.time(), 0))
        if self._tasks:  # close() from inside run(), or run() was cancelled
            _, pending = await asyncio.wait(
                set(self._tasks), timeout=max(deadline - loop.time(), 0)
            )
            await self._cancel(pending)
        if run_task is not None:
            if not run_task.done():
                run_task.cancel()
            await asyncio.gather(run_task, return_exceptions=True)
        if woken:  # the loop may have left before popping it
            with contextlib.suppress(*TRANSIENT_ERRORS):
                await self._client.delete(self._wake_key)
        if self._ctx.executor is not None:
            self._ctx.executor.shutdown(wait=False)
        if self._owns_client:
            await self._client.aclose()

    async def _wake(self) -> bool:
        """Wake this worker's blocking claim through Redis (cancelling it could lose the reply
        of a claim that already ran). False when Redis could not be told."""
        try:
            async with self._client.pipeline(transaction=True) as pipe:
                pipe.zadd(self._wake_key, {"close": 0})
                pipe.pexpire(self._wake_key, int((self.block_timeout + 60) * 1000))
                await pipe.execute()
        except TRANSIENT_ERRORS:
            return False
        return True

    @staticmethod
    async def _cancel(tasks: set[asyncio.Task[None]]) -> None:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def __aenter__(self) -> Worker:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
