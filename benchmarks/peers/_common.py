"""Shared by every per-system script. Standard library only: it runs in each system's own venv.

A per-system script (``<system>_bench.py``) defines a *system*: how to add a job, add many, start
a worker with a behaviour and a concurrency, stop it, and (optionally) count its failed store.
The workloads below drive every system the same way and print one JSON line with the figure.

Command line (what ``benchmarks/peers.py`` passes)::

    <venv>/bin/python <system>_bench.py --redis URL --workload W --n N
        [--concurrency C] [--behaviour noop|sleep|raise] [--rate R] [--seconds S] [--variant V]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

Payload = dict[str, Any]
BULK_CHUNK = 1_000
DRAIN_TIMEOUT = 900.0


def payload(index: int, enqueued_at: float | None = None) -> Payload:
    """About 100 bytes of JSON; ``t`` (time.time() at enqueue) only for the latency workload."""
    data: Payload = {"index": index, "user": "ada@example.com", "action": "send-welcome-email",
                     "pad": "x" * 40}  # fmt: skip
    if enqueued_at is not None:
        data["t"] = enqueued_at
    return data


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--redis", required=True)
    parser.add_argument(
        "--workload", required=True, choices=["add", "add_bulk", "drain", "failure", "latency"]
    )
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--behaviour", default="noop", choices=["noop", "sleep", "raise"])
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--variant", default="")
    return parser.parse_args(argv)


def quiet_logging() -> None:
    """Every system runs with logging off (failing jobs would otherwise log N tracebacks)."""
    logging.disable(logging.CRITICAL)


class Counter:
    """Counts terminal jobs (from any thread) and records pickup latencies.

    ``hit()`` once per job that reached a terminal state; ``started(payload)`` first thing in
    the processor (records ``time.time() - payload["t"]`` when the payload carries ``t``).
    """

    def __init__(self) -> None:
        self.count = 0
        self.latencies_ms: list[float] = []
        self._lock = threading.Lock()
        self._target = 0
        self._thread_event = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._async_event: asyncio.Event | None = None

    def started(self, data: Payload) -> None:
        now = time.time()
        enqueued = data.get("t")
        if enqueued is not None:
            self.latencies_ms.append((now - enqueued) * 1000.0)

    def hit(self) -> None:
        with self._lock:
            self.count += 1
            reached = self._target and self.count >= self._target
        if reached:
            self._thread_event.set()
            if self._loop is not None and self._async_event is not None:
                self._loop.call_soon_threadsafe(self._async_event.set)

    def _arm(self, target: int) -> bool:
        with self._lock:
            self._target = target
            self._thread_event.clear()
            return self.count >= target

    async def wait_async(self, target: int) -> None:
        self._loop = asyncio.get_running_loop()
        self._async_event = asyncio.Event()
        if self._arm(target):
            return
        try:
            await asyncio.wait_for(self._async_event.wait(), DRAIN_TIMEOUT)
        except asyncio.TimeoutError:
            raise RuntimeError(f"only {self.count} of {target} jobs finished") from None

    def wait_sync(self, target: int) -> None:
        if self._arm(target):
            return
        if not self._thread_event.wait(DRAIN_TIMEOUT):
            raise RuntimeError(f"only {self.count} of {target} jobs finished")


def latency_figures(latencies_ms: list[float], offered: float) -> dict[str, float]:
    cuts = statistics.quantiles(latencies_ms, n=100, method="inclusive")
    return {"p50": cuts[49], "p99": cuts[98], "offered_rate": offered, "jobs": len(latencies_ms)}


def emit(result: dict[str, Any]) -> None:
    print(json.dumps(result), flush=True)


# -- asyncio systems: producer, worker and timer in one event loop ---------------------------


async def run_async(system: Any, args: argparse.Namespace) -> dict[str, Any]:
    """Drive an asyncio system. ``system`` has: ``setup()``, ``add(p)``, ``add_bulk(ps)`` (or
    ``bulk_na`` set to a reason), ``start_worker(behaviour, concurrency, counter)``,
    ``stop_worker()``, ``failed_count()`` (or None) and ``close()``; all coroutines."""
    await system.setup()
    try:
        return await _async_workload(system, args)
    finally:
        await system.close()


async def _fill_async(system: Any, n: int) -> None:
    if getattr(system, "bulk_na", None):
        for i in range(n):
            await system.add(payload(i))
        return
    for start in range(0, n, BULK_CHUNK):
        await system.add_bulk([payload(i) for i in range(start, min(start + BULK_CHUNK, n))])


async def _async_workload(system: Any, args: argparse.Namespace) -> dict[str, Any]:
    n = args.n
    if args.workload == "add":
        start = time.perf_counter()
        for i in range(n):
            await system.add(payload(i))
        return {"value": n / (time.perf_counter() - start)}
    if args.workload == "add_bulk":
        if getattr(system, "bulk_na", None):
            return {"na": system.bulk_na}
        start = time.perf_counter()
        await _fill_async(system, n)
        return {"value": n / (time.perf_counter() - start)}
    counter = Counter()
    if args.workload in ("drain", "failure"):
        behaviour = "raise" if args.workload == "failure" else args.behaviour
        await _fill_async(system, n)
        start = time.perf_counter()
        await system.start_worker(behaviour, args.concurrency, counter)
        await counter.wait_async(n)
        elapsed = time.perf_counter() - start
        await system.stop_worker()
        result: dict[str, Any] = {"value": n / elapsed}
        result["failed_store"] = await system.failed_count()  # n for failure, 0 for a drain
        return result
    # latency: an idle worker, jobs offered one by one at a fixed rate
    await system.start_worker("noop", args.concurrency, counter)
    await system.add(payload(-1))
    await counter.wait_async(1)
    counter.latencies_ms.clear()
    total = int(args.rate * args.seconds)
    loop = asyncio.get_running_loop()
    begin = loop.time()
    for i in range(total):
        delay = begin + i / args.rate - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        await system.add(payload(i, time.time()))
    offered = total / (loop.time() - begin)
    await counter.wait_async(total + 1)
    await system.stop_worker()
    return latency_figures(counter.latencies_ms, offered)


def main_async(factory: Callable[[argparse.Namespace], Any]) -> None:
    quiet_logging()
    args = parse_args()
    emit(asyncio.run(run_async(factory(args), args)))
    os._exit(0)  # the figure is out; do not wait for a library's lingering threads/tasks


# -- synchronous systems: the worker is threads in this process, or a subprocess ------------


def run_sync(system: Any, args: argparse.Namespace) -> dict[str, Any]:
    """Drive a synchronous system. Same methods as :func:`run_async` but plain functions, and
    ``start_worker(behaviour, concurrency, counter, burst)`` + ``wait_done(counter, target)``
    (a subprocess worker has no in-process counter: the system waits its own way)."""
    system.setup()
    try:
        return _sync_workload(system, args)
    finally:
        system.close()


def _fill_sync(system: Any, n: int) -> None:
    if getattr(system, "bulk_na", None):
        for i in range(n):
            system.add(payload(i))
        return
    for start in range(0, n, BULK_CHUNK):
        system.add_bulk([payload(i) for i in range(start, min(start + BULK_CHUNK, n))])


def _sync_workload(system: Any, args: argparse.Namespace) -> dict[str, Any]:
    n = args.n
    if args.workload == "add":
        start = time.perf_counter()
        for i in range(n):
            system.add(payload(i))
        return {"value": n / (time.perf_counter() - start)}
    if args.workload == "add_bulk":
        if getattr(system, "bulk_na", None):
            return {"na": system.bulk_na}
        start = time.perf_counter()
        _fill_sync(system, n)
        return {"value": n / (time.perf_counter() - start)}
    counter = Counter()
    if args.workload in ("drain", "failure"):
        behaviour = "raise" if args.workload == "failure" else args.behaviour
        if getattr(system, "drain_na", None) and args.workload == "drain":
            na = system.drain_na(behaviour, args.concurrency)
            if na:
                return {"na": na}
        _fill_sync(system, n)
        start = time.perf_counter()
        system.start_worker(behaviour, args.concurrency, counter, burst=True)
        finished = system.wait_done(counter, n)  # a poller may return when it first saw "done"
        elapsed = (finished or time.perf_counter()) - start
        system.stop_worker()
        result: dict[str, Any] = {"value": n / elapsed}
        result["failed_store"] = system.failed_count()  # n for failure, 0 for a drain
        return result
    system.start_worker("noop", args.concurrency, counter, burst=False)
    system.add(payload(-1))
    system.wait_done(counter, 1)
    total = int(args.rate * args.seconds)
    begin = time.perf_counter()
    for i in range(total):
        delay = begin + i / args.rate - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        system.add(payload(i, time.time()))
    offered = total / (time.perf_counter() - begin)
    system.wait_done(counter, total + 1)
    latencies = system.latencies(counter)  # the warm-up job carries no "t"
    system.stop_worker()
    return latency_figures(latencies, offered)


def main_sync(factory: Callable[[argparse.Namespace], Any]) -> None:
    quiet_logging()
    args = parse_args()
    emit(run_sync(factory(args), args))
    os._exit(0)
