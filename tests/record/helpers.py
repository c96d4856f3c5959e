"""Helpers of the record's tests: dead letters made by a real worker."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lazarus import Job, Queue, UnrecoverableError, Worker

from ..conftest import wait_until


async def reject(job: Job) -> None:
    raise UnrecoverableError(f"rejected {job.name}")


async def dead_letter(
    make_worker: Callable[..., Worker], queue: Queue, dlq: Queue, jobs: list[tuple[str, Any]]
) -> list[Job]:
    """Add ``jobs`` (name, data) to ``queue`` and let a worker dead-letter every job of
    ``queue`` into ``dlq``; returns the dead letters, newest first."""
    before = await dlq.get_dead_letter_count()
    waiting = await queue.get_waiting_count()
    worker = make_worker(reject, queue.name, dead_letter_queue=dlq.name)
    for name, data in jobs:
        await queue.add(name, data)

    async def arrived() -> bool:
        return await dlq.get_dead_letter_count() == before + waiting + len(jobs)

    await wait_until(arrived, message=f"{len(jobs)} dead letters")
    await worker.close()
    return await dlq.get_dead_letter_jobs(0, waiting + len(jobs) - 1)
