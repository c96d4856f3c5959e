"""The lazarus adapter: :class:`adapter.QueueAdapter` on the public lazarus API only."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import ceiling
from adapter import Behaviour, Hooks, Payload

from lazarus import Job, Queue, UnrecoverableError, Worker
from lazarus import __version__ as lazarus_version

QUEUE = "bench"
DEAD_LETTER_QUEUE = "bench-dlq"
JOB_NAME = "bench"
MEMORY_SAMPLE = 200


class BenchFailure(Exception):
    """What the failing processors raise."""


async def _noop(job: Job) -> None:
    return None


async def _sleep_10ms(job: Job) -> None:
    await asyncio.sleep(0.01)


async def _raise(job: Job) -> None:
    raise BenchFailure("bench failure")


async def _raise_unrecoverable(job: Job) -> None:
    raise UnrecoverableError("bench failure")


_PROCESSORS: dict[Behaviour, Callable[[Job], Awaitable[None]]] = {
    "noop": _noop,
    "sleep_10ms": _sleep_10ms,
    "raise": _raise,
    "raise_unrecoverable": _raise_unrecoverable,
}


def _processor(behaviour: Behaviour, hooks: Hooks) -> Callable[[Job], Awaitable[None]]:
    """The processor for ``behaviour``; wrapped only when the workload wants ``on_start``."""
    inner = _PROCESSORS[behaviour]
    on_start = hooks.on_start
    if on_start is None:
        return inner

    async def timed(job: Job) -> None:
        on_start(float(job.timestamp))
        await inner(job)

    return timed


class LazarusQueue:
    """The queue ``bench`` and its dead letter queue ``bench-dlq`` under one key prefix."""

    def __init__(self, url: str, prefix: str, worker_options: dict[str, Any]) -> None:
        self.url = url
        self.prefix = prefix
        self.worker_options = worker_options
        self.queue = Queue(QUEUE, connection=url, prefix=prefix)
        self.dlq = Queue(DEAD_LETTER_QUEUE, connection=url, prefix=prefix)

    async def add(self, payload: Payload) -> None:
        await self.queue.add(JOB_NAME, payload)

    async def add_bulk(self, payloads: Sequence[Payload]) -> None:
        await self.queue.add_bulk([{"name": JOB_NAME, "data": p} for p in payloads])

    @contextlib.asynccontextmanager
    async def worker(
        self, behaviour: Behaviour, *, concurrency: int, hooks: Hooks, dead_letter: bool = False
    ) -> AsyncIterator[None]:
        worker = Worker(
            QUEUE,
            _processor(behaviour, hooks),
            connection=self.url,
            prefix=self.prefix,
            concurrency=concurrency,
            dead_letter_queue=DEAD_LETTER_QUEUE if dead_letter else None,
            autorun=False,
            **self.worker_options,
        )

        def finished(*_: Any) -> None:
            hooks.on_finished()

        # "failed" is emitted for failed and dead-lettered jobs alike; "retrying" is not final.
        worker.on("completed", finished)
        worker.on("failed", finished)
        task = asyncio.create_task(worker.run())
        try:
            yield
        finally:
            await worker.close()
            await task

    async def dead_letter_count(self) -> int:
        return await self.dlq.get_dead_letter_count()

    async def replay_all_dead_letters(self) -> int:
        return await self.dlq.replay_all_dead_letters()

    async def purge_dead_letters(self) -> int:
        return await self.dlq.purge_dead_letters()

    async def used_memory(self) -> int:
        info = await self.queue.client.info("memory")
        return int(info["used_memory"])

    async def memory_details(self) -> dict[str, float]:
        """Bytes of an average dead letter hash, of the dead letter store's indexes per dead
        letter, and of the structures around them."""
        client = self.queue.client
        ids = [job.id for job in await self.dlq.get_dead_letter_jobs(0, MEMORY_SAMPLE - 1)]
        sizes = [await client.memory_usage(self.dlq.keys.job(i), samples=0) or 0 for i in ids]
        count = await self.dlq.get_dead_letter_count()
        store = 0
        async for key in client.scan_iter(match=self.dlq.keys.dl + "*"):
            store += await client.memory_usage(key, samples=0) or 0
        details: dict[str, float] = {
            "dead_letter_hash_bytes": sum(sizes) / len(sizes) if sizes else 0.0,
            "store_index_bytes_per_dead_letter": store / count if count else 0.0,
        }
        for label, key in (
            ("dlq_events_bytes", self.dlq.keys.events),
            ("source_events_bytes", self.queue.keys.events),
        ):
            details[label] = float(await client.memory_usage(key, samples=0) or 0)
        return details

    async def close(self) -> None:
        for queue in (self.queue, self.dlq):
            await queue.obliterate()
            await queue.close()


class LazarusAdapter:
    """lazarus against the Redis at ``url``; workers use lazarus's default options, except
    ``block_timeout`` when given (it only bounds how long an idle worker blocks)."""

    name = "lazarus"
    supports_dead_letters = True

    def __init__(self, url: str, *, block_timeout: float | None = None) -> None:
        self.url = url
        self.worker_options: dict[str, Any] = {}
        if block_timeout is not None:
            self.worker_options["block_timeout"] = block_timeout

    def versions(self) -> dict[str, str]:
        found = {"lazarus": lazarus_version}
        for package in ("redis", "hiredis"):
            try:
                found[package] = importlib.metadata.version(package)
            except importlib.metadata.PackageNotFoundError:
                found[package] = "not installed"
        return found

    async def ceiling(self, n: int, concurrency: int) -> float:
        """The Redis ceiling for ``n`` no-op jobs at ``concurrency`` (``ceiling.py``)."""
        figures = await asyncio.to_thread(ceiling.measure, self.url, n, concurrency)
        return figures["ceiling"]

    async def redis_cpu_seconds(self) -> float:
        """The CPU time Redis has used so far (user and system, every thread)."""
        queue = Queue(QUEUE, connection=self.url)
        try:
            cpu = await queue.client.info("cpu")
        finally:
            await queue.close()
        return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])

    async def round_trip(self, n: int) -> dict[str, float]:
        """The floor of anything awaited one round trip at a time (``ceiling.round_trip``)."""
        return await ceiling.round_trip(self.url, n)

    async def open(self, namespace: str) -> LazarusQueue:
        return LazarusQueue(self.url, namespace, self.worker_options)
