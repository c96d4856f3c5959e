"""Drain and dead-letter throughput on a local Redis Cluster against one Redis.

Usage::

    python benchmarks/cluster.py [--n N] [--queues Q] [--processes 1 2 4] [--out DIR]

One private redis-server and one local cluster (three masters, three replicas:
``tests/cluster.py``), nothing persisted. For each target and each count of worker
processes, N jobs are spread over Q queues (on a cluster their tags hash over the masters),
then the processes drain them (one ``Worker`` per queue each, concurrency 10). Three
workloads: ``drain`` (jobs that succeed), ``dead-letter same slot`` (jobs that fail for good
into ``{q}-dlq``, one script each) and ``dead-letter across slots`` (into ``q-dlq``: the
two-step move). The figure is jobs per second from the first add seen to the last outcome
seen; the median of ``--runs`` runs. Writes ``cluster.md`` and ``cluster.json`` in ``--out``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import platform
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.cluster import LocalCluster  # noqa: E402

from lazarus import Job, Queue, UnrecoverableError, Worker  # noqa: E402
from lazarus.embedded import EmbeddedRedis  # noqa: E402

WORKLOADS = ("drain", "dead-letter same slot", "dead-letter across slots")


async def _succeed(job: Job) -> None:
    return None


async def _reject(job: Job) -> None:
    raise UnrecoverableError("benchmark")


def _dlq(workload: str, queue: str) -> str | None:
    if workload == "drain":
        return None
    return f"{{{queue}}}-dlq" if workload.endswith("same slot") else f"{queue}-dlq"


def _work(url: str, prefix: str, queues: list[str], workload: str, stop: Any) -> None:
    """One worker process: a Worker per queue until ``stop`` is set."""

    async def main() -> None:
        processor = _succeed if workload == "drain" else _reject
        workers = [
            Worker(
                q,
                processor,
                connection=url,
                prefix=prefix,
                concurrency=10,
                block_timeout=0.5,
                dead_letter_queue=_dlq(workload, q),
            )
            for q in queues
        ]
        # ``stop`` is a multiprocessing event, which asyncio cannot await: wait in a thread.
        await asyncio.to_thread(stop.wait)
        await asyncio.gather(*(w.close() for w in workers))

    asyncio.run(main())


async def _done(url: str, prefix: str, queues: list[str], workload: str) -> int:
    total = 0
    for name in queues:
        queue = Queue(name, connection=url, prefix=prefix)
        if workload == "drain":
            total += (await queue.get_job_counts())["completed"]
        else:
            dlq = Queue(_dlq(workload, name) or "", connection=url, prefix=prefix)
            total += await dlq.get_dead_letter_count()
            await dlq.close()
        await queue.close()
    return total


async def _fill(url: str, prefix: str, queues: list[str], n: int) -> None:
    for index, name in enumerate(queues):
        queue = Queue(name, connection=url, prefix=prefix)
        share = n // len(queues) + (1 if index < n % len(queues) else 0)
        for start in range(0, share, 500):
            size = min(500, share - start)
            await queue.add_bulk([{"name": "n", "data": {"i": i}} for i in range(size)])
        await queue.close()


def measure(url: str, workload: str, processes: int, n: int, queues: int) -> float:
    """Jobs per second for one run (jobs added first, then the processes start)."""
    prefix = f"bc{uuid.uuid4().hex[:8]}"
    names = [f"q{i}" for i in range(queues)]
    asyncio.run(_fill(url, prefix, names, n))
    stop = multiprocessing.Event()
    procs = [multiprocessing.Process(target=_work, args=(url, prefix, names, workload, stop))
             for _ in range(processes)]  # fmt: skip
    started = time.perf_counter()
    for proc in procs:
        proc.start()
    while asyncio.run(_done(url, prefix, names, workload)) < n:
        time.sleep(0.05)
    elapsed = time.perf_counter() - started
    stop.set()
    for proc in procs:
        proc.join(30)
    return n / elapsed


def run(args: argparse.Namespace) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    with EmbeddedRedis() as single, LocalCluster() as cluster:
        for target, url in (("single Redis", single.url), ("cluster, 3 masters", cluster.url)):
            for workload in WORKLOADS:
                for processes in args.processes:
                    runs = [measure(url, workload, processes, args.n, args.queues)
                            for _ in range(args.runs)]  # fmt: skip
                    rows.append({"target": target, "workload": workload,
                                 "processes": processes, "jobs_per_s": runs,
                                 "median": statistics.median(runs)})  # fmt: skip
    machine = {
        "cpu": platform.processor() or platform.machine(),
        "cores": multiprocessing.cpu_count(),
        "python": platform.python_version(),
    }
    return {"n": args.n, "queues": args.queues, "machine": machine, "rows": rows}


def table(results: dict[str, Any]) -> str:
    lines = [f"{results['n']} jobs over {results['queues']} queues; jobs per second, median "
             f"of the runs; {results['machine']}", "",
             "| target | workload | processes | jobs/s |", "|---|---|---:|---:|"]  # fmt: skip
    for row in results["rows"]:
        lines.append(f"| {row['target']} | {row['workload']} | {row['processes']} | "
                     f"{row['median']:,.0f} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=6000, help="jobs per run")
    parser.add_argument("--queues", type=int, default=6, help="queues the jobs spread over")
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args(argv)
    results = run(args)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "cluster.json").write_text(json.dumps(results, indent=2))
    (args.out / "cluster.md").write_text("# Redis Cluster against one Redis\n\n" + table(results))
    print(table(results))


if __name__ == "__main__":
    main()
