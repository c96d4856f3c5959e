"""rq: ``SimpleWorker`` (runs jobs in its own process, no fork per job) in a subprocess, since
rq is synchronous. A SimpleWorker runs one job at a time: rq's concurrency is 1 whatever the
row says (rq's way to scale is more worker processes). Drains use ``burst=True``: the timer runs
from spawning the worker process until it exits with the queue empty. Failing jobs land in the
``FailedJobRegistry``."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import _common
from redis import Redis
from rq import Queue, SimpleWorker, get_current_job
from rq.registry import FailedJobRegistry

HERE = Path(__file__).resolve().parent


def bench(data: _common.Payload) -> None:
    """The job function (imported by the worker process as ``rq_bench.bench``)."""
    now = time.time()
    behaviour = os.environ.get("BENCH_BEHAVIOUR", "noop")
    if os.environ.get("BENCH_REPORT"):  # latency workload: report to the producer via Redis
        job = get_current_job()
        assert job is not None
        pipe = job.connection.pipeline(transaction=False)
        if "t" in data:
            pipe.rpush("bench:lat", (now - data["t"]) * 1000.0)
        pipe.incr("bench:count")
        pipe.execute()
    if behaviour == "sleep":
        time.sleep(0.01)
    elif behaviour == "raise":
        raise RuntimeError("bench failure")


def run_worker(url: str, burst: bool) -> None:
    _common.quiet_logging()
    conn = Redis.from_url(url)
    SimpleWorker([Queue("bench", connection=conn)], connection=conn).work(
        burst=burst, logging_level="ERROR"
    )


class System:
    def __init__(self, args: argparse.Namespace) -> None:
        self.url = args.redis
        self.conn = Redis.from_url(self.url)
        self.queue = Queue("bench", connection=self.conn)
        self.proc: subprocess.Popen[bytes] | None = None

    def setup(self) -> None:
        pass

    def drain_na(self, behaviour: str, concurrency: int) -> str | None:
        if behaviour == "sleep":
            return "rq SimpleWorker runs one job at a time: <= 100 jobs/s by construction"
        return None

    def add(self, data: _common.Payload) -> None:
        self.queue.enqueue("rq_bench.bench", data)

    def add_bulk(self, items: list[_common.Payload]) -> None:
        self.queue.enqueue_many([Queue.prepare_data("rq_bench.bench", args=(d,)) for d in items])

    def start_worker(self, behaviour: str, concurrency: int, counter: _common.Counter,
                     burst: bool) -> None:  # fmt: skip
        env = {**os.environ, "BENCH_BEHAVIOUR": behaviour, "PYTHONPATH": str(HERE)}
        if not burst:
            env["BENCH_REPORT"] = "1"
        code = f"import rq_bench; rq_bench.run_worker({self.url!r}, {burst!r})"
        self.proc = subprocess.Popen([sys.executable, "-c", code], cwd=HERE, env=env)

    def wait_done(self, counter: _common.Counter, target: int) -> None:
        assert self.proc is not None
        if self.proc.args[-1].endswith("True)"):  # burst: the worker exits when the queue is empty
            if self.proc.wait(_common.DRAIN_TIMEOUT) != 0:
                raise RuntimeError("rq worker failed")
            return
        deadline = time.monotonic() + _common.DRAIN_TIMEOUT
        while int(self.conn.get("bench:count") or 0) < target:
            if time.monotonic() > deadline:
                raise RuntimeError("rq worker did not finish")
            time.sleep(0.002)

    def latencies(self, counter: _common.Counter) -> list[float]:
        return [float(x) for x in self.conn.lrange("bench:lat", 0, -1)]

    def stop_worker(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)

    def failed_count(self) -> int:
        return FailedJobRegistry(queue=self.queue).count

    def close(self) -> None:
        self.stop_worker()
        self.conn.close()


if __name__ == "__main__":
    _common.main_sync(System)
