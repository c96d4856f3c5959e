"""bullmq (Python port): in-process asyncio ``Worker``; failed jobs land in the failed set."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import _common
from bullmq import Queue, Worker

QUEUE = "bench"


class System:
    def __init__(self, args: argparse.Namespace) -> None:
        self.opts = {"connection": args.redis}
        self.queue = Queue(QUEUE, self.opts)
        self.worker: Worker | None = None
        self.task: asyncio.Task[Any] | None = None

    async def setup(self) -> None:
        pass

    async def add(self, data: _common.Payload) -> None:
        await self.queue.add("bench", data)

    async def add_bulk(self, items: list[_common.Payload]) -> None:
        await self.queue.addBulk([{"name": "bench", "data": d} for d in items])

    async def start_worker(
        self, behaviour: str, concurrency: int, counter: _common.Counter
    ) -> None:
        async def process(job: Any, token: str) -> None:
            counter.started(job.data)
            if behaviour == "sleep":
                await asyncio.sleep(0.01)
            elif behaviour == "raise":
                raise RuntimeError("bench failure")

        self.worker = Worker(
            QUEUE, process, {**self.opts, "concurrency": concurrency, "autorun": False}
        )
        self.worker.on("completed", lambda *_: counter.hit())
        self.worker.on("failed", lambda *_: counter.hit())
        self.task = asyncio.create_task(self.worker.run())

    async def stop_worker(self) -> None:
        if self.worker is not None:
            await self.worker.close()
        if self.task is not None:
            await self.task

    async def failed_count(self) -> int:
        return int(await self.queue.getFailedCount())

    async def close(self) -> None:
        await self.queue.close()


if __name__ == "__main__":
    _common.main_async(System)
