"""Worker(processes=N): plain-function processors in a pool of processes."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable

import pytest

from lazarus import Job, Queue, Worker

from .test_worker import on_count

MakeWorker = Callable[..., Worker]


def pid_and_sum(job: Job) -> dict[str, int]:
    """CPU work in a process of the pool: spawned processes import this module by name."""
    return {"pid": os.getpid(), "sum": sum(range(job.data["n"]))}


def log_from_a_process(job: Job) -> None:
    asyncio.run(job.log("from a process"))


async def test_jobs_run_in_other_processes_and_their_results_come_back(
    queue: Queue, make_worker: MakeWorker
) -> None:
    jobs = await queue.add_bulk([{"name": "sum", "data": {"n": 1000 + i}} for i in range(6)])
    make_worker(pid_and_sum, processes=2, concurrency=4)

    results = [await job.wait_until_finished(timeout=60) for job in jobs]

    assert [r["sum"] for r in results] == [sum(range(1000 + i)) for i in range(6)]
    pids = {r["pid"] for r in results}
    assert os.getpid() not in pids and 1 <= len(pids) <= 2


async def test_a_job_in_a_process_has_no_connection(queue: Queue, make_worker: MakeWorker) -> None:
    job = await queue.add("log")
    worker = make_worker(log_from_a_process, processes=1)

    await asyncio.wait_for(on_count(worker, "failed", 1).wait(), 60)

    stored = await queue.get_job(job.id)
    assert stored is not None and "not bound to a queue" in (stored.failed_reason or "")


async def test_processes_need_a_plain_function(redis_url: str) -> None:
    async def coroutine(job: Job) -> None:
        return None

    with pytest.raises(TypeError, match="processes"):
        Worker("jobs", coroutine, connection=redis_url, autorun=False, processes=2)
    with pytest.raises(ValueError, match="processes"):
        Worker("jobs", pid_and_sum, connection=redis_url, autorun=False, processes=0)
