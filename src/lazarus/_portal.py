"""A private event loop in a background thread, for the synchronous API (``lazarus.sync``).

Redis clients of ``redis.asyncio`` belong to the event loop they first ran on. Code without a
loop of its own (Flask, Django, scripts) that calls ``asyncio.run(queue.add(...))`` per request
gets a new loop each time, and the second call finds the client's connections tied to the
first, closed one. A portal keeps one loop alive in a daemon thread instead: every call from
any thread is handed to that loop, so the async objects only ever see one loop.

After ``os.fork()`` the child has no such thread (threads do not survive a fork): the portal
notices the new process id and starts a loop of its own there.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")


class Portal:
    """Runs coroutines on a private event loop thread and waits for their results."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()
        self._closed = False

    @property
    def forked(self) -> bool:
        """Whether this process is a child forked after the portal's loop started."""
        return self._pid != os.getpid()

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._closed:
                raise RuntimeError(f"{self._name} is closed")
            if self.forked:  # the parent's thread did not come along: start afresh
                self._loop, self._thread, self._pid = None, None, os.getpid()
            if self._loop is None:
                loop = asyncio.new_event_loop()
                ready = threading.Event()
                thread = threading.Thread(
                    target=_serve, args=(loop, ready), name=f"lazarus-sync-{self._name}",
                    daemon=True,  # a forgotten close() must not keep the process alive
                )  # fmt: skip
                thread.start()
                ready.wait()
                self._loop, self._thread = loop, thread
            return self._loop

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the portal's loop and return its result (or raise its error)."""
        try:
            loop = self._ensure_loop()
        except BaseException:
            coro.close()  # never awaited: say so quietly instead of warning
            raise
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("a synchronous lazarus call cannot run on its own loop thread")
        future: Future[T] = asyncio.run_coroutine_threadsafe(coro, loop)
        return future.result()

    def close(self) -> None:
        """Stop the loop and wait for its thread; later calls raise ``RuntimeError``."""
        with self._lock:
            self._closed = True
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None or self.forked:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()


def _serve(loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
    asyncio.set_event_loop(loop)
    loop.call_soon(ready.set)
    loop.run_forever()
