"""Timing calls for ``dlq_scale.py``, with where their time went: each call's wall time, and
over all of them the benchmark process's CPU time (Python: the library, redis-py, the app)
and the CPU time of Redis's main thread (``INFO cpu``). Wall minus both is waiting: the two
sides taking turns, and on a busy machine the OS running something else."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from dlq_probe import PauseProbe
from dlq_report import Row, Target, percentile

Call = Callable[[], Awaitable[Any]]


@dataclasses.dataclass
class Sample:
    """The wall time of each call, and the CPU and Redis seconds of them all."""

    seconds: list[float]
    cpu_s: float
    redis_s: float
    results: list[Any]

    def _cost(self, per: str, count: int, scale: float, unit: str) -> dict[str, Any]:
        return {
            "per": per, "unit": unit, "wall": sum(self.seconds) / count * scale,
            "cpu": self.cpu_s / count * scale, "redis": self.redis_s / count * scale,
        }  # fmt: skip

    def latency(self, key: str, label: str, target_ms: float | None, note: str = "") -> Row:
        """p50 / p99 in ms; the target judges the p99."""
        ms = [s * 1000 for s in self.seconds]
        return Row(
            key, label, "ms", percentile(ms, 99),
            None if target_ms is None else Target("<", target_ms), percentile(ms, 50),
            len(ms), note, self._cost("call", len(ms), 1000, "ms"),
        )  # fmt: skip

    def throughput(self, key: str, label: str, count: int, minimum: float | None) -> Row:
        """``count`` items over the (one) call's wall time, per second."""
        took = sum(self.seconds)
        target = None if minimum is None else Target(">=", minimum)
        note = f"{count:,} in {took:.2f} s"
        cost = self._cost("dead letter", count, 1e6, "µs")
        return Row(key, label, "/s", count / took, target, None, 1, note, cost)


def kept(result: Any) -> Any:
    """What a row needs of a call's result: a page's length, a number as it is. A page kept
    whole per call (50 dead letters, thousands of objects) would leave the garbage collector
    hundreds of thousands of objects to walk, and the calls measured after it its pauses."""
    jobs = getattr(result, "jobs", None)
    if jobs is not None:
        return len(jobs)
    return result if isinstance(result, (int, float)) else None


async def measure(
    probe: PauseProbe, calls: Sequence[Call], *, stop: Callable[[], bool] | None = None
) -> Sample:
    """Run ``calls`` one after another (until ``stop()`` says so before a call); a result is
    kept as :func:`kept` says."""
    redis_before = await probe.redis_seconds()
    cpu_before = time.process_time()
    seconds, results = [], []
    for call in calls:
        if stop is not None and stop():
            break
        started = time.perf_counter()
        result = await call()
        seconds.append(time.perf_counter() - started)
        results.append(kept(result))
    cpu = time.process_time() - cpu_before
    return Sample(seconds, cpu, await probe.redis_seconds() - redis_before, results)
