"""Local event callbacks, for :class:`~lazarus.Worker` and :class:`~lazarus.QueueEvents`:
each may be a plain function or a coroutine function, and one that raises is logged without
keeping the others from running."""

from __future__ import annotations

import inspect
import logging
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any


class Listeners:
    """Callbacks by event name. ``where`` names their owner in the log line of a failure."""

    def __init__(self, log: logging.Logger, where: str) -> None:
        self._log = log
        self._where = where
        self._callbacks: dict[str, list[Callable[..., Any]]] = defaultdict(list)

    def add(self, event: str, callback: Callable[..., Any]) -> None:
        if not callable(callback):
            raise TypeError(f"callback must be callable, got {callback!r}")
        self._callbacks[event].append(callback)

    def remove(self, event: str, callback: Callable[..., Any]) -> None:
        """Stop calling ``callback`` for ``event`` (once per time it was added); one never
        added is ignored."""
        callbacks = self._callbacks.get(event, [])
        if callback in callbacks:
            callbacks.remove(callback)

    def has(self, event: str) -> bool:
        """Whether any callback listens to ``event``."""
        return bool(self._callbacks.get(event))

    async def emit(self, event: str, *args: Any, to: Iterable[str] = ()) -> None:
        """Call the callbacks of ``event`` (and of the events in ``to``) with ``args``, in
        the order they were added; await those that return an awaitable."""
        callbacks = list(self._callbacks.get(event, ()))
        for name in to:
            callbacks += self._callbacks.get(name, ())
        for callback in callbacks:
            try:
                result = callback(*args)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                self._log.exception("%s: %r listener failed", self._where, event)
