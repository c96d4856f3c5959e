"""The message-forward service's throughput (examples/message_forward): its requirement is at
least 100 jobs/s without a growing backlog.

Three workloads, against a private redis-server, with the service's own settings and its
logging consumer (logging each payload to /dev/null, so formatting is paid for):

- ``steady``: the Python producer offers ``--rate`` messages/s (default 200, twice the
  requirement) for ``--seconds``; the backlog (waiting jobs) is sampled every 100 ms, and the
  row reports the largest one and how long after the last send the queue was empty.
- ``drain``: ``--n`` messages queued with ``send_many``, then one consumer started: jobs/s
  until every one has completed.
- ``http``: ``--n`` ``POST /messages`` requests one after another through the service's ASGI
  app in process (no sockets): requests/s.

Writes ``results/message_forward.md`` (or ``--out``)::

    .venv/bin/python benchmarks/message_forward.py
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import report  # noqa: E402
from examples.message_forward import Service, Settings  # noqa: E402
from examples.message_forward.app import create_app  # noqa: E402

from lazarus.embedded import EmbeddedRedis  # noqa: E402

REQUIRED = 100.0  # jobs/s


def message(n: int) -> dict[str, Any]:
    stamp = datetime.now(timezone.utc).isoformat()
    return {"messageId": n, "sourceChannelId": -1001, "text": f"message {n}", "timestamp": stamp}


async def wait_empty(service: Service) -> None:
    """Until no job waits or runs (sampled every 10 ms)."""
    while True:
        counts = await service.queue.get_job_counts()
        if counts["waiting"] + counts["active"] + counts["delayed"] == 0:
            return
        await asyncio.sleep(0.01)


async def steady(url: str, prefix: str, rate: float, seconds: float) -> dict[str, float]:
    service = Service(Settings(redis_url=url, prefix=prefix))
    await service.start()
    backlog = 0
    sending = True

    async def sample() -> None:
        nonlocal backlog
        while sending:
            counts = await service.queue.get_job_counts()
            backlog = max(backlog, counts["waiting"])
            await asyncio.sleep(0.1)

    sampler = asyncio.create_task(sample())
    loop = asyncio.get_running_loop()
    start = loop.time()
    total = int(rate * seconds)
    for n in range(total):
        await asyncio.sleep(max(start + n / rate - loop.time(), 0))
        await service.producer.send(message(n + 1))
    last_send = loop.time()
    await wait_empty(service)
    drained_after = loop.time() - last_send
    sending = False
    await sampler
    await service.queue.obliterate()
    await service.stop()
    return {"offered": total / (last_send - start), "backlog": backlog, "drained": drained_after}


async def drain(url: str, prefix: str, n: int) -> float:
    service = Service(Settings(redis_url=url, prefix=prefix, keep_completed=n))
    await service.start(consume=False)
    for start in range(0, n, 1000):
        await service.producer.send_many(
            [message(i + 1) for i in range(start, min(start + 1000, n))]
        )
    done = asyncio.Event()
    completed = 0

    def count(*_: Any) -> None:
        nonlocal completed
        completed += 1
        if completed == n:
            done.set()

    began = time.perf_counter()
    await service.start()
    assert service.worker is not None  # listening before the worker's first step
    service.worker.on("completed", count)
    await done.wait()
    elapsed = time.perf_counter() - began
    await service.queue.obliterate()
    await service.stop()
    return n / elapsed


async def http(url: str, prefix: str, n: int) -> float:
    service = Service(Settings(redis_url=url, prefix=prefix))
    app = create_app(service)
    async with contextlib.AsyncExitStack() as stack:
        await stack.enter_async_context(app.router.lifespan_context(app))
        client = await stack.enter_async_context(
            httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bench")
        )
        began = time.perf_counter()
        for i in range(n):
            (await client.post("/messages", json=message(i + 1))).raise_for_status()
        elapsed = time.perf_counter() - began
        await wait_empty(service)
        await service.queue.obliterate()
    return n / elapsed


def rows(results: dict[str, Any], args: argparse.Namespace) -> list[str]:
    s = results["steady"]
    met = s["offered"] >= REQUIRED and s["drained"] < 1.0
    return [
        "| workload | N | figure | unit | target | met? |",
        "|---|---:|---:|---|---|---|",
        f"| steady: {args.rate:.0f} messages/s offered for {args.seconds:.0f} s, largest "
        f"backlog {s['backlog']:.0f}, empty {s['drained'] * 1000:.0f} ms after the last send "
        f"| {int(args.rate * args.seconds):,} | {s['offered']:,.0f} | jobs/s sustained "
        f"| ≥ 100, no growing backlog | {'yes' if met else 'no'} |",
        f"| drain: one consumer (concurrency 10) through queued messages | {args.n:,} "
        f"| {results['drain']:,.0f} | jobs/s | ≥ 100 "
        f"| {'yes' if results['drain'] >= REQUIRED else 'no'} |",
        f"| http: `POST /messages` one after another (in process) | {args.n:,} "
        f"| {results['http']:,.0f} | requests/s | — | — |",
    ]


async def measure(args: argparse.Namespace, url: str) -> dict[str, Any]:
    return {
        "steady": await steady(url, "bench-mf-steady", args.rate, args.seconds),
        "drain": await drain(url, "bench-mf-drain", args.n),
        "http": await http(url, "bench-mf-http", args.n),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args()
    consumer = logging.getLogger("message_forward.consumer")
    consumer.setLevel(logging.INFO)
    consumer.addHandler(logging.StreamHandler(open(os.devnull, "w")))  # noqa: SIM115
    consumer.propagate = False
    with EmbeddedRedis(extra_args=["--save", "", "--appendonly", "no"]) as server:
        version = ".".join(map(str, server.version))
        results = asyncio.run(measure(args, server.url))
    facts = report.machine_facts(version, report.git_state(ROOT))
    report.write_page(
        args.out, "message_forward", "the message-forward service", facts, rows(results, args)
    )


if __name__ == "__main__":
    main()
