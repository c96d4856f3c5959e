"""The service: the queue, its dead letter queue, the producer and the consumer, started and
stopped together, and the health report."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from redis.exceptions import RedisError

from lazarus import Queue, RedisUnavailableError, Worker

from .consumer import Forwarder, build_worker, log_payload
from .payload import ForwardJob
from .producer import Producer
from .settings import Settings

log = logging.getLogger("message_forward")


class RedisDownError(RuntimeError):
    """Redis cannot be reached at start-up: the service refuses to start."""


class Service:
    """The ``message-forward`` service.

    Example::

        service = Service(Settings.from_env())
        await service.start()                  # raises RedisDownError at once if Redis is down
        await service.producer.send(message)
        print(await service.health())
        await service.stop()
    """

    def __init__(self, settings: Settings, forward: Forwarder = log_payload) -> None:
        self.settings = settings
        self.forward = forward
        self.queue = Queue(
            settings.queue, connection=settings.redis_url, prefix=settings.prefix,
            schema=ForwardJob, max_payload_bytes=settings.max_payload_bytes,
        )  # fmt: skip
        self.dead_letters = Queue(
            settings.dead_letter_queue, connection=settings.redis_url, prefix=settings.prefix
        )
        self.producer = Producer(self.queue, settings)
        self.worker: Worker | None = None
        self._run: asyncio.Task[None] | None = None

    async def check_redis(self) -> None:
        """Raise :class:`RedisDownError` with a clear message if Redis does not answer within
        ``connect_timeout_s``."""
        where = self.queue.client.connection_pool.connection_kwargs
        address = where.get("path") or f"{where.get('host')}:{where.get('port')}"
        try:
            await asyncio.wait_for(self.queue.client.ping(), self.settings.connect_timeout_s)
        except (RedisError, OSError, asyncio.TimeoutError) as exc:
            raise RedisDownError(
                f"message-forward cannot start: Redis at {address} does not answer "
                f"({type(exc).__name__}: {exc}). Start Redis (`lazarus redis`, or "
                "`docker run -p 6379:6379 redis:7`) or set LAZARUS_REDIS_URL."
            ) from None

    async def start(self, *, consume: bool = True) -> None:
        """Check Redis (fail fast), then start the consumer unless ``consume`` is false."""
        await self.check_redis()
        if consume:
            self.worker = build_worker(self.settings, self.forward, self.dead_letters)
            self._run = asyncio.create_task(self.worker.run())
        log.info("message-forward started (queue %s, dead letters in %s)",
                 self.settings.queue, self.settings.dead_letter_queue)  # fmt: skip

    async def stop(self) -> None:
        """Let running jobs finish, then close every connection."""
        if self.worker is not None:
            await self.worker.close()
        if self._run is not None:
            await asyncio.gather(self._run, return_exceptions=True)
        await self.queue.close()
        await self.dead_letters.close()

    async def health(self) -> dict[str, Any]:
        """Redis reachability beside the queue's statistics; ``status`` is ``ok`` or
        ``unavailable``."""
        try:
            await self.queue.client.ping()
            counts = await self.queue.get_job_counts()
            depth = await self.dead_letters.get_dead_letter_count()
            paused = await self.queue.is_paused()
        except (RedisUnavailableError, RedisError, OSError) as exc:
            log.warning("health check: Redis is unavailable: %s", exc)
            return {"status": "unavailable", "redis": {"reachable": False, "error": str(exc)}}
        return {
            "status": "ok",
            "redis": {"reachable": True},
            "queue": {
                "name": self.settings.queue,
                "active": counts["active"],
                "waiting": counts["waiting"] + counts["prioritized"] + counts["paused"],
                "delayed": counts["delayed"],
                "failed": counts["failed"],
                "completed": counts["completed"],
                "paused": paused,
            },
            "deadLetterQueue": {"name": self.settings.dead_letter_queue, "depth": depth},
            "consumer": {"running": self.worker is not None and self.worker.running},
        }
