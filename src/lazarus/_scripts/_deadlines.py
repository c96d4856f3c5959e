"""Deadlines of the exchanges on their way, watched by one timer per event loop.

A timer per exchange (``loop.call_later``, or ``asyncio.timeout``) costs about a third of a
bare round trip's client CPU: a handle made, pushed on the loop's heap, cancelled and swept
out again. Exchanges mostly end long before their deadline (seconds), so one timer armed for
the earliest deadline of all serves them all: starting and ending an exchange is one
dictionary write and one delete, and the timer is re-armed only when an exchange must end
sooner than any other on its way, or when it fires.
"""

from __future__ import annotations

import asyncio
import math
import weakref
from collections.abc import Hashable
from typing import Any


class Deadlines:
    """The deadlines of one event loop's exchanges, each under a key (its connection)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._due: dict[Hashable, tuple[float, Any]] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._next = math.inf  # when the timer fires
        self.missed: set[Hashable] = set()  # keys whose deadline passed, until taken

    def start(self, key: Hashable, deadline: float, transport: Any) -> None:
        """Watch ``key`` until :meth:`end`; at ``deadline`` (the loop's clock) abort its
        ``transport``, so that its reads end, and mark it :attr:`missed`."""
        self._due[key] = (deadline, transport)
        if deadline < self._next:
            self._arm(deadline)

    def end(self, key: Hashable) -> bool:
        """Stop watching ``key``; whether its deadline passed."""
        self._due.pop(key, None)
        if self.missed and key in self.missed:
            self.missed.discard(key)
            return True
        return False

    def _arm(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._next = when
        self._timer = self._loop.call_at(when, self._fire)

    def _fire(self) -> None:
        self._timer, self._next = None, math.inf
        now = self._loop.time()
        for key, (deadline, transport) in list(self._due.items()):
            if deadline <= now:
                del self._due[key]
                self.missed.add(key)
                transport.abort()  # replies may still come: the connection is not reused
        if self._due:
            self._arm(min(deadline for deadline, _ in self._due.values()))


_BY_LOOP: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Deadlines] = (
    weakref.WeakKeyDictionary()
)
_last: tuple[Any, Deadlines | None] = (None, None)  # the loop asked last (weakly), its own


def of(loop: asyncio.AbstractEventLoop) -> Deadlines:
    """The deadlines of ``loop``'s exchanges."""
    global _last
    last_loop, found = _last
    if found is not None and last_loop() is loop:
        return found
    found = _BY_LOOP.get(loop)
    if found is None:
        found = _BY_LOOP[loop] = Deadlines(loop)
    _last = (weakref.ref(loop), found)
    return found
