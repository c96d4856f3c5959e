"""The jobs a scenario adds: a seeded mix of healthy, flaky and doomed jobs, and a producer that
keeps adding through faults."""

from __future__ import annotations

import asyncio
import dataclasses
import random
import time
from typing import Any

from redis.exceptions import RedisError

from lazarus import LazarusError, Queue

# Kinds of job: what the processor in worker.py is told to do, and what a run without faults
# makes of it.
OK, FLAKY, DOOMED, DISCARDED, HUNG = "ok", "flaky", "doomed", "discarded", "hung"


@dataclasses.dataclass(frozen=True)
class JobSpec:
    """One job a scenario adds, and what it should come to without faults."""

    id: str
    kind: str
    data: dict[str, Any]
    attempts: int
    options: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def designed_runs(self) -> int:
        """How many times the processor runs for this job when nothing goes wrong."""
        return {OK: 1, FLAKY: 2, DOOMED: self.attempts, DISCARDED: 1, HUNG: self.attempts}[
            self.kind
        ]

    @property
    def designed_outcome(self) -> str:
        return "completed" if self.kind in (OK, FLAKY) else "dead_lettered"

    def add_args(self) -> dict[str, Any]:
        """The job as ``Queue.add_bulk`` takes it."""
        return {"name": self.kind, "data": self.data, "job_id": self.id,
                "attempts": self.attempts, **self.options}  # fmt: skip


def job_mix(
    count: int, *, seed: int, ms: tuple[int, int] = (20, 80), flaky: float = 0.1,
    doomed: float = 0.1, discarded: float = 0.02, id_prefix: str = "j",
) -> list[JobSpec]:  # fmt: skip
    """``count`` jobs of ``ms`` milliseconds of work each: mostly healthy, some failing once
    (``attempts=2``), some failing every attempt, a few discarding themselves at once."""
    rng = random.Random(seed)
    specs = []
    for i in range(count):
        draw = rng.random()
        data: dict[str, Any] = {"i": i, "ms": rng.randint(*ms)}
        if draw < discarded:
            kind, data["fail"], data["error"] = DISCARDED, 1, "DeadLetterError"
        elif draw < discarded + doomed:
            error = rng.choice(["ValueError", "TimeoutError"])
            kind, data["fail"], data["error"] = DOOMED, 99, error
        elif draw < discarded + doomed + flaky:
            kind, data["fail"] = FLAKY, 1
        else:
            kind = OK
        specs.append(JobSpec(f"{id_prefix}{i}", kind, data, 1 if kind == OK else 2))
    return specs


async def produce(
    queue: Queue, specs: list[JobSpec], *, chunk: int = 100, pause: float = 0.0,
    timeout: float = 90.0, acked: list[tuple[float, int]] | None = None,
) -> int:  # fmt: skip
    """Add ``specs`` in chunks, ``pause`` seconds apart, retrying each chunk until Redis takes
    it; returns how many calls failed first. Jobs carry their ids, so a retried chunk whose
    first call went through adds nothing twice. ``acked`` receives ``(time, jobs)`` as Redis
    acknowledges each chunk."""
    failures = 0
    deadline = time.monotonic() + timeout
    for start in range(0, len(specs), chunk):
        batch = [s.add_args() for s in specs[start : start + chunk]]
        while True:
            try:
                await queue.add_bulk(batch)
                if acked is not None:
                    acked.append((time.time(), len(batch)))
                break
            except (LazarusError, RedisError, OSError):
                failures += 1
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(min(0.02 * 2 ** min(failures, 5), 0.5))
        if pause:
            await asyncio.sleep(pause)
    return failures
