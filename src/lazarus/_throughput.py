"""Throughput metrics: how many of a queue's jobs completed and how many failed for good,
per minute over the last two hours and in all (``Queue.get_metrics``).

The outcome scripts count them in the queue's ``metrics`` hash as they record each outcome
(``includes/metrics.lua``), so a count is exact whatever the workers: a job that runs twice
(a worker killed after running it) is recorded, and counted, once.
"""

from __future__ import annotations

import dataclasses

from ._codec import text
from ._connection import Client, reports_unavailable
from ._keys import QueueKeys
from .dead_letter.filters import check_now

METRICS_MINUTES = 120  # as includes/metrics.lua keeps them


@dataclasses.dataclass(frozen=True)
class QueueMetrics:
    """A queue's outcomes: totals since the queue was created, and per minute (``(minute
    start in ms, count)`` pairs, oldest first, zeros included) over the minutes asked for.
    ``failed`` counts the jobs that failed for good: into ``failed``, into a dead letter
    queue, or discarded."""

    completed: int
    failed: int
    completed_per_minute: list[tuple[int, int]]
    failed_per_minute: list[tuple[int, int]]


def parse_metrics(fields: dict[str, int], minutes: int, current: int) -> QueueMetrics:
    """The metrics of a ``metrics`` hash read as ``fields`` (values as ints), with the last
    ``minutes`` minutes up to minute ``current``."""
    totals = {"c": 0, "f": 0}
    per_minute: dict[str, dict[int, int]] = {"c": {}, "f": {}}
    for field, count in fields.items():
        kind, _, minute = field.partition(":")
        if kind not in totals:
            continue
        totals[kind] += count
        if minute:
            per_minute[kind][int(minute)] = count
    first = current - minutes + 1
    series = {
        kind: [(m * 60_000, per_minute[kind].get(m, 0)) for m in range(first, current + 1)]
        for kind in totals
    }
    return QueueMetrics(totals["c"], totals["f"], series["c"], series["f"])


def check_minutes(minutes: object) -> int:
    if isinstance(minutes, bool) or not isinstance(minutes, int):
        raise TypeError(f"minutes must be an int, not {type(minutes).__name__}")
    if not 1 <= minutes <= METRICS_MINUTES:
        raise ValueError(f"minutes must be from 1 to {METRICS_MINUTES}, got {minutes}")
    return minutes


class ThroughputMixin:
    """The throughput half of :class:`~lazarus.Queue`."""

    keys: QueueKeys
    _client: Client

    @reports_unavailable
    async def get_metrics(self, minutes: int = 60, *, now: int | None = None) -> QueueMetrics:
        """How many of this queue's jobs completed and failed for good: in all, and per
        minute over the last ``minutes`` (1 to 120) up to ``now`` (ms; by default this
        machine's clock)."""
        minutes = check_minutes(minutes)
        current = check_now(now) // 60_000
        raw = await self._client.hgetall(self.keys.metrics)
        fields = {text(k): int(v) for k, v in raw.items()}
        return parse_metrics(fields, minutes, current)
