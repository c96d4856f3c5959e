"""dramatiq with its ``RedisBroker``: a ``dramatiq.Worker`` (the class the ``dramatiq`` command
runs in each worker process) with ``worker_threads`` = concurrency, in this process. Actors are
sync (threads); ``max_retries=0`` sends a failing message straight to the dead-letter queue
(``dramatiq:bench.XQ``). No Results middleware (no result backend)."""

from __future__ import annotations

import argparse
import time
from typing import Any

import _common
import dramatiq
from dramatiq.brokers.redis import RedisBroker
from dramatiq.middleware import Middleware

STATE: dict[str, Any] = {"behaviour": "noop", "counter": None}


class Done(Middleware):
    def after_process_message(self, broker: Any, message: Any, *, result: Any = None,
                              exception: Any = None) -> None:  # fmt: skip
        counter = STATE["counter"]
        if counter is not None:
            counter.hit()

    after_skip_message = after_process_message  # type: ignore[assignment]


class System:
    bulk_na = "dramatiq has no bulk enqueue (group() sends one message at a time)"

    def __init__(self, args: argparse.Namespace) -> None:
        self.broker = RedisBroker(url=args.redis)
        self.broker.add_middleware(Done())
        dramatiq.set_broker(self.broker)

        @dramatiq.actor(actor_name="bench", queue_name="bench", max_retries=0)
        def bench(data: _common.Payload) -> None:
            counter = STATE["counter"]
            if counter is not None:
                counter.started(data)
            if STATE["behaviour"] == "sleep":
                time.sleep(0.01)
            elif STATE["behaviour"] == "raise":
                raise RuntimeError("bench failure")

        self.actor = bench
        self.worker: dramatiq.Worker | None = None

    def setup(self) -> None:
        pass

    def add(self, data: _common.Payload) -> None:
        self.actor.send(data)

    def start_worker(self, behaviour: str, concurrency: int, counter: _common.Counter,
                     burst: bool) -> None:  # fmt: skip
        STATE["behaviour"], STATE["counter"] = behaviour, counter
        self.worker = dramatiq.Worker(self.broker, worker_threads=concurrency, queues={"bench"})
        self.worker.start()

    def wait_done(self, counter: _common.Counter, target: int) -> None:
        counter.wait_sync(target)

    def latencies(self, counter: _common.Counter) -> list[float]:
        return counter.latencies_ms

    def stop_worker(self) -> None:
        if self.worker is not None:
            self.worker.stop(timeout=5000)

    def failed_count(self) -> int:
        return int(self.broker.client.zcard("dramatiq:bench.XQ"))

    def close(self) -> None:
        self.broker.close()


if __name__ == "__main__":
    _common.main_sync(System)
