"""Fresh ids: job ids (random version 4 UUIDs) and dead letter ids (112 random bits), made
ahead in batches. ``lazarus._keys`` hands them on with the key names they go into."""

from __future__ import annotations

import collections
import os
from collections.abc import Callable


class _MadeAhead:
    """Random ids made ahead, :data:`AHEAD` at a time from one read of the system's random
    source (a system call per id was the largest single cost of making one). Taken with
    ``popleft``, which is atomic: threads never get the same id; a forked child drops its
    parent's, which the parent hands out too."""

    AHEAD = 128

    def __init__(self, size: int, make: Callable[[bytearray], bytearray]) -> None:
        self._size, self._make = size, make  # bytes per id, and those bytes as used
        self._ids: collections.deque[str] = collections.deque()
        os.register_at_fork(after_in_child=self._ids.clear)

    def take(self) -> str:
        while True:
            try:
                return self._ids.popleft()
            except IndexError:  # none left: make more (other threads may take them first)
                raw, size = bytearray(os.urandom(self._size * self.AHEAD)), self._size
                make = self._make
                self._ids.extend([make(raw[i : i + size]).hex() for i in range(0, len(raw), size)])


def _uuid4(raw: bytearray) -> bytearray:
    raw[6] = raw[6] & 0x0F | 0x40  # version 4
    raw[8] = raw[8] & 0x3F | 0x80  # RFC 4122 variant
    return raw


_job_ids = _MadeAhead(16, _uuid4)
_dead_letter_ids = _MadeAhead(14, lambda raw: raw)  # 112 random bits


def new_id() -> str:
    """A fresh id: a random (version 4) UUID as 32 hex digits, as ``uuid.uuid4().hex`` makes
    it, at a fraction of the cost (one is made per job added)."""
    return _job_ids.take()


def new_dead_letter_id() -> str:
    """A fresh dead letter id: 28 random hex digits (112 bits). A dead letter's id sits in five
    index entries and the original-id map; at 28 characters each copy fits Redis's 32-byte
    allocation, where a 32-digit id takes 48 (16 bytes saved per entry, ~96 per dead letter)."""
    return _dead_letter_ids.take()
