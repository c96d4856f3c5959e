"""taskiq + taskiq-redis ``RedisStreamBroker``: the receiver runs in-process through taskiq's
documented ``taskiq.api.run_receiver_task``. taskiq has no failed-job store of its own; in the
failure workload a ``RedisAsyncResultBackend`` records each error result (elsewhere the default
no-op result backend is kept)."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import _common
from taskiq import TaskiqMiddleware
from taskiq.api import run_receiver_task
from taskiq_redis import RedisAsyncResultBackend, RedisStreamBroker


class Done(TaskiqMiddleware):
    def __init__(self, counter: _common.Counter) -> None:
        super().__init__()
        self.counter = counter

    def post_save(self, message: Any, result: Any) -> None:
        self.counter.hit()


class System:
    bulk_na = "taskiq has no bulk kick"

    def __init__(self, args: argparse.Namespace) -> None:
        self.url = args.redis
        self.broker = RedisStreamBroker(url=self.url, queue_name="bench")
        self.with_results = args.workload == "failure"
        if self.with_results:
            self.broker = self.broker.with_result_backend(RedisAsyncResultBackend(self.url))
        self.behaviour = {"behaviour": "noop"}
        broker, behaviour = self.broker, self.behaviour

        @broker.task(task_name="bench")
        async def bench(data: dict[str, Any]) -> None:
            _counter = getattr(broker, "_bench_counter", None)
            if _counter is not None:
                _counter.started(data)
            if behaviour["behaviour"] == "sleep":
                await asyncio.sleep(0.01)
            elif behaviour["behaviour"] == "raise":
                raise RuntimeError("bench failure")

        self.bench = bench
        self.task: asyncio.Task[Any] | None = None

    async def setup(self) -> None:
        await self.broker.startup()  # declares the consumer group before anything is added

    async def add(self, data: _common.Payload) -> None:
        await self.bench.kiq(data)

    async def start_worker(
        self, behaviour: str, concurrency: int, counter: _common.Counter
    ) -> None:
        self.behaviour["behaviour"] = behaviour
        self.broker._bench_counter = counter  # type: ignore[attr-defined]
        self.broker.add_middlewares(Done(counter))
        self.task = asyncio.create_task(
            run_receiver_task(self.broker, max_async_tasks=concurrency, propagate_exceptions=False)
        )

    async def stop_worker(self) -> None:
        if self.task is not None:
            # run_receiver_task has no stop call; cancel it, and do not wait out its
            # xreadgroup block (outside the timed section either way)
            self.task.cancel()
            await asyncio.wait({self.task}, timeout=1.0)

    async def failed_count(self) -> int | None:
        """Error results in the result backend (failure workload only; untimed)."""
        if not self.with_results:
            return None
        import redis.asyncio as aioredis

        client = aioredis.from_url(self.url)
        try:
            keys = [k async for k in client.scan_iter(count=1000) if k not in (b"bench",)]
            return sum(1 for k in keys if not k.startswith(b"autoclaim:"))
        finally:
            await client.aclose()

    async def close(self) -> None:
        await asyncio.wait({asyncio.ensure_future(self.broker.shutdown())}, timeout=1.0)


if __name__ == "__main__":
    _common.main_async(System)
