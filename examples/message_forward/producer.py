"""The producer: puts forward jobs on the ``message-forward`` queue."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lazarus import Job, Queue

from .payload import ForwardJob
from .settings import Settings

JOB_NAME = "forward"


class Producer:
    """Adds :class:`ForwardJob` payloads to the queue with the service's job options.

    Example::

        job = await producer.send({"messageId": 42, "sourceChannelId": -100123,
                                   "text": "hello", "timestamp": "2026-02-17T09:30:00Z"})
    """

    def __init__(self, queue: Queue, settings: Settings) -> None:
        if queue.schema is None:
            raise ValueError("the producer's queue must check payloads (schema=ForwardJob)")
        self._queue = queue
        self._schema = queue.schema
        self._options = settings.job_options()

    async def send(self, message: ForwardJob | Mapping[str, Any]) -> Job:
        """Queue one message; a message already queued (same channel and id) is not queued
        again: its job is returned. Raises ``ValueError`` naming a field that does not fit,
        or an oversized payload, before anything is written."""
        parsed: ForwardJob = self._schema.parse(message)
        return await self._queue.add(JOB_NAME, parsed, job_id=parsed.job_id(), **self._options)

    async def send_many(self, messages: list[ForwardJob | Mapping[str, Any]]) -> list[Job]:
        """Queue many messages in a few round trips; all are checked before any is written."""
        jobs = []
        for index, message in enumerate(messages):
            parsed: ForwardJob = self._schema.parse(message, field=f"messages[{index}]")
            jobs.append(
                {"name": JOB_NAME, "data": parsed, "job_id": parsed.job_id(), **self._options}
            )
        return await self._queue.add_bulk(jobs)
