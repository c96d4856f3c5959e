"""Pruning beside a worker: a worker whose jobs go to a dead letter queue prunes that queue by
its retention policy every ``interval`` seconds — when it leads pruning (an expiring lease,
see :mod:`.leadership`). A redriver takes the same lease, so while one runs, workers leave
pruning to it; when none runs, one worker at a time does it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from .._supervision import Incident, pause
from . import leadership, retention

if TYPE_CHECKING:
    from .._connection import Client
    from .._keys import QueueKeys

log = logging.getLogger("lazarus.worker")
MIN_LEASE_MS = 10_000


def lease_ms(interval: float) -> int:
    """How long a pruning lease lasts: three rounds, so a live leader never loses it."""
    return max(int(interval * 3000), MIN_LEASE_MS)


class Pruner:
    """Prunes one dead letter queue every ``interval`` seconds while it leads pruning."""

    def __init__(
        self,
        client: Client,
        keys: QueueKeys,
        max_events: int,
        *,
        holder: str,
        interval: float,
        on_error: Callable[[BaseException, Incident], None],
    ) -> None:
        self._client, self._keys, self._max_events = client, keys, max_events
        self._holder, self._interval, self._on_error = holder, interval, on_error
        self._stop = asyncio.Event()
        self._incident = Incident(log, f"dead letter queue {keys.queue}: pruning")
        self.pruned = 0

    def stop(self) -> None:
        """Ask :meth:`run` to return at its next pause."""
        self._stop.set()

    async def run(self) -> None:
        """Prune now and every ``interval`` until stopped; errors are reported, never raised."""
        while not self._stop.is_set():
            try:
                await self.prune_once()
            except Exception as exc:
                self._on_error(exc, self._incident)
                await pause(self._stop, self._incident.backoff())
                continue
            self._incident.succeeded()
            await pause(self._stop, self._interval)
        try:
            await leadership.release(self._client, self._keys, "prune", self._holder)
        except Exception:  # the lease expires by itself
            log.debug("pruning lease not released", exc_info=True)

    async def prune_once(self) -> int:
        """Prune if this process leads pruning; how many dead letters it pruned."""
        if not await leadership.acquire(
            self._client, self._keys, "prune", self._holder, lease_ms(self._interval)
        ):
            return 0
        policy = await retention.load(self._client, self._keys)
        deleted, archived = await retention.prune(self._client, self._keys, self._max_events,
                                                  policy)  # fmt: skip
        self.pruned += deleted + archived
        return deleted + archived
