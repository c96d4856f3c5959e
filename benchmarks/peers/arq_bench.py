"""arq: in-process ``Worker`` (``max_jobs`` = concurrency); ``--variant fast`` sets
``poll_delay=0.01`` (default 0.5 s). A failing job's result (``success=False``) is its failed
store; arq keeps results (``keep_result``) by default."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from typing import Any

import _common
from arq import create_pool
from arq.connections import ArqRedis, RedisSettings
from arq.worker import Worker, func


class System:
    bulk_na = "arq has no bulk enqueue"

    def __init__(self, args: argparse.Namespace) -> None:
        self.settings = RedisSettings.from_dsn(args.redis)
        self.poll_delay = 0.01 if args.variant == "fast" else 0.5
        self.pool: ArqRedis | None = None
        self.worker: Worker | None = None
        self.task: asyncio.Task[Any] | None = None

    async def setup(self) -> None:
        self.pool = await create_pool(self.settings)

    async def add(self, data: _common.Payload) -> None:
        assert self.pool is not None
        await self.pool.enqueue_job("bench", data)

    async def start_worker(
        self, behaviour: str, concurrency: int, counter: _common.Counter
    ) -> None:
        async def bench(ctx: Any, data: _common.Payload) -> None:
            counter.started(data)
            if behaviour == "sleep":
                await asyncio.sleep(0.01)
            elif behaviour == "raise":
                raise RuntimeError("bench failure")

        async def after_job_end(ctx: Any) -> None:
            counter.hit()

        self.worker = Worker(
            functions=[func(bench, name="bench", max_tries=1)],
            redis_settings=self.settings,
            max_jobs=concurrency,
            poll_delay=self.poll_delay,
            after_job_end=after_job_end,
            handle_signals=False,
        )
        self.task = asyncio.create_task(self.worker.async_run())

    async def stop_worker(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.task
        if self.worker is not None:
            await self.worker.close()

    async def failed_count(self) -> int:
        assert self.pool is not None
        results = await self.pool.all_job_results()
        return sum(1 for r in results if not r.success)

    async def close(self) -> None:
        if self.pool is not None:
            await self.pool.aclose()


if __name__ == "__main__":
    _common.main_async(System)
