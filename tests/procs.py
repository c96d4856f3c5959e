"""Processors for tests that run a worker in a separate process (``lazarus worker``)."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from lazarus import DeadLetterError, Job, UnrecoverableError
from lazarus._connection import connect


async def _mark(marker: str) -> None:
    client = connect(os.environ["LAZARUS_REDIS_URL"])
    await client.rpush(marker, f"{os.getpid()}")
    await client.aclose()


async def mark_then_hang(job: Job) -> None:
    """Record that the job started (in Redis), then hang until the process is killed."""
    client = connect(os.environ["LAZARUS_REDIS_URL"])  # a cluster's URL too
    await client.rpush(job.data["marker"], f"{os.getpid()}")
    await client.aclose()
    await asyncio.sleep(3600)


def echo(job: Job) -> Any:
    return job.data


# Exceptions a dead-lettering test can ask for by name in the job's data.
ERRORS: dict[str, type[Exception]] = {
    "TimeoutError": TimeoutError,
    "ConnectionError": ConnectionError,
    "ValueError": ValueError,
    "UnrecoverableError": UnrecoverableError,
    "DeadLetterError": DeadLetterError,
}


async def fail_as_told(job: Job) -> None:
    """Raise the exception named by ``job.data["error"]`` (default ``RuntimeError``)."""
    raise ERRORS.get(job.data.get("error", ""), RuntimeError)(job.data.get("message", "boom"))


def mark_then_block(job: Job) -> None:
    """A plain function: record that the job started, then block its thread for good."""
    import threading

    asyncio.run(_mark(job.data["marker"]))
    threading.Event().wait()
