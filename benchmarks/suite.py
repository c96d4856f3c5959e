"""The suite: which workloads run, at what size, and the table rows (metrics) they feed."""

from __future__ import annotations

import dataclasses
from typing import Literal

import workloads
from workloads import Workload

# Sizes (jobs, or dead letters) of the full run and of ``--quick``.
FULL_SIZES = {
    "add": 20_000, "add_50": 20_000, "add_bulk": 50_000, "drain_noop_10": 20_000,
    "drain_noop_50": 20_000,
    "drain_noop_200": 20_000, "drain_sleep_50": 20_000, "drain_sleep_200": 20_000,
    "failure": 20_000, "replay": 100_000, "purge": 100_000,
    "memory": 10_000, "latency": 2_500,
}  # fmt: skip
QUICK_SIZES = {
    "add": 2_000, "add_50": 2_000, "add_bulk": 5_000, "drain_noop_10": 2_000,
    "drain_noop_50": 2_000,
    "drain_noop_200": 2_000, "drain_sleep_50": 2_000, "drain_sleep_200": 2_000,
    "failure": 2_000, "replay": 10_000, "purge": 10_000,
    "memory": 2_000, "latency": 500,
}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Target:
    """A figure the project promises: ``op`` is ``>=`` (at least) or ``<=`` (at most)."""

    op: Literal[">=", "<="]
    value: float

    def met(self, figure: float) -> bool:
        return figure >= self.value if self.op == ">=" else figure <= self.value

    def __str__(self) -> str:
        sign = "≥" if self.op == ">=" else "≤"
        return f"{sign} {self.value:,.2f}" if self.value < 10 else f"{sign} {self.value:,.0f}"


@dataclasses.dataclass(frozen=True)
class Metric:
    """One row of the results table, fed by the figure ``key`` of workload ``workload``."""

    key: str
    workload: str
    label: str
    unit: str
    concurrency: str
    target: Target | None = None


METRICS = (
    Metric("add", "add", "add, one by one (sequential awaits)", "jobs/s", "1",
           Target(">=", 8_000)),
    Metric("round_trips", "add", "floor: PING after PING, bare connection (ceiling.py)",
           "round trips/s", "1"),
    Metric("add_client_cpu_us", "add", "add, one by one: client CPU per add", "µs", "1",
           Target("<=", 70)),
    Metric("round_trip_cpu_us", "add", "floor: client CPU per bare round trip", "µs", "1"),
    Metric("add_50", "add_50", "add, 50 producers side by side", "jobs/s", "50",
           Target(">=", 12_000)),
    Metric("add_bulk", "add_bulk", "add_bulk, chunks of 1,000", "jobs/s", "1",
           Target(">=", 60_000)),
    Metric("drain_noop_10", "drain_noop_10", "drain no-op jobs, 1 worker", "jobs/s", "10",
           Target(">=", 10_000)),
    Metric("drain_noop_10_share", "drain_noop_10", "drain / Redis ceiling (ceiling.py)", "ratio",
           "10", Target(">=", 0.7)),
    Metric("drain_noop_50", "drain_noop_50", "drain no-op jobs, 1 worker", "jobs/s", "50",
           Target(">=", 10_000)),
    Metric("drain_noop_50_share", "drain_noop_50", "drain / Redis ceiling (ceiling.py)", "ratio",
           "50", Target(">=", 0.7)),
    Metric("drain_noop_200", "drain_noop_200", "drain no-op jobs, 1 worker", "jobs/s", "200"),
    Metric("drain_sleep_50", "drain_sleep_50", "drain 10 ms sleep jobs, 1 worker", "jobs/s", "50"),
    Metric("drain_sleep_200", "drain_sleep_200", "drain 10 ms sleep jobs, 1 worker", "jobs/s",
           "200"),
    Metric("drain_sleep_200_share", "drain_sleep_200",
           "drain / min(20,000 jobs/s, Redis ceiling)", "ratio", "200", Target(">=", 0.9)),
    Metric("fail", "failure", "failing jobs → failed (no DLQ)", "jobs/s", "50"),
    Metric("fail_dlq", "failure", "failing jobs → dead letter queue", "jobs/s", "50"),
    Metric("dlq_ratio", "failure", "DLQ path / failed path", "ratio", "50",
           Target(">=", 0.95)),
    Metric("replay", "replay", "replay_all_dead_letters()", "dead letters/s", "—",
           Target(">=", 20_000)),
    Metric("purge", "purge", "purge_dead_letters()", "dead letters/s", "—", Target(">=", 50_000)),
    Metric("memory", "memory", "Redis memory per dead letter", "bytes", "—"),
    Metric("latency_p50", "latency", "pickup latency p50 (500 jobs/s offered)", "ms", "10"),
    Metric("latency_p99", "latency", "pickup latency p99 (500 jobs/s offered)", "ms", "10"),
)  # fmt: skip


def build(sizes: dict[str, int]) -> list[Workload]:
    """The workloads in the order they run."""
    runs = {
        "add": workloads.add_sequential,
        "add_50": workloads.add_concurrent(50, "add_50"),
        "add_bulk": workloads.add_bulk,
        "drain_noop_10": workloads.drain("noop", 10, "drain_noop_10"),
        "drain_noop_50": workloads.drain("noop", 50, "drain_noop_50"),
        "drain_noop_200": workloads.drain("noop", 200, "drain_noop_200"),
        "drain_sleep_50": workloads.drain("sleep_10ms", 50, "drain_sleep_50"),
        "drain_sleep_200": workloads.drain("sleep_10ms", 200, "drain_sleep_200"),
        "failure": workloads.failure_path,
        "replay": workloads.dead_letter_bulk("replay"),
        "purge": workloads.dead_letter_bulk("purge"),
        "memory": workloads.dead_letter_memory,
        "latency": workloads.pickup_latency,
    }
    return [Workload(key, run, sizes[key]) for key, run in runs.items()]


def sizes_for(*, quick: bool, n: int | None) -> dict[str, int]:
    """``--n`` sets every size; else ``--quick`` picks the small sizes; else the full ones."""
    base = QUICK_SIZES if quick else FULL_SIZES
    return {key: n for key in base} if n is not None else dict(base)
