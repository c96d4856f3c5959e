"""saq: in-process asyncio ``Worker``; a failing job (one attempt) ends with status ``failed``."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
from typing import Any

import _common
from saq import Queue, Worker


class System:
    bulk_na = "saq has no bulk enqueue (Queue.batch only groups enqueue() calls)"

    def __init__(self, args: argparse.Namespace) -> None:
        self.queue = Queue.from_url(args.redis, name="bench")
        self.worker: Worker | None = None
        self.task: asyncio.Task[Any] | None = None
        self.behaviour = "noop"

    async def setup(self) -> None:
        await self.queue.connect()

    async def add(self, data: _common.Payload) -> None:
        # retries=1 is saq's default: one attempt
        await self.queue.enqueue("bench", data=data)

    async def start_worker(
        self, behaviour: str, concurrency: int, counter: _common.Counter
    ) -> None:
        async def bench(ctx: Any, *, data: _common.Payload) -> None:
            counter.started(data)
            if behaviour == "sleep":
                await asyncio.sleep(0.01)
            elif behaviour == "raise":
                raise RuntimeError("bench failure")

        async def after_process(ctx: Any) -> None:
            counter.hit()

        self.worker = Worker(
            self.queue, [("bench", bench)], concurrency=concurrency, after_process=after_process
        )
        self.task = asyncio.create_task(self.worker.start())

    async def stop_worker(self) -> None:
        if self.worker is not None:
            await self.worker.stop()
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.task

    async def failed_count(self) -> int:
        """Jobs whose stored status is ``failed`` (untimed check)."""
        redis = self.queue.redis
        failed = 0
        async for key in redis.scan_iter(match="saq:job:bench:*", count=1000):
            raw = await redis.get(key)
            if raw and json.loads(raw).get("status") == "failed":
                failed += 1
        return failed

    async def close(self) -> None:
        await self.queue.disconnect()


if __name__ == "__main__":
    _common.main_async(System)
