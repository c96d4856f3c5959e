"""lazarus: in-process asyncio ``Worker``; failing jobs go to a dead letter queue."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import _common

from lazarus import Job, Queue, Worker

QUEUE, DLQ = "bench", "bench-dlq"


class Failure(Exception):
    pass


class System:
    def __init__(self, args: argparse.Namespace) -> None:
        self.url = args.redis
        self.queue = Queue(QUEUE, connection=self.url)
        self.dlq = Queue(DLQ, connection=self.url)
        self.worker: Worker | None = None
        self.task: asyncio.Task[Any] | None = None

    async def setup(self) -> None:
        pass

    async def add(self, data: _common.Payload) -> None:
        await self.queue.add("bench", data)

    async def add_bulk(self, items: list[_common.Payload]) -> None:
        await self.queue.add_bulk([{"name": "bench", "data": d} for d in items])

    async def start_worker(
        self, behaviour: str, concurrency: int, counter: _common.Counter
    ) -> None:
        async def process(job: Job) -> None:
            counter.started(job.data)
            if behaviour == "sleep":
                await asyncio.sleep(0.01)
            elif behaviour == "raise":
                raise Failure("bench failure")

        self.worker = Worker(
            QUEUE,
            process,
            connection=self.url,
            concurrency=concurrency,
            dead_letter_queue=DLQ,
            autorun=False,
        )
        self.worker.on("completed", lambda *_: counter.hit())
        self.worker.on("failed", lambda *_: counter.hit())
        self.task = asyncio.create_task(self.worker.run())

    async def stop_worker(self) -> None:
        if self.worker is not None and self.task is not None:
            await self.worker.close()
            await self.task

    async def failed_count(self) -> int:
        return await self.dlq.get_dead_letter_count()

    async def close(self) -> None:
        await self.queue.close()
        await self.dlq.close()


if __name__ == "__main__":
    _common.main_async(System)
