"""The upkeep methods of :class:`~lazarus.Queue` as a dead letter queue: its retention policy,
pruning, and its health."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._connection import reports_unavailable
from .._keys import QueueKeys
from . import health, retention
from .filters import check_now

if TYPE_CHECKING:
    from .._connection import Client


class DeadLetterUpkeepMixin:
    """Retention, pruning and health of a dead letter queue."""

    keys: QueueKeys
    max_events: int
    _client: Client

    @reports_unavailable
    async def set_retention_policy(self, policy: retention.RetentionPolicy) -> None:
        """Store ``policy`` as this dead letter queue's retention policy, for every process
        (redrivers and workers prune by it).

        Example::

            await dlq.set_retention_policy(RetentionPolicy(max_age="P30D", prune="archive"))
        """
        await retention.store(self._client, self.keys, retention.check_policy(policy))

    @reports_unavailable
    async def get_retention_policy(self) -> retention.RetentionPolicy:
        """This dead letter queue's retention policy (the default one until one is set)."""
        return await retention.load(self._client, self.keys)

    @reports_unavailable
    async def prune_dead_letters(self, *, now: int | None = None) -> int:
        """Apply the retention policy now: delete or archive what it no longer keeps, oldest
        first, in bounded batches; returns how many dead letters were pruned. ``now`` (ms)
        replaces the clock, for previews and tests."""
        at = check_now(now)  # before anything is written
        policy = await retention.load(self._client, self.keys)
        deleted, archived = await retention.prune(
            self._client, self.keys, self.max_events, policy, now=at
        )
        return deleted + archived

    @reports_unavailable
    async def get_dead_letter_health(self, *, now: int | None = None) -> health.DeadLetterHealth:
        """Ingestion rate, backlog, resolution rate, time in the DLQ, error types and replay
        success rate of this dead letter queue, from counters and indexes (no entry is read).
        """
        return await health.measure(self._client, self.keys, now)
