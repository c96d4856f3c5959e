"""The threads plain-function processors run in.

``ThreadPoolExecutor`` does not fit a worker: its threads are joined when the interpreter
exits, so one processor that never returns keeps the process alive after ``close()``; and a
thread whose job timed out still counts against its ``max_workers``, so a few hung calls
would starve every later job. Here each call runs in an idle daemon thread, or in a new one
when none is idle: an abandoned call keeps only its own thread, and the process can exit.
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any, TypeVar

T = TypeVar("T")

_WorkItem = tuple[Future[Any], Callable[..., Any], tuple[Any, ...], dict[str, Any]]


class DaemonThreadPool(Executor):
    """Runs each call in a daemon thread, reusing idle ones; never joins them."""

    def __init__(self, thread_name_prefix: str) -> None:
        self._prefix = thread_name_prefix
        self._work: queue.SimpleQueue[_WorkItem | None] = queue.SimpleQueue()
        # Counts idle threads not yet promised to a submitted call (as ThreadPoolExecutor).
        self._idle = threading.Semaphore(0)
        self._numbers = itertools.count(1)
        self._lock = threading.Lock()
        self._threads = 0
        self._shutdown = False

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        """Run ``fn(*args, **kwargs)`` in an idle thread, or in a new one."""
        with self._lock:
            if self._shutdown:
                raise RuntimeError("cannot submit after shutdown")
            future: Future[T] = Future()
            self._work.put((future, fn, args, kwargs))
            if not self._idle.acquire(blocking=False):
                self._threads += 1
                threading.Thread(
                    target=self._serve, name=f"{self._prefix}_{next(self._numbers)}", daemon=True
                ).start()
        return future

    def _serve(self) -> None:
        while True:
            item = self._work.get()
            if item is None:
                return
            future, fn, args, kwargs = item
            del item
            if future.set_running_or_notify_cancel():
                try:
                    result = fn(*args, **kwargs)
                except BaseException as exc:  # SystemExit and the like belong to the job
                    future.set_exception(exc)
                else:
                    future.set_result(result)
            del future, fn, args, kwargs  # nothing of the job outlives it in an idle thread
            self._idle.release()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Let idle threads end; busy ones end after their call. Never waits for them:
        ``wait`` is accepted for the ``Executor`` interface only."""
        with self._lock:
            self._shutdown = True
            for _ in range(self._threads):
                self._work.put(None)
