"""Alerts on the health of a dead letter queue: rules (seed defaults: ingestion above 100 a
minute, backlog above 10,000, resolution rate below 0.5), their evaluation against
:class:`~lazarus.dead_letter.DeadLetterHealth`, and the same rules as a Prometheus
alerting-rules file.

A redriver evaluates its alert rules periodically; an alert that starts or stops firing is
logged, recorded as an ``alert`` event on the dead letter queue's events stream and handed to
the redriver's ``on_alert`` hook (where webhooks plug in).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Literal

from ..dead_letter import DeadLetterHealth

Metric = Literal[
    "ingestion_per_minute", "backlog", "resolution_rate", "time_in_dlq_mean", "time_in_dlq_p95",
    "replay_success_rate",
]  # fmt: skip
# The Prometheus series of each metric (see lazarus.http.metrics), labelled by queue.
PROMETHEUS_NAMES: dict[str, str] = {
    "ingestion_per_minute": "lazarus_dlq_ingestion_per_minute",
    "backlog": "lazarus_dlq_backlog",
    "resolution_rate": "lazarus_dlq_resolution_rate",
    "time_in_dlq_mean": "lazarus_dlq_time_in_dlq_mean_seconds",
    "time_in_dlq_p95": "lazarus_dlq_time_in_dlq_p95_seconds",
    "replay_success_rate": "lazarus_dlq_replay_success_rate",
}
Severity = Literal["warning", "critical"]
State = Literal["firing", "resolved"]


@dataclasses.dataclass(frozen=True)
class AlertRule:
    """Fire when ``metric`` (a field of the DLQ's health) is ``op`` (``>`` or ``<``)
    ``threshold``. A metric with no value yet (a rate with nothing to measure) never fires.

    Example::

        AlertRule("BigBacklog", "backlog", ">", 500, severity="critical")
    """

    name: str
    metric: Metric
    op: Literal[">", "<"]
    threshold: float
    severity: Severity = "warning"

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ValueError(f"name must be an identifier such as 'HighBacklog', got {self.name!r}")
        if self.metric not in PROMETHEUS_NAMES:
            raise ValueError(f"metric must be one of {', '.join(PROMETHEUS_NAMES)}")
        if self.op not in (">", "<"):
            raise ValueError(f"op must be '>' or '<', got {self.op!r}")
        value = self.threshold
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
        ):
            raise TypeError("threshold must be a finite number")
        if self.severity not in ("warning", "critical"):
            raise ValueError(f"severity must be 'warning' or 'critical', got {self.severity!r}")

    def fires(self, health: DeadLetterHealth) -> tuple[bool, float | None]:
        """Whether the rule fires on ``health``, and the value it looked at."""
        value = getattr(health, self.metric)
        if value is None:
            return False, None
        return (value > self.threshold if self.op == ">" else value < self.threshold), value


DEFAULT_ALERTS = (
    AlertRule("HighDLQIngestionRate", "ingestion_per_minute", ">", 100, "warning"),
    AlertRule("DLQBacklogGrowing", "backlog", ">", 10_000, "critical"),
    AlertRule("LowResolutionRate", "resolution_rate", "<", 0.5, "warning"),
)


@dataclasses.dataclass(frozen=True)
class Alert:
    """An alert that started (``firing``) or stopped (``resolved``) on queue ``queue``; for
    a dead letter flagged for manual review, ``dead_letter_id`` names it."""

    name: str
    queue: str
    severity: Severity
    state: State
    value: float | None
    message: str
    at: int
    dead_letter_id: str | None = None


class AlertBook:
    """Which alert rules fire now, so that only changes are reported."""

    def __init__(self) -> None:
        self.firing: set[str] = set()

    def evaluate(
        self, rules: Sequence[AlertRule], health: DeadLetterHealth, queue: str
    ) -> list[Alert]:
        """The alerts that started or stopped firing since the last evaluation."""
        changes: list[Alert] = []
        for rule in rules:
            fires, value = rule.fires(health)
            if fires == (rule.name in self.firing):
                continue
            state: State = "firing" if fires else "resolved"
            (self.firing.add if fires else self.firing.discard)(rule.name)
            message = f"{rule.metric} = {value} ({rule.op} {rule.threshold}) on {queue}"
            changes.append(Alert(rule.name, queue, rule.severity, state, value,
                                 message, health.measured_at))  # fmt: skip
        return changes


def prometheus_rules(rules: Sequence[AlertRule] = DEFAULT_ALERTS, *, for_: str = "5m") -> str:
    """``rules`` as a Prometheus alerting-rules file (YAML), over the series of ``/metrics``."""
    lines = ["groups:", "  - name: lazarus-dead-letter-queues", "    rules:"]
    for rule in rules:
        expr = f"{PROMETHEUS_NAMES[rule.metric]} {rule.op} {rule.threshold:g}"
        lines += [
            f"      - alert: {rule.name}",
            f"        expr: {expr}",
            f"        for: {for_}",
            "        labels:",
            f"          severity: {rule.severity}",
            "        annotations:",
            f'          summary: "{rule.metric} {rule.op} {rule.threshold:g} on dead letter'
            ' queue {{ $labels.queue }}"',
        ]
    return "\n".join(lines) + "\n"
