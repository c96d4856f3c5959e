"""The consumer: a lazarus worker that hands each message to the forwarder.

Forwarding itself comes later: the default forwarder logs the payload. A forwarder that
raises fails the attempt (retried with backoff, then dead-lettered); one that raises
``UnrecoverableError`` sends the job to the dead letter queue at once.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable

from lazarus import Job, Queue, Worker

from .payload import ForwardJob
from .settings import Settings

log = logging.getLogger("message_forward.consumer")

Forwarder = Callable[[ForwardJob], Awaitable[None]]


async def log_payload(message: ForwardJob) -> None:
    """The forwarder for now: log the payload, as JSON."""
    log.info("forward %s", json.dumps(message.model_dump(mode="json", by_alias=True)))


def build_worker(settings: Settings, forward: Forwarder, dead_letters: Queue) -> Worker:
    """The worker of the ``message-forward`` queue (not started: call ``run()``)."""

    async def process(job: Job, message: ForwardJob) -> None:
        await forward(message)

    worker = Worker(
        settings.queue,
        process,
        schema=ForwardJob,
        connection=settings.redis_url,
        prefix=settings.prefix,
        concurrency=settings.concurrency,
        dead_letter_queue=settings.dead_letter_queue,
        lock_duration=settings.lock_duration_ms,
        stalled_interval=settings.stalled_interval_ms,
        autorun=False,
    )

    trimming = asyncio.Lock()  # one trim at a time: two at once would both drop the excess

    async def dead_lettered(job: Job, dead_letter_id: str) -> None:
        log.warning("job %s failed for good: dead letter %s in %s", job.id, dead_letter_id,
                    settings.dead_letter_queue)  # fmt: skip
        async with trimming:
            await trim_dead_letters(dead_letters, settings.keep_failed)

    worker.on("deadLettered", dead_lettered)
    return worker


async def trim_dead_letters(dead_letters: Queue, keep: int) -> int:
    """Drop the oldest dead letters beyond ``keep``; returns how many were dropped.

    The failed-job history is bounded: without this, a forwarder down for days would grow
    the dead letter queue without limit.
    """
    excess = await dead_letters.get_dead_letter_count() - keep
    if excess <= 0:
        return 0
    dropped = await dead_letters.clean(0, limit=excess, state="waiting")
    log.warning("dropped the %d oldest dead letters (keeping %d)", len(dropped), keep)
    return len(dropped)
