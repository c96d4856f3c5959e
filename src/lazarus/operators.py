"""What the operator surfaces (CLI, HTTP API, dashboard, metrics) share: one Redis client, the
key prefix, and queue summaries. Everything else they do is a call to
:class:`~lazarus.Queue`; this module adds no behaviour of its own.
"""

from __future__ import annotations

import asyncio
import dataclasses

from ._connection import CLIENT_TYPES, Client, connect, reporting
from ._keys import validate_name, validate_queue_name
from .dead_letter import DeadLetterView
from .queue import Queue, list_queues
from .workers import list_workers


@dataclasses.dataclass(frozen=True)
class QueueSummary:
    """One queue as an operator sees it. Times are ms since the epoch."""

    name: str
    counts: dict[str, int]
    paused: bool
    is_dead_letter_queue: bool
    dead_letters: int
    oldest_dead_letter_at: int | None
    workers: int = 0  # live workers (lazarus.workers): "running" means at least one


class Operators:
    """Shared state of the operator surfaces; build one per process (no globals)."""

    def __init__(
        self,
        *,
        connection: str | Client | None = None,
        prefix: str = "lazarus",
    ) -> None:
        self.prefix = validate_name(prefix, "prefix")
        self._owns_client = not isinstance(connection, CLIENT_TYPES)
        self.client = connect(connection)
        self._queues: dict[str, Queue] = {}
        self._view: DeadLetterView | None = None

    def queue(self, name: str) -> Queue:
        """The queue called ``name`` (validated: a bad name raises ``ValueError``)."""
        queue = self._queues.get(name)
        if queue is None:
            validate_queue_name(name, "queue")
            queue = Queue(name, connection=self.client, prefix=self.prefix)
            if len(self._queues) < 1000:
                self._queues[name] = queue
        return queue

    @property
    def view(self) -> DeadLetterView:
        """Every dead letter queue of the prefix at once, on the shared client."""
        if self._view is None:
            self._view = DeadLetterView(self.client, prefix=self.prefix)
        return self._view

    async def queue_names(self) -> list[str]:
        return await list_queues(self.client, prefix=self.prefix)

    async def ping(self) -> None:
        """Raise :class:`~lazarus.RedisUnavailableError` unless Redis answers."""
        async with reporting(self.client):
            await self.client.ping()

    async def summary(self, name: str) -> QueueSummary:
        queue = self.queue(name)
        counts, paused, oldest, workers = await asyncio.gather(
            queue.get_job_counts(), queue.is_paused(), queue.get_oldest_dead_letter_at(),
            list_workers(self.client, queue.keys),
        )  # fmt: skip
        counters = await queue.get_dead_letter_counters()
        is_dlq = oldest is not None or bool(counters.dead_lettered)
        depth = await queue.get_dead_letter_count() if is_dlq else 0
        return QueueSummary(name, counts, paused, is_dlq, depth, oldest, len(workers))

    async def summaries(self) -> list[QueueSummary]:
        """A summary of every queue under the prefix, by name."""
        return [await self.summary(name) for name in await self.queue_names()]

    async def close(self) -> None:
        if self._owns_client:
            await self.client.aclose()
