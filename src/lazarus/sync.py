"""The synchronous API: :class:`Queue`, :class:`DeadLetterView` and :func:`list_queues` for
code without an event loop — Django and Flask views, scripts, notebooks.

Example::

    from lazarus.sync import Queue

    queue = Queue("emails", connection="redis://localhost:6379/0")   # module level is fine

    def signup(request):                       # any thread, any number of them
        queue.add("welcome", {"to": request.form["email"]}, attempts=3)

Each object owns a private event loop in a daemon thread, where its ``lazarus.Queue`` lives;
every method hands its call to that loop and waits for the result. The methods are the async
classes' own, wrapped once: they validate, build keys and raise exactly as the async ones do.
The objects are safe to share between threads, and survive ``os.fork()`` (a child opens its
own connections on first use). Workers stay async: run them with ``lazarus worker`` or
``asyncio.run``.
"""

from __future__ import annotations

import functools
import os
import weakref
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, Concatenate, Generic, ParamSpec, Protocol, TypeVar

from . import queue as _async_queue
from ._codec import DEFAULT_MAX_PAYLOAD_BYTES
from ._portal import Portal
from .dead_letter.bulk import DEFAULT_BATCH
from .dead_letter.filters import DeadLetterFilter
from .dead_letter.view import DeadLetterView as _AsyncView
from .queue import DEFAULT_MAX_EVENTS
from .queue import Queue as _AsyncQueue
from .schema import Schema

P = ParamSpec("P")
T = TypeVar("T")
A = TypeVar("A", bound="_Closable")


class _Closable(Protocol):
    async def close(self) -> None: ...


class _Shell(Generic[A]):
    """Holds one async object on a private loop; remakes it in a forked child."""

    def __init__(self, make: Callable[[], A], label: str) -> None:
        self._make = make
        self._portal = Portal(label)
        self._target = make()
        self._pid = os.getpid()
        # A shell dropped without close() still stops its loop thread.
        self._finalizer = weakref.finalize(self, self._portal.close)

    def _async(self) -> A:
        if self._pid != os.getpid():  # the parent's connections must not be shared
            self._target, self._pid = self._make(), os.getpid()
        return self._target

    def close(self) -> None:
        """Close the connections, then stop the private loop; the object is unusable after."""
        if self._finalizer.alive:
            try:
                if self._pid == os.getpid():
                    self._portal.run(self._target.close())
            finally:
                self._finalizer()

    def __enter__(self) -> _Shell[A]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _blocking(
    method: Callable[Concatenate[Any, P], Coroutine[Any, Any, T]],
) -> Callable[Concatenate[_Shell[Any], P], T]:
    """The synchronous twin of an async method: the same arguments, checks and errors."""

    @functools.wraps(method)
    def call(self: _Shell[Any], /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._portal.run(method(self._async(), *args, **kwargs))

    return call


class Queue(_Shell[_AsyncQueue]):
    """A :class:`lazarus.Queue` for synchronous code: the same methods, without ``await``.

    ``connection`` is a Redis URL (by default ``LAZARUS_REDIS_URL``); the other options are
    those of :class:`lazarus.Queue`.
    """

    def __init__(
        self,
        name: str,
        *,
        connection: str | None = None,
        prefix: str = "lazarus",
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
        max_events: int = DEFAULT_MAX_EVENTS,
        schema: Schema | None = None,
    ) -> None:
        if connection is not None and not isinstance(connection, str):
            raise TypeError("connection must be a Redis URL (the sync API opens its own client)")

        def make() -> _AsyncQueue:
            return _AsyncQueue(
                name, connection=connection, prefix=prefix,
                max_payload_bytes=max_payload_bytes, max_events=max_events, schema=schema,
            )  # fmt: skip

        super().__init__(make, f"queue-{name}")
        self.name = self._target.name
        self.prefix = self._target.prefix

    def __enter__(self) -> Queue:
        return self

    add = _blocking(_AsyncQueue.add)
    add_bulk = _blocking(_AsyncQueue.add_bulk)
    get_job = _blocking(_AsyncQueue.get_job)
    get_job_state = _blocking(_AsyncQueue.get_job_state)
    get_waiting = _blocking(_AsyncQueue.get_waiting)
    get_active = _blocking(_AsyncQueue.get_active)
    get_prioritized = _blocking(_AsyncQueue.get_prioritized)
    get_delayed = _blocking(_AsyncQueue.get_delayed)
    get_completed = _blocking(_AsyncQueue.get_completed)
    get_failed = _blocking(_AsyncQueue.get_failed)
    get_job_counts = _blocking(_AsyncQueue.get_job_counts)
    get_waiting_count = _blocking(_AsyncQueue.get_waiting_count)
    get_active_count = _blocking(_AsyncQueue.get_active_count)
    get_delayed_count = _blocking(_AsyncQueue.get_delayed_count)
    get_prioritized_count = _blocking(_AsyncQueue.get_prioritized_count)
    get_completed_count = _blocking(_AsyncQueue.get_completed_count)
    get_failed_count = _blocking(_AsyncQueue.get_failed_count)
    pause = _blocking(_AsyncQueue.pause)
    resume = _blocking(_AsyncQueue.resume)
    is_paused = _blocking(_AsyncQueue.is_paused)
    remove = _blocking(_AsyncQueue.remove)
    clean = _blocking(_AsyncQueue.clean)
    obliterate = _blocking(_AsyncQueue.obliterate)
    retry_job = _blocking(_AsyncQueue.retry_job)
    retry_jobs = _blocking(_AsyncQueue.retry_jobs)
    promote_job = _blocking(_AsyncQueue.promote_job)
    promote_jobs = _blocking(_AsyncQueue.promote_jobs)
    change_job = _blocking(_AsyncQueue.change_job)
    update_job_data = _blocking(_AsyncQueue.update_job_data)
    change_job_priority = _blocking(_AsyncQueue.change_job_priority)
    change_job_delay = _blocking(_AsyncQueue.change_job_delay)
    cancel_job = _blocking(_AsyncQueue.cancel_job)
    drain = _blocking(_AsyncQueue.drain)
    # The dead letter operations.
    get_dead_letter_count = _blocking(_AsyncQueue.get_dead_letter_count)
    get_dead_letter_jobs = _blocking(_AsyncQueue.get_dead_letter_jobs)
    peek_dead_letter = _blocking(_AsyncQueue.peek_dead_letter)
    find_dead_letter_by_original_id = _blocking(_AsyncQueue.find_dead_letter_by_original_id)
    search_dead_letters = _blocking(_AsyncQueue.search_dead_letters)
    find_dead_letters = _blocking(_AsyncQueue.find_dead_letters)
    count_dead_letters = _blocking(_AsyncQueue.count_dead_letters)
    get_dead_letter_stats = _blocking(_AsyncQueue.get_dead_letter_stats)
    get_oldest_dead_letter_at = _blocking(_AsyncQueue.get_oldest_dead_letter_at)
    get_dead_letter_rate = _blocking(_AsyncQueue.get_dead_letter_rate)
    get_dead_letter_counters = _blocking(_AsyncQueue.get_dead_letter_counters)
    replay_dead_letter = _blocking(_AsyncQueue.replay_dead_letter)
    replay_all_dead_letters = _blocking(_AsyncQueue.replay_all_dead_letters)
    purge_dead_letter = _blocking(_AsyncQueue.purge_dead_letter)
    purge_dead_letters = _blocking(_AsyncQueue.purge_dead_letters)
    get_dead_letter_tally = _blocking(_AsyncQueue.get_dead_letter_tally)
    migrate_dead_letters = _blocking(_AsyncQueue.migrate_dead_letters)
    # the dead letter lifecycle, retention and health
    set_dead_letter_status = _blocking(_AsyncQueue.set_dead_letter_status)
    flag_dead_letter = _blocking(_AsyncQueue.flag_dead_letter)
    reopen_dead_letter = _blocking(_AsyncQueue.reopen_dead_letter)
    archive_dead_letter = _blocking(_AsyncQueue.archive_dead_letter)
    get_max_replays = _blocking(_AsyncQueue.get_max_replays)
    set_max_replays = _blocking(_AsyncQueue.set_max_replays)
    settle_dead_letters = _blocking(_AsyncQueue.settle_dead_letters)
    get_retention_policy = _blocking(_AsyncQueue.get_retention_policy)
    set_retention_policy = _blocking(_AsyncQueue.set_retention_policy)
    prune_dead_letters = _blocking(_AsyncQueue.prune_dead_letters)
    get_dead_letter_health = _blocking(_AsyncQueue.get_dead_letter_health)
    # logs and progress, deduplication, rate limits, schedules
    get_job_logs = _blocking(_AsyncQueue.get_job_logs)
    add_job_log = _blocking(_AsyncQueue.add_job_log)
    update_job_progress = _blocking(_AsyncQueue.update_job_progress)
    get_deduplication_job_id = _blocking(_AsyncQueue.get_deduplication_job_id)
    remove_deduplication_key = _blocking(_AsyncQueue.remove_deduplication_key)
    get_global_rate_limit = _blocking(_AsyncQueue.get_global_rate_limit)
    set_global_rate_limit = _blocking(_AsyncQueue.set_global_rate_limit)
    remove_global_rate_limit = _blocking(_AsyncQueue.remove_global_rate_limit)
    get_rate_limit_ttl = _blocking(_AsyncQueue.get_rate_limit_ttl)
    set_global_concurrency = _blocking(_AsyncQueue.set_global_concurrency)
    remove_global_concurrency = _blocking(_AsyncQueue.remove_global_concurrency)
    get_global_concurrency = _blocking(_AsyncQueue.get_global_concurrency)
    get_metrics = _blocking(_AsyncQueue.get_metrics)
    get_repeatable_jobs = _blocking(_AsyncQueue.get_repeatable_jobs)
    remove_repeatable = _blocking(_AsyncQueue.remove_repeatable)
    remove_repeatable_by_key = _blocking(_AsyncQueue.remove_repeatable_by_key)

    def iter_dead_letter_ids(
        self, filter: DeadLetterFilter | None = None, *, batch_size: int = DEFAULT_BATCH
    ) -> Iterator[tuple[str, str]]:
        """``(dead letter id, source queue)`` of every match, oldest first, fetched batch by
        batch as the loop goes on (see :meth:`lazarus.Queue.iter_dead_letter_ids`)."""
        walk = self._async().iter_dead_letter_ids(filter, batch_size=batch_size)

        async def step() -> tuple[str, str] | None:
            return await anext(walk, None)

        while (row := self._portal.run(step())) is not None:
            yield row


class DeadLetterView(_Shell[_AsyncView]):
    """A :class:`lazarus.DeadLetterView` for synchronous code: every dead letter queue of a
    prefix, without ``await``."""

    def __init__(self, connection: str | None = None, *, prefix: str = "lazarus") -> None:
        if connection is not None and not isinstance(connection, str):
            raise TypeError("connection must be a Redis URL (the sync API opens its own client)")
        super().__init__(lambda: _AsyncView(connection, prefix=prefix), "dead-letters")

    def __enter__(self) -> DeadLetterView:
        return self

    dead_letter_queues = _blocking(_AsyncView.dead_letter_queues)
    count = _blocking(_AsyncView.count)
    stats = _blocking(_AsyncView.stats)
    find_by_original_id = _blocking(_AsyncView.find_by_original_id)
    get = _blocking(_AsyncView.get)
    search = _blocking(_AsyncView.search)


def list_queues(connection: str | None = None, *, prefix: str = "lazarus") -> list[str]:
    """The names of every queue under ``prefix`` (see :func:`lazarus.list_queues`)."""
    portal = Portal("list-queues")
    try:
        return portal.run(_async_queue.list_queues(connection, prefix=prefix))
    finally:
        portal.close()


__all__ = ["DeadLetterView", "Queue", "list_queues"]
