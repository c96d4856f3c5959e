"""Who works on a queue: workers register in Redis and renew their registration (a
heartbeat); :func:`list_workers` reads the live ones.

A worker is live while its registration has not expired: ``HEARTBEAT_TTL`` after its last
heartbeat, sent every ``HEARTBEAT_INTERVAL``. A worker that closes leaves at once; one that
dies drops out when its registration expires, and the next heartbeat of any worker of the
queue removes its details.

Example::

    for worker in await list_workers(queue.client, queue.keys):
        print(worker.name, worker.running, worker.concurrency)
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import socket
from collections.abc import Callable
from typing import Any

from . import _scripts
from ._connection import REDIS_FAILURES, Client, now_ms
from ._keys import QueueKeys

HEARTBEAT_INTERVAL = 5.0  # seconds
HEARTBEAT_TTL = 15_000  # ms: three heartbeats missed

log = logging.getLogger("lazarus.worker")


@dataclasses.dataclass(frozen=True)
class WorkerInfo:
    """One live worker of a queue. Times are ms since the epoch."""

    name: str
    host: str
    pid: int
    concurrency: int
    running: int
    started_at: int
    last_seen: int
    remote: bool = False  # an OJS worker, over HTTP (lazarus.ojs.remote_workers)
    jobs: tuple[str, ...] = ()  # a remote worker's active jobs, as its last heartbeat named them


async def register(client: Client, keys: QueueKeys, name: str, details: dict[str, Any]) -> None:
    """Register (or renew) worker ``name`` of the queue with ``details`` (host, pid,
    concurrency, running, started_at, last_seen; JSON) until ``HEARTBEAT_TTL`` from now, and
    forget workers whose registration lapsed."""
    now = now_ms()
    await _scripts.load("beat_worker")(
        client, [keys.workers, keys.workers_info],
        [now, name, now + HEARTBEAT_TTL, json.dumps(details)],
    )  # fmt: skip


class Presence:
    """One worker's registration: ``run()`` renews it until ``stop()``, then removes it."""

    def __init__(
        self, client: Client, keys: QueueKeys, name: str, concurrency: int,
        running: Callable[[], int],
    ) -> None:  # fmt: skip
        self._client, self._keys, self._name = client, keys, name
        self._concurrency, self._running = concurrency, running
        self._started = now_ms()
        self._stop = asyncio.Event()

    async def beat(self) -> None:
        """Register (or renew) this worker, and forget workers whose registration expired."""
        details = {"host": socket.gethostname(), "pid": os.getpid(), "started_at": self._started,
                   "concurrency": self._concurrency, "running": self._running(),
                   "last_seen": now_ms()}  # fmt: skip
        await register(self._client, self._keys, self._name, details)

    async def run(self) -> None:
        """Heartbeat until :meth:`stop`; a failed heartbeat (Redis unreachable, or refusing
        writes: out of memory, busy, read-only) is retried at the next one (the claim loop
        reports the outage)."""
        while not self._stop.is_set():
            with contextlib.suppress(*REDIS_FAILURES):
                await self.beat()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._stop.wait(), HEARTBEAT_INTERVAL)

    def stop(self) -> None:
        self._stop.set()

    async def leave(self) -> None:
        """Remove this worker's registration (best effort: it expires anyway)."""
        try:
            async with self._client.pipeline(transaction=True) as pipe:
                pipe.zrem(self._keys.workers, self._name)
                pipe.hdel(self._keys.workers_info, self._name)
                await pipe.execute()
        except REDIS_FAILURES as exc:
            log.info("worker %s: could not unregister (%s); it expires", self._name, exc)


async def list_workers(client: Client, keys: QueueKeys) -> list[WorkerInfo]:
    """The live workers of the queue, by name."""
    names = [str(n) for n in await client.zrangebyscore(keys.workers, now_ms(), "+inf")]
    if not names:
        return []
    raw = await client.hmget(keys.workers_info, names)
    workers = []
    for name, text in zip(names, raw):
        info: dict[str, Any] = json.loads(text) if text else {}
        workers.append(WorkerInfo(
            name=name, host=str(info.get("host", "")), pid=int(info.get("pid", 0)),
            concurrency=int(info.get("concurrency", 0)), running=int(info.get("running", 0)),
            started_at=int(info.get("started_at", 0)), last_seen=int(info.get("last_seen", 0)),
            remote=info.get("remote") is True, jobs=tuple(str(j) for j in info.get("jobs", ())),
        ))  # fmt: skip
    return sorted(workers, key=lambda w: w.name)
