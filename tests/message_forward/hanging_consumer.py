"""A consumer process that takes one job and hangs in it, for the crash recovery test:
``python -m tests.message_forward.hanging_consumer <redis url> <prefix>``."""

from __future__ import annotations

import asyncio
import os
import sys

import redis.asyncio as aioredis
from examples.message_forward import ForwardJob, Service, Settings


async def main(url: str, prefix: str) -> None:
    async def hang(message: ForwardJob) -> None:
        client = aioredis.Redis.from_url(url)
        await client.rpush(f"{prefix}:started", os.getpid())
        await client.aclose()
        await asyncio.sleep(3600)  # until the test kills this process

    settings = Settings(redis_url=url, prefix=prefix, concurrency=1,
                        lock_duration_ms=1000, stalled_interval_ms=500)  # fmt: skip
    service = Service(settings, forward=hang)
    await service.start()
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
