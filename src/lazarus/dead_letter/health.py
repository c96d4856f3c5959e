"""The health of a dead letter queue, from its counters and indexes only (no entry is read):
ingestion rate, backlog, resolution rate, time in the DLQ, error types, replay success rate.

- Ingestion: the per-minute arrival buckets of the queue's meta hash.
- Backlog and statuses: the size of each status index.
- Resolution rate: ``resolved / (resolved + failed + archived)``, the share of the dead letters
  that reached an end and were resolved (``None`` before any did).
- Time in the DLQ: the age of the dead letters waiting for a decision (``pending`` and
  ``manual``), mean and 95th percentile, from up to :data:`SAMPLES` evenly spaced ranks of
  each status index (exact up to that many; the ranks of an arrival-ordered index are its
  age quantiles).
- Error types: the store's count hash.
- Replay success rate: of the replays whose outcome a redriver saw, the share that did not
  come back (counters ``count:redrive:succeeded`` and ``count:redrive:failed``).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from . import stats, store
from .filters import DeadLetterFilter, DeadLetterStatus, check_now

if TYPE_CHECKING:
    from .._connection import Client
    from .._keys import QueueKeys

SAMPLES = 101  # ranks read per status index for the time in the DLQ
INGESTION_WINDOW = 5  # minutes the ingestion rate is averaged over
WAITING = ("pending", "manual")
ENDED = ("resolved", "failed", "archived")


@dataclasses.dataclass(frozen=True)
class DeadLetterHealth:
    """What :meth:`~lazarus.Queue.get_dead_letter_health` measured; times in seconds, rates
    per minute, shares from 0 to 1 (``None`` when there is nothing to measure yet)."""

    ingestion_per_minute: float
    backlog: int
    by_status: dict[str, int]
    resolution_rate: float | None
    time_in_dlq_mean: float | None
    time_in_dlq_p95: float | None
    error_types: dict[str, int]
    replay_success_rate: float | None
    replays_succeeded: int
    replays_failed: int
    pruned_deleted: int
    pruned_archived: int
    measured_at: int

    def to_json(self) -> dict[str, object]:
        """The camelCase form the HTTP API returns."""
        return {
            "ingestionPerMinute": self.ingestion_per_minute,
            "backlog": self.backlog,
            "byStatus": self.by_status,
            "resolutionRate": self.resolution_rate,
            "timeInDlqMean": self.time_in_dlq_mean,
            "timeInDlqP95": self.time_in_dlq_p95,
            "errorTypes": self.error_types,
            "replaySuccessRate": self.replay_success_rate,
            "replaysSucceeded": self.replays_succeeded,
            "replaysFailed": self.replays_failed,
            "prunedDeleted": self.pruned_deleted,
            "prunedArchived": self.pruned_archived,
            "measuredAt": self.measured_at,
        }


async def measure(client: Client, keys: QueueKeys, now: int | None = None) -> DeadLetterHealth:
    """Measure the health of the dead letter queue of ``keys``."""
    at = check_now(now)
    statuses = [s.value for s in DeadLetterStatus]
    async with client.pipeline(transaction=False) as pipe:
        for status in statuses:
            pipe.zcard(keys.dl_index("s", status))
        pipe.hmget(keys.meta, _COUNTERS)
        replies = await pipe.execute()
    by_status = {s: int(n) for s, n in zip(statuses, replies[:-1]) if int(n)}
    counters = dict(zip(_COUNTERS, (int(v or 0) for v in replies[-1])))
    rate = await stats.rate(client, keys, INGESTION_WINDOW, at)
    mean, p95 = await _time_in_dlq(client, keys, by_status, at)
    groups = await store.grouped_counts(client, keys, DeadLetterFilter())
    ended = sum(by_status.get(s, 0) for s in ENDED)
    succeeded, failed = counters["count:redrive:succeeded"], counters["count:redrive:failed"]
    return DeadLetterHealth(
        ingestion_per_minute=sum(c for _, c in rate) / INGESTION_WINDOW,
        backlog=by_status.get("pending", 0),
        by_status=by_status,
        resolution_rate=by_status.get("resolved", 0) / ended if ended else None,
        time_in_dlq_mean=mean,
        time_in_dlq_p95=p95,
        error_types=dict(sorted((groups or {}).get("e", {}).items(), key=lambda kv: -kv[1])),
        replay_success_rate=succeeded / (succeeded + failed) if succeeded + failed else None,
        replays_succeeded=succeeded,
        replays_failed=failed,
        pruned_deleted=counters["count:pruned:deleted"],
        pruned_archived=counters["count:pruned:archived"],
        measured_at=at,
    )


_COUNTERS = [
    "count:redrive:succeeded", "count:redrive:failed", "count:pruned:deleted",
    "count:pruned:archived",
]  # fmt: skip


async def _time_in_dlq(
    client: Client, keys: QueueKeys, by_status: dict[str, int], now: int
) -> tuple[float | None, float | None]:
    """Mean and 95th percentile age (s) of the waiting dead letters, from sampled ranks."""
    plan: list[tuple[str, float, list[int]]] = []
    for status in WAITING:
        n = by_status.get(status, 0)
        if n:
            count = min(n, SAMPLES)
            ranks = sorted({round(k * (n - 1) / max(count - 1, 1)) for k in range(count)})
            plan.append((status, n / len(ranks), ranks))
    if not plan:
        return None, None
    async with client.pipeline(transaction=False) as pipe:
        for status, _, ranks in plan:
            for rank in ranks:
                pipe.zrange(keys.dl_index("s", status), rank, rank, withscores=True)
        replies = iter(await pipe.execute())
    samples: list[tuple[float, float]] = []  # (age in s, weight)
    for _, weight, ranks in plan:
        for _ in ranks:
            reply = next(replies)
            if reply:
                samples.append((max(now - int(reply[0][1]) // 1000, 0) / 1000, weight))
    if not samples:
        return None, None
    total = sum(w for _, w in samples)
    mean = sum(a * w for a, w in samples) / total
    samples.sort()
    seen = 0.0
    p95 = samples[-1][0]
    for age, weight in samples:
        seen += weight
        if seen >= 0.95 * total:
            p95 = age
            break
    return mean, p95
