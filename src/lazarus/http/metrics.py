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
from .._throughput import QueueMetrics
from ..dead_letter import DeadLetterCounters, DeadLetterHealth
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
    health: dict[str, DeadLetterHealth] = dataclasses.field(default_factory=dict)
    throughput: dict[str, QueueMetrics] = dataclasses.field(default_factory=dict)


async def take_snapshot(ops: Operators) -> Snapshot:
    """Read everything the metrics need."""
    summaries = await ops.summaries()
    dlqs = [s.name for s in summaries if s.is_dead_letter_queue]
    counters = await asyncio.gather(*(ops.queue(n).get_dead_letter_counters() for n in dlqs))
    health = await asyncio.gather(*(ops.queue(n).get_dead_letter_health() for n in dlqs))
    names = [s.name for s in summaries]
    throughput = await asyncio.gather(*(ops.queue(n).get_metrics(1) for n in names))
    return Snapshot(
        summaries, dict(zip(dlqs, counters)), now_ms(), dict(zip(dlqs, health)),
        dict(zip(names, throughput)),
    )  # fmt: skip


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
        return [
            *self._queue_metrics(snap), *self._counter_metrics(snap), *_health_metrics(snap)
        ]  # fmt: skip

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
        completed = CounterMetricFamily(
            "lazarus_jobs_completed", "Jobs that completed.", labels=["queue"]
        )
        failed = CounterMetricFamily(
            "lazarus_jobs_failed",
            "Jobs that failed for good (into failed, a dead letter queue, or discarded).",
            labels=["queue"],
        )
        for name, m in sorted(snap.throughput.items()):
            completed.add_metric([name], m.completed)
            failed.add_metric([name], m.failed)
        return [dead, replayed, purged, completed, failed]


# Gauges of each dead letter queue's health (lazarus.redrive.alerts names them in its rules).
_HEALTH_GAUGES = (
    ("lazarus_dlq_ingestion_per_minute", "ingestion_per_minute",
     "Dead letters arriving per minute (mean of the last 5 minutes)."),
    ("lazarus_dlq_backlog", "backlog", "Dead letters pending a decision."),
    ("lazarus_dlq_resolution_rate", "resolution_rate",
     "Share of the dead letters that reached an end and were resolved."),
    ("lazarus_dlq_time_in_dlq_mean_seconds", "time_in_dlq_mean",
     "Mean age of the dead letters waiting for a decision."),
    ("lazarus_dlq_time_in_dlq_p95_seconds", "time_in_dlq_p95",
     "95th percentile age of the dead letters waiting for a decision."),
    ("lazarus_dlq_replay_success_rate", "replay_success_rate",
     "Share of the redriver's replays that did not come back."),
)  # fmt: skip


def _health_metrics(snap: Snapshot) -> list[Metric]:
    """The health gauges of each dead letter queue; a share with nothing to measure yet is
    left out rather than reported as 0."""
    gauges = [(_gauge(name, doc, "queue"), field) for name, field, doc in _HEALTH_GAUGES]
    statuses = _gauge("lazarus_dlq_dead_letters_by_status", "Dead letters by status.",
                      "queue", "status")  # fmt: skip
    errors = _gauge("lazarus_dlq_error_types", "Dead letters by error type.",
                    "queue", "error_type")  # fmt: skip
    pruned = CounterMetricFamily("lazarus_dlq_pruned", "Dead letters pruned by retention.",
                                 labels=["queue", "action"])  # fmt: skip
    for name, health in sorted(snap.health.items()):
        for gauge, field in gauges:
            value = getattr(health, field)
            if value is not None:
                gauge.add_metric([name], value)
        for status, count in health.by_status.items():
            statuses.add_metric([name, status], count)
        for error_type, count in health.error_types.items():
            errors.add_metric([name, error_type], count)
        pruned.add_metric([name, "delete"], health.pruned_deleted)
        pruned.add_metric([name, "archive"], health.pruned_archived)
    return [*(g for g, _ in gauges), statuses, errors, pruned]


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
