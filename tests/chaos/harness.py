"""One scenario's parts: its own redis-server, worker processes, queues, and the wait for the
queue to settle. Everything it starts is stopped when the scenario ends, pass or fail."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from lazarus import Queue, _scripts
from lazarus._connection import connect, now_ms
from lazarus._keys import QueueKeys
from lazarus.queue import DEFAULT_MAX_EVENTS

from ..cluster import LocalCluster
from .audit import judge, snapshot
from .jobs import JobSpec
from .pool import RunLog, WorkerPool
from .redis_server import RedisServer
from .report import Findings

PREFIX = "chaos"
STOP_GRACE = 10.0  # seconds a worker may take to exit after SIGTERM (shutdown_timeout is 5)
FINDINGS = pytest.StashKey[list[Findings]]()
Server = RedisServer | LocalCluster  # what a scenario's queues and workers connect to


async def wait_for(condition: Callable[[], Awaitable[bool]], timeout: float) -> bool:
    """Poll ``condition`` until it holds (True) or ``timeout`` seconds pass (False); with
    ``timeout=0``, look once. Errors count as "not yet": the condition may read a Redis that
    is being restarted."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if await condition():
                return True
        except Exception:  # a read during a fault: try again
            pass
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.05)


async def sweep_when_lapsed(
    raw: Any, keys: QueueKeys, dlq_keys: QueueKeys, *, max_stalled: int = 1
) -> int:
    """Once no lease of ``keys``'s queue runs any more, sweep it as a worker with
    ``max_stalled`` stalls allowed and ``dlq_keys``'s queue as its dead letter queue would,
    until nothing is left; returns how many jobs it swept."""

    async def lapsed() -> bool:
        return not await raw.zrangebyscore(keys.leases, now_ms(), "+inf")

    assert await wait_for(lapsed, 30), "leases still ran 30 s after the workers stopped"
    script_keys = [*keys.group, keys.failed, *dlq_keys.dead_letter_group, dlq_keys.job_prefix]
    swept = 0
    while True:
        reply = await _scripts.load("sweep_stalled")(
            raw, script_keys, [now_ms(), max_stalled, DEFAULT_MAX_EVENTS, keys.queue,
                               dlq_keys.queue, 100, 0, 4000],
        )  # fmt: skip
        if not any(reply[:3]):
            return swept
        swept += sum(len(ids) for ids in reply[:3])


class Scenario:
    """The parts of one scenario, and its findings."""

    def __init__(self, name: str, tmp: Path, config: pytest.Config) -> None:
        self.name = name
        self.tmp = tmp
        self._config = config
        self.started = time.monotonic()
        self.servers: list[RedisServer] = []
        self.clusters: list[LocalCluster] = []
        self.pools: list[WorkerPool] = []
        self.queues: list[Queue] = []
        self.clients: list[Any] = []
        self.stubborn = 0

    def redis(self, *, appendfsync: str | None = None) -> RedisServer:
        server = RedisServer(self.tmp / f"redis{len(self.servers)}", appendfsync=appendfsync)
        self.servers.append(server.start())
        return server

    def cluster(self) -> LocalCluster:
        """A local Redis Cluster (three masters, three replicas) of this scenario's own."""
        cluster = LocalCluster()
        self.clusters.append(cluster.start())
        return cluster

    def workers(
        self, server: Server, queue: str, *, dlq: str | None = "dlq", **options: Any
    ) -> WorkerPool:
        """A pool of worker processes on ``queue``; ``options`` go to ``Worker``."""
        options.setdefault("block_timeout", 0.5)
        options.setdefault("shutdown_timeout", 5.0)
        pool = WorkerPool(
            self.tmp / f"runs-{queue}", url=server.url, prefix=PREFIX,
            queue=queue, dlq=dlq, options=options,
        )  # fmt: skip
        self.pools.append(pool)
        return pool

    def queue(self, server: Server, name: str) -> Queue:
        queue = Queue(name, connection=server.url, prefix=PREFIX)
        self.queues.append(queue)
        return queue

    def raw(self, server: Server) -> Any:
        """A client for reading keys (a cluster client on a cluster)."""
        client: Any = connect(server.url)
        self.clients.append(client)
        return client

    async def settle(self, queue: Queue, timeout: float) -> bool:
        """Wait until no job of ``queue`` is waiting, delayed or active."""

        async def settled() -> bool:
            counts = await queue.get_job_counts()
            return sum(counts[s] for s in counts if s not in ("completed", "failed")) == 0

        return await wait_for(settled, timeout)

    async def audit(
        self, findings: Findings, server: Server, queue: str, specs: list[JobSpec],
        healthy: Callable[[str], bool] | None,
    ) -> Findings:  # fmt: skip
        """Judge every job of ``specs`` in ``queue`` (its dead letters in ``dlq``): see
        :func:`audit.judge`."""
        dlq = self.queue(server, "dlq")
        snap = await snapshot(self.raw(server), PREFIX, queue, dlq)
        runs = RunLog.read(self.tmp / f"runs-{queue}")
        return judge(findings, specs, snap, runs, healthy, label=queue)

    async def finish(self, findings: Findings) -> None:
        """Stop the workers, record and print the scenario's row, then fail the scenario if a
        guarantee is broken."""
        await self.stop_workers()
        findings.seconds = time.monotonic() - self.started
        if self.stubborn:
            findings.notes.append(f"workers still running {STOP_GRACE:.0f} s after SIGTERM "
                                  f"(then SIGKILLed): {self.stubborn}")  # fmt: skip
        self._config.stash.setdefault(FINDINGS, []).append(findings)
        reporter = self._config.pluginmanager.get_plugin("terminalreporter")
        capture = self._config.pluginmanager.get_plugin("capturemanager")
        if reporter is not None and capture is not None:
            with capture.global_and_fixture_disabled():  # the row shows as the scenario ends
                reporter.write_line("")
                reporter.write_line(findings.row())
                reporter.write_line(findings.detail())
        findings.check()

    async def stop_workers(self) -> int:
        """SIGTERM the workers (SIGKILL after a grace period); returns how many needed it."""
        stubborn = 0
        for pool in self.pools:
            stubborn += await asyncio.to_thread(pool.stop, STOP_GRACE)
        self.stubborn += stubborn
        return stubborn

    async def close(self) -> None:
        await self.stop_workers()
        for queue in self.queues:
            await queue.close()
        for client in self.clients:
            await client.aclose()
        for server in self.servers:
            server.stop()
        for cluster in self.clusters:
            await asyncio.to_thread(cluster.stop)
