"""The workloads: what is measured, written against :mod:`adapter` only.

Each workload function takes an adapter and a size and returns one run's figures by metric
key. Every run opens its own namespace and closes (deletes) it, so runs never see each
other's keys. Producer work that only sets a measurement up (pre-filling a queue, creating
dead letters) happens before the clock starts.
"""

from __future__ import annotations

import asyncio
import dataclasses
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable

from adapter import Behaviour, BenchQueue, Hooks, NotSupportedError, Payload, QueueAdapter

Sample = dict[str, float]
WorkloadFn = Callable[[QueueAdapter, int], Awaitable[Sample]]

BULK_CHUNK = 1_000
DRAIN_TIMEOUT = 900.0
LATENCY_RATE = 500.0
LATENCY_CONCURRENCY = 10


def payload(index: int) -> Payload:
    """A job payload of about 100 bytes of JSON."""
    return {"index": index, "user": "ada@example.com", "action": "send-welcome-email",
            "pad": "x" * 40}  # fmt: skip


def namespace() -> str:
    return f"bench{uuid.uuid4().hex[:10]}"


async def _fill(queue: BenchQueue, n: int) -> None:
    for start in range(0, n, BULK_CHUNK):
        await queue.add_bulk([payload(i) for i in range(start, min(start + BULK_CHUNK, n))])


class Countdown:
    """Sets ``done`` when ``on_finished`` has been called ``n`` times."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.count = 0
        self.done = asyncio.Event()
        if n <= 0:
            self.done.set()

    def on_finished(self) -> None:
        self.count += 1
        if self.count >= self.n:
            self.done.set()

    async def wait(self) -> None:
        try:
            await asyncio.wait_for(self.done.wait(), DRAIN_TIMEOUT)
        except asyncio.TimeoutError:
            raise RuntimeError(f"only {self.count} of {self.n} jobs finished") from None


async def _drain(
    queue: BenchQueue, n: int, behaviour: Behaviour, concurrency: int, *, dead_letter: bool
) -> float:
    """Seconds for one worker to bring ``n`` queued jobs to a terminal state."""
    countdown = Countdown(n)
    hooks = Hooks(on_finished=countdown.on_finished)
    start = time.perf_counter()
    async with queue.worker(behaviour, concurrency=concurrency, hooks=hooks,
                            dead_letter=dead_letter):  # fmt: skip
        await countdown.wait()
        elapsed = time.perf_counter() - start
    return elapsed


async def make_dead_letters(queue: BenchQueue, n: int) -> None:
    """Create ``n`` dead letters through the real failure path (untimed set-up)."""
    await _fill(queue, n)
    await _drain(queue, n, "raise_unrecoverable", 50, dead_letter=True)
    count = await queue.dead_letter_count()
    if count != n:
        raise RuntimeError(f"expected {n} dead letters, found {count}")


# -- the workloads -------------------------------------------------------------------------


async def add_sequential(adapter: QueueAdapter, n: int) -> Sample:
    """``n`` adds, each awaited before the next; with lazarus, the client CPU each costs and
    the floor of one round trip at a time on the same Redis (``ceiling.round_trip``)."""
    queue = await adapter.open(namespace())
    try:
        start, cpu = time.perf_counter(), time.process_time()
        for i in range(n):
            await queue.add(payload(i))
        sample = {"add": n / (time.perf_counter() - start)}
        sample["add_client_cpu_us"] = (time.process_time() - cpu) / n * 1e6
    finally:
        await queue.close()
    round_trip = getattr(adapter, "round_trip", None)
    if round_trip is not None:
        sample.update(await round_trip(n))
    return sample


def add_concurrent(producers: int, key: str) -> WorkloadFn:
    """A workload: ``producers`` tasks add ``n`` jobs between them, one ``add`` at a time each
    (a web server's request handlers enqueueing side by side)."""

    async def run(adapter: QueueAdapter, n: int) -> Sample:
        queue = await adapter.open(namespace())

        async def produce(first: int) -> None:
            for i in range(first, n, producers):
                await queue.add(payload(i))

        try:
            start = time.perf_counter()
            await asyncio.gather(*(produce(k) for k in range(producers)))
            return {key: n / (time.perf_counter() - start)}
        finally:
            await queue.close()

    return run


async def add_bulk(adapter: QueueAdapter, n: int) -> Sample:
    queue = await adapter.open(namespace())
    try:
        start = time.perf_counter()
        await _fill(queue, n)
        return {"add_bulk": n / (time.perf_counter() - start)}
    finally:
        await queue.close()


def drain(behaviour: Behaviour, concurrency: int, key: str) -> WorkloadFn:
    """A workload: pre-fill ``n`` jobs, then time one worker processing them all."""

    async def run(adapter: QueueAdapter, n: int) -> Sample:
        queue = await adapter.open(namespace())
        try:
            await _fill(queue, n)
            rate = n / await _drain(queue, n, behaviour, concurrency, dead_letter=False)
        finally:
            await queue.close()
        sample = {key: rate}
        ceiling = getattr(adapter, "ceiling", None)
        if ceiling is not None:  # measured on the same Redis, right after
            limit = await ceiling(n, concurrency)
            # 10 ms jobs cannot go faster than concurrency / 10 ms, whatever Redis allows.
            if behaviour == "sleep_10ms":
                limit = min(limit, concurrency / 0.010)
            sample.update({f"{key}_ceiling": limit, f"{key}_share": rate / limit})
        return sample

    return run


async def failure_path(adapter: QueueAdapter, n: int) -> Sample:
    """Failing jobs (one attempt) without and with a dead letter queue, and their ratio; where
    the adapter can tell, Redis's CPU time per job of each (µs), which says whether a path is
    bound by Redis or by the client."""
    if not adapter.supports_dead_letters:
        raise NotSupportedError("no dead letter queues")
    redis_cpu = getattr(adapter, "redis_cpu_seconds", None)
    rates: dict[bool, float] = {}
    redis_us: dict[bool, float] = {}
    for dead_letter in (False, True):
        queue = await adapter.open(namespace())
        try:
            await _fill(queue, n)
            before = await redis_cpu() if redis_cpu else 0.0
            rates[dead_letter] = n / await _drain(queue, n, "raise", 50, dead_letter=dead_letter)
            if redis_cpu:
                redis_us[dead_letter] = (await redis_cpu() - before) / n * 1e6
        finally:
            await queue.close()
    sample = {
        "fail": rates[False], "fail_dlq": rates[True], "dlq_ratio": rates[True] / rates[False]
    }  # fmt: skip
    if redis_us:
        sample.update({"fail_redis_us": redis_us[False], "fail_dlq_redis_us": redis_us[True]})
    return sample


def dead_letter_bulk(operation: str) -> WorkloadFn:
    """A workload: create ``n`` dead letters, then time ``replay`` or ``purge`` of them all."""

    async def run(adapter: QueueAdapter, n: int) -> Sample:
        if not adapter.supports_dead_letters:
            raise NotSupportedError("no dead letter queues")
        queue = await adapter.open(namespace())
        try:
            await make_dead_letters(queue, n)
            act = (
                queue.replay_all_dead_letters if operation == "replay" else queue.purge_dead_letters
            )
            start = time.perf_counter()
            done = await act()
            elapsed = time.perf_counter() - start
            if done != n:
                raise RuntimeError(f"{operation} handled {done} of {n} dead letters")
            return {operation: n / elapsed}
        finally:
            await queue.close()

    return run


async def dead_letter_memory(adapter: QueueAdapter, n: int) -> Sample:
    """Growth of the server's ``used_memory`` per dead letter, over ``n`` dead letters."""
    if not adapter.supports_dead_letters:
        raise NotSupportedError("no dead letter queues")
    queue = await adapter.open(namespace())
    try:
        before = await queue.used_memory()
        await make_dead_letters(queue, n)
        after = await queue.used_memory()
        details = await queue.memory_details()
        return {"memory": (after - before) / n, **details}
    finally:
        await queue.close()


async def pickup_latency(adapter: QueueAdapter, n: int) -> Sample:
    """Add ``n`` jobs one by one at ``LATENCY_RATE`` jobs/s to an idle worker; time from the
    job's recorded add time to the start of its processor."""
    queue = await adapter.open(namespace())
    latencies: list[float] = []
    try:
        countdown = Countdown(1)  # one warm-up job: the worker is up and idle when it is done
        hooks = Hooks(on_finished=lambda: countdown.on_finished(),
                      on_start=lambda at: latencies.append(time.time() * 1000 - at))  # fmt: skip
        async with queue.worker("noop", concurrency=LATENCY_CONCURRENCY, hooks=hooks):
            await queue.add(payload(-1))
            await countdown.wait()
            countdown = Countdown(n)
            latencies.clear()
            offered = await _offer(queue, n, LATENCY_RATE)
            await countdown.wait()
    finally:
        await queue.close()
    cuts = statistics.quantiles(latencies, n=100, method="inclusive")
    return {"latency_p50": cuts[49], "latency_p99": cuts[98], "offered_rate": offered}


async def _offer(queue: BenchQueue, n: int, rate: float) -> float:
    """Add ``n`` jobs on a fixed schedule of ``rate`` per second; returns the achieved rate."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    for i in range(n):
        delay = start + i / rate - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        await queue.add(payload(i))
    return n / max(loop.time() - start, 1e-9)


@dataclasses.dataclass(frozen=True)
class Workload:
    """One workload: the function to run and the size it runs at."""

    key: str
    run: WorkloadFn
    size: int
