"""celery with the Redis broker: ``acks_late=True``, worker in a subprocess (``celery worker
--pool=threads -c C``, gossip/mingle/heartbeat off), the timer runs from spawning it until the
queue list and kombu's ``unacked`` hash are both empty (polled every 5 ms). No result backend,
except in the failure workload: there a Redis result backend with
``task_store_errors_even_if_ignored`` stores each failure (celery's failed store)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import _common
from celery import Celery
from redis import Redis

HERE = Path(__file__).resolve().parent
URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
FAILURE = os.environ.get("BENCH_FAILURE") == "1"

app = Celery("celery_bench", broker=URL, backend=URL if FAILURE else None)
app.conf.update(
    task_acks_late=True,
    task_ignore_result=True,
    task_store_errors_even_if_ignored=FAILURE,
    task_default_queue="bench",
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
)
_report: Redis | None = None


@app.task(name="bench", acks_late=True)
def bench(data: dict[str, Any]) -> None:
    global _report
    now = time.time()
    if os.environ.get("BENCH_REPORT"):  # latency workload: report to the producer via Redis
        if _report is None:
            _report = Redis.from_url(URL)
        pipe = _report.pipeline(transaction=False)
        if "t" in data:
            pipe.rpush("bench:lat", (now - data["t"]) * 1000.0)
        pipe.incr("bench:count")
        pipe.execute()
    behaviour = os.environ.get("BENCH_BEHAVIOUR", "noop")
    if behaviour == "sleep":
        time.sleep(0.01)
    elif behaviour == "raise":
        raise RuntimeError("bench failure")


class System:
    bulk_na = "celery has no bulk publish (group() sends one message per task)"

    def __init__(self, args: argparse.Namespace) -> None:
        self.url = args.redis
        self.failure = args.workload == "failure"
        app.conf.broker_url = self.url
        self.conn = Redis.from_url(self.url)
        self.proc: subprocess.Popen[bytes] | None = None
        self.burst = True

    def setup(self) -> None:
        pass

    def add(self, data: _common.Payload) -> None:
        bench.delay(data)

    def start_worker(self, behaviour: str, concurrency: int, counter: _common.Counter,
                     burst: bool) -> None:  # fmt: skip
        self.burst = burst
        env = {**os.environ, "BENCH_BEHAVIOUR": behaviour, "BENCH_REDIS_URL": self.url,
               "PYTHONPATH": str(HERE)}  # fmt: skip
        if self.failure:
            env["BENCH_FAILURE"] = "1"
        if not burst:
            env["BENCH_REPORT"] = "1"
        command = [sys.executable, "-m", "celery", "-A", "celery_bench", "worker",
                   "--pool=threads", f"--concurrency={concurrency}", "-Q", "bench",
                   "--without-gossip", "--without-mingle", "--without-heartbeat",
                   "--loglevel=CRITICAL"]  # fmt: skip
        self.proc = subprocess.Popen(command, cwd=HERE, env=env, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)  # fmt: skip

    def wait_done(self, counter: _common.Counter, target: int) -> float | None:
        deadline = time.monotonic() + _common.DRAIN_TIMEOUT
        if self.burst:
            # drained: nothing queued and nothing delivered-but-unacked, seen twice 10 ms apart
            # (kombu moves a message from the list to "unacked" in two steps)
            first_empty: float | None = None
            while time.monotonic() < deadline:
                pipe = self.conn.pipeline(transaction=False)
                pipe.llen("bench")
                pipe.hlen("unacked")
                queued, unacked = pipe.execute()
                if queued == 0 and unacked == 0:
                    if first_empty is not None:
                        return first_empty
                    first_empty = time.perf_counter()
                    time.sleep(0.010)
                    continue
                first_empty = None
                time.sleep(0.005)
            raise RuntimeError("celery worker did not drain the queue")
        while int(self.conn.get("bench:count") or 0) < target:
            if time.monotonic() > deadline:
                raise RuntimeError("celery worker did not finish")
            time.sleep(0.002)
        return None

    def latencies(self, counter: _common.Counter) -> list[float]:
        return [float(x) for x in self.conn.lrange("bench:lat", 0, -1)]

    def stop_worker(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def failed_count(self) -> int:
        return sum(1 for _ in self.conn.scan_iter(match="celery-task-meta-*", count=1000))

    def close(self) -> None:
        self.stop_worker()
        self.conn.close()


if __name__ == "__main__":
    _common.main_sync(System)
