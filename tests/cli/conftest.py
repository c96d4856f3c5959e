"""Helpers for the CLI tests: dead letters made by a real worker, and the CLI in a thread.

``CliRunner.invoke`` is synchronous and the CLI runs its own ``asyncio.run``, so async tests
call it through ``asyncio.to_thread``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from click.testing import CliRunner, Result

from lazarus import Job, Queue, Worker
from lazarus.cli import main

Invoke = Callable[..., Awaitable[Result]]
MakeWorker = Callable[..., Worker]


async def fail(job: Job) -> None:
    """Fail with the error the payload asks for (``{"error": "timeout"}``), else a ValueError."""
    if job.data.get("error") == "timeout":
        raise TimeoutError(f"upstream timed out for {job.name}")
    raise ValueError(f"bad input: {job.data}")


async def dead_letter(
    queue: Queue, make_worker: MakeWorker, *jobs: tuple[str, dict[str, Any]], attempts: int = 1
) -> list[str]:
    """Add ``(name, data)`` jobs, let a failing worker dead-letter every one into "jobs-dlq",
    and return the dead letters' ids in the order they arrived."""
    ids: list[str] = []
    all_dead = asyncio.Event()

    def arrived(job: Job, dead_letter_id: str) -> None:
        ids.append(dead_letter_id)
        if len(ids) == len(jobs):
            all_dead.set()

    worker = make_worker(fail, dead_letter_queue="jobs-dlq")
    worker.on("deadLettered", arrived)
    for name, data in jobs:
        await queue.add(name, data, attempts=attempts)
    await asyncio.wait_for(all_dead.wait(), 10)
    await worker.close()
    return ids


@pytest.fixture
def invoke(redis_url: str, prefix: str) -> Invoke:
    """Run ``lazarus *args`` against this test's Redis and prefix."""

    async def call(*args: str, input: str | None = None) -> Result:
        full = [*args, "--redis-url", redis_url, "--prefix", prefix]
        runner = CliRunner(env={"COLUMNS": "200"})
        return await asyncio.to_thread(runner.invoke, main, full, input=input)

    return call


def parsed(result: Result) -> Any:
    """The JSON document a ``--json`` command printed (failing loudly if it did not succeed)."""
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)
