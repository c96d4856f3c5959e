"""``GET /metrics``: queue and dead-letter metrics in the Prometheus text format.

Redis is read asynchronously first (:func:`take_snapshot`); the snapshot is then handed to a
custom collector registered on the app's own ``CollectorRegistry`` (no global registry), and
the registry is rendered at once, with no ``await`` in between, so concurrent scrapes cannot
see each other's snapshot.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterable

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from .._connection import now_ms
from ..dead_letter import DeadLetterCounters
from ..operators import Operators, QueueSummary
from ._deps import ERRORS, Ops

router = APIRouter(tags=["metrics"])


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """What one scrape read from Redis: every queue's summary, the running counters of each
    dead letter queue, and when (ms)."""

    summaries: list[QueueSummary]
    counters: dict[str, DeadLetterCounters]
    taken_at: int


async def take_snapshot(ops: Operators) -> Snapshot:
    """Read everything the metrics need."""
    summaries = await ops.summaries()
    dlqs = [s.name for s in summaries if s.is_dead_letter_queue]
    counters = await asyncio.gather(*(ops.queue(n).get_dead_letter_counters() for n in dlqs))
    return Snapshot(summaries, dict(zip(dlqs, counters)), now_ms())


class LazarusCollector(Collector):
    """Turns the latest :class:`Snapshot` into metric families."""

    def __init__(self) -> None:
        self.snapshot: Snapshot | None = None

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterable[Metric]:
        snap = self.snapshot
        if snap is None:
            return []
        return [*self._queue_metrics(snap), *self._counter_metrics(snap)]

    @staticmethod
    def _queue_metrics(snap: Snapshot) -> list[Metric]:
        jobs = _gauge("lazarus_jobs", "Jobs by queue and state.", "queue", "state")
        paused = _gauge("lazarus_queue_paused", "1 when the queue is paused.", "queue")
        depth = _gauge("lazarus_dead_letters", "Dead letters in each dead letter queue.", "queue")
        age = _gauge(
            "lazarus_oldest_dead_letter_age_seconds",
            "Age of the oldest dead letter of each dead letter queue (0 when it is empty).",
            "queue",
        )
        for s in snap.summaries:
            for state, count in s.counts.items():
                jobs.add_metric([s.name, state], count)
            paused.add_metric([s.name], 1 if s.paused else 0)
            if s.is_dead_letter_queue:
                depth.add_metric([s.name], s.dead_letters)
                oldest = s.oldest_dead_letter_at
                seconds = 0.0 if oldest is None else max(snap.taken_at - oldest, 0) / 1000
                age.add_metric([s.name], seconds)
        return [jobs, paused, depth, age]

    @staticmethod
    def _counter_metrics(snap: Snapshot) -> list[Metric]:
        dead = CounterMetricFamily(
            "lazarus_dead_lettered",
            "Jobs dead-lettered, by dead letter queue, source queue and reason.",
            labels=["queue", "source_queue", "reason"],
        )
        replayed = CounterMetricFamily(
            "lazarus_replayed", "Dead letters replayed.", labels=["queue"]
        )
        purged = CounterMetricFamily("lazarus_purged", "Dead letters purged.", labels=["queue"])
        for name, c in sorted(snap.counters.items()):
            for (source, reason), count in sorted(c.dead_lettered.items()):
                dead.add_metric([name, source, reason], count)
            replayed.add_metric([name], c.replayed)
            purged.add_metric([name], c.purged)
        return [dead, replayed, purged]


def _gauge(name: str, documentation: str, *labels: str) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, labels=list(labels))


class MetricsExporter:
    """One app's registry and collector."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.collector = LazarusCollector()
        self.registry.register(self.collector)

    async def render(self, ops: Operators) -> bytes:
        """Read Redis, then render the registry in the Prometheus text format."""
        snapshot = await take_snapshot(ops)
        self.collector.snapshot = snapshot
        return generate_latest(self.registry)


def _exporter(request: Request) -> MetricsExporter:
    exporter = getattr(request.app.state, "metrics_exporter", None)
    if exporter is None:
        exporter = request.app.state.metrics_exporter = MetricsExporter()
    assert isinstance(exporter, MetricsExporter)
    return exporter


@router.get(
    "/metrics",
    summary="Prometheus metrics",
    response_class=Response,
    responses={
        **ERRORS,
        200: {
            "content": {CONTENT_TYPE_LATEST.split(";")[0]: {"schema": {"type": "string"}}},
            "description": "Metrics in the Prometheus text format.",
        },
    },
)
async def metrics(request: Request, ops: Ops) -> Response:
    """Job counts by state, dead-letter depth and age, and dead-letter counters."""
    body = await _exporter(request).render(ops)
    return Response(body, media_type=CONTENT_TYPE_LATEST)
