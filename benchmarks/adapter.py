"""What a benchmarked library must provide: the seam between workloads and a queue library.

A workload (``workloads.py``) only talks to these two protocols, so a peer library (arq, saq,
dramatiq, bullmq, ...) is benchmarked by writing one adapter module beside
``lazarus_bench.py``; the workloads themselves do not change.

* :class:`QueueAdapter` is the library: it opens a :class:`BenchQueue` in a fresh namespace.
* :class:`BenchQueue` is one queue (and its dead letter queue, if the library has them) in that
  namespace. ``close`` deletes everything the namespace holds.

Libraries without dead letter queues set ``supports_dead_letters = False``; the workloads that
need them then report "n/a" for that library instead of a figure.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Literal, Protocol

Payload = dict[str, Any]

Behaviour = Literal["noop", "sleep_10ms", "raise", "raise_unrecoverable"]
"""What the processor does with each job.

``noop`` returns ``None``; ``sleep_10ms`` awaits ``asyncio.sleep(0.01)``; ``raise`` raises an
ordinary exception (the job has one attempt, so it fails for good); ``raise_unrecoverable``
raises the library's "do not retry" error (lazarus: ``UnrecoverableError``), which sends the
job straight to the dead letter queue.
"""


@dataclasses.dataclass(frozen=True)
class Hooks:
    """Callbacks a worker makes on the benchmark's behalf; both must be cheap and sync.

    ``on_finished()`` once per job that reached a terminal state (completed, failed or dead
    lettered), from the worker's local events. ``on_start(enqueued_at_ms)`` at the start of
    the processor, with the time (ms since the epoch) the library recorded the job as added.
    """

    on_finished: Callable[[], None]
    on_start: Callable[[float], None] | None = None


class BenchQueue(Protocol):
    """One queue of the library under test, in a namespace of its own."""

    async def add(self, payload: Payload) -> None:
        """Add one job with default options."""

    async def add_bulk(self, payloads: Sequence[Payload]) -> None:
        """Add many jobs in one call (the library's bulk API)."""

    def worker(
        self, behaviour: Behaviour, *, concurrency: int, hooks: Hooks, dead_letter: bool = False
    ) -> AbstractAsyncContextManager[None]:
        """A worker running in this event loop from ``__aenter__`` until ``__aexit__``.

        With ``dead_letter`` jobs that fail for good go to the dead letter queue.
        """

    async def dead_letter_count(self) -> int:
        """Dead letters waiting in the dead letter queue."""

    async def replay_all_dead_letters(self) -> int:
        """Replay every dead letter into the source queue; returns how many."""

    async def purge_dead_letters(self) -> int:
        """Delete every dead letter; returns how many."""

    async def used_memory(self) -> int:
        """The server's ``used_memory`` (bytes) from ``INFO memory``."""

    async def memory_details(self) -> dict[str, float]:
        """Library-specific breakdown of what the dead letters occupy (for the JSON report)."""

    async def close(self) -> None:
        """Delete every key of this namespace and release connections."""


class QueueAdapter(Protocol):
    """A library under test."""

    name: str
    supports_dead_letters: bool

    def versions(self) -> dict[str, str]:
        """Versions of the library and its client packages, for the report."""

    async def open(self, namespace: str) -> BenchQueue:
        """A queue in ``namespace``, which no other measurement uses."""


class NotSupportedError(Exception):
    """The library cannot run this workload (for example: it has no dead letter queue)."""
