"""Bulk replays and purges that run in the background of server processes, resumed by
another server when theirs stops.

:class:`BulkOperations` (one per app, built by the app factory: no globals) starts each
operation as an asyncio task of the process that was asked, calling the library's
``replay_all_dead_letters`` / ``purge_dead_letters`` with ``on_progress`` and, as ``as_of``,
the moment it began. Its record (:mod:`.operation_records`) says how far it got.

A server holds each operation it runs under a lease of :data:`LEASE` seconds, renewed six
times a lease. One that stops leaves its operations running and unheld: killed, its leases
run out; shut down (SIGTERM), it gives them up at once. Every server looks for such
operations when it starts and at each renewal round, claims one (``claim_operation.lua``)
and goes on with it from its snapshot: the library leaves alone what was replayed since the
operation began, so nothing is replayed twice, and a purge never deletes what arrived after.
A cancel ends an operation wherever it runs: its server learns it at its next write, as does
a server whose lease ran out and was claimed by another (``update_operation.lua``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import socket
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from .. import _scripts
from .._codec import text as _text
from .._connection import now_ms
from ..dead_letter import DeadLetterFilter
from ..dead_letter.bulk import check_batch, check_rate
from ..operators import Operators
from ..queue import Queue
from .operation_records import (
    RECORD_TTL,
    Action,
    BulkOperation,
    describe_filter,
    filter_of,
    operation_key,
    running_key,
)

log = logging.getLogger("lazarus.http")

LEASE = 30.0  # seconds a server holds an operation without renewing its lease
RENEWALS = 6  # lease renewal rounds per lease; each also looks for operations to resume
_ID = re.compile(r"[0-9a-f]{32}")


class OperationEnded(Exception):
    """The operation is not running (done, failed or cancelled): it cannot be cancelled."""


class _Lost(Exception):
    """The operation is no longer this server's to write: cancelled, or claimed by another
    server after this one's lease ran out."""


class BulkOperations:
    """The bulk operations this process runs, and the records of every process's."""

    def __init__(self, ops: Operators, *, ttl: int = RECORD_TTL, lease: float = LEASE) -> None:
        if isinstance(lease, bool) or not isinstance(lease, (int, float)) or not 1 <= lease <= 3600:
            raise ValueError(f"bulk_lease must be 1 to 3600 seconds, got {lease!r}")
        self._ops = ops
        self._ttl = ttl
        self._lease_ms = int(lease * 1000)
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._lost: set[str] = set()  # operations whose task stops without a write
        # Unique per app, not only per process: two apps of one process are two servers.
        self._server = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self._keeper: asyncio.Task[None] | None = None

    async def start(
        self,
        action: Action,
        queue_name: str,
        flt: DeadLetterFilter,
        *,
        dry_run: bool = False,
        rate: float | None = None,
        batch_size: int = 500,
    ) -> BulkOperation:
        """Record a new operation and start it in the background; returns its record."""
        if action not in ("replay", "purge"):
            raise ValueError(f"action must be 'replay' or 'purge', got {action!r}")
        check_rate(rate)
        check_batch(batch_size)
        queue = self._ops.queue(queue_name)
        now = now_ms()
        operation = BulkOperation(
            id=uuid.uuid4().hex, action=action, queue=queue.name, filter=describe_filter(flt),
            dry_run=dry_run, rate=None if rate is None else float(rate), batch_size=batch_size,
            status="running", matched=None, done=0, started_at=now, updated_at=now,
            finished_at=None, error=None, server=self._server,
            lease_until=now + self._lease_ms,
        )  # fmt: skip
        # Listed first: a server that dies before the record is written leaves an id that the
        # next look finds without a record, and forgets; the other way round, a record no one
        # would ever resume.
        await self._ops.client.zadd(running_key(self._ops.prefix), {operation.id: now})
        key = operation_key(self._ops.prefix, operation.id)
        async with self._ops.client.pipeline(transaction=True) as pipe:
            pipe.hset(key, mapping=operation.to_fields())  # type: ignore[arg-type]
            pipe.expire(key, self._ttl)
            await pipe.execute()
        self._launch(operation, queue, flt)
        await self.open()
        return operation

    async def get(self, operation_id: str) -> BulkOperation | None:
        """The record of operation ``operation_id``, whichever process runs it; ``None``
        when there is none (or it expired)."""
        if not isinstance(operation_id, str) or not _ID.fullmatch(operation_id):
            return None
        raw = await self._ops.client.hgetall(operation_key(self._ops.prefix, operation_id))
        fields = {_text(k): _text(v) for k, v in raw.items()}
        return BulkOperation.from_fields(fields) if fields else None

    async def cancel(self, operation_id: str) -> BulkOperation | None:
        """Cancel operation ``operation_id`` wherever it runs (what it did stays done); its
        record after, or ``None`` when there is none. Raises :class:`OperationEnded` when it
        is not running. Its server stops at its next write (a batch or two later)."""
        if await self.get(operation_id) is None:
            return None
        now = now_ms()
        if not await self._write(operation_id, "", status="cancelled", finished_at=now,
                                 updated_at=now, error="cancelled"):  # fmt: skip
            raise OperationEnded(f"bulk operation {operation_id} is not running")
        task = self._tasks.get(operation_id)
        if task is not None:
            self._lost.add(operation_id)
            task.cancel()
        await self._forget(operation_id)
        return await self.get(operation_id)

    @property
    def running(self) -> list[str]:
        """The ids of the operations this process is running."""
        return list(self._tasks)

    async def open(self) -> None:
        """Look after operations from now on: renew this server's leases, and resume those
        that no server holds (now, and at each renewal round). Called when the app starts,
        and by :meth:`start`; idempotent."""
        if self._keeper is None:
            self._keeper = asyncio.create_task(self._keep())

    async def close(self) -> None:
        """Stop this process's operations, and give their leases up: the next server to look
        resumes them (this one, started again, among them)."""
        keeper, self._keeper = self._keeper, None
        held = [i for i in self._tasks if i not in self._lost]
        tasks = [t for t in (keeper, *self._tasks.values()) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for operation_id in held:
            try:
                await self._write(operation_id, self._server, lease_until=0)
            except Exception:  # Redis is gone too: the lease runs out by itself
                log.exception("could not give up bulk operation %s", operation_id)

    async def look_after(self) -> list[str]:
        """One round: renew the leases of this server's operations, then claim and resume
        those that no server holds; returns the ids of those resumed."""
        now = now_ms()
        for operation_id, task in list(self._tasks.items()):
            if not await self._write(operation_id, self._server,
                                     lease_until=now + self._lease_ms):  # fmt: skip
                self._lost.add(operation_id)  # cancelled, or another server has it
                task.cancel()
        return await self._resume(now)

    # -- internals ----------------------------------------------------------------------------

    async def _keep(self) -> None:
        while True:
            try:
                await self.look_after()
            except Exception:  # Redis away: the next round tries again
                log.exception("could not look after the bulk operations")
            await asyncio.sleep(self._lease_ms / 1000 / RENEWALS)

    async def _resume(self, now: int) -> list[str]:
        client, prefix = self._ops.client, self._ops.prefix
        resumed = []
        for operation_id in (_text(i) for i in await client.zrange(running_key(prefix), 0, 999)):
            if operation_id in self._tasks:
                continue
            reply = await _scripts.load("claim_operation")(
                client, [operation_key(prefix, operation_id)],
                [now, self._lease_ms, self._server, self._ttl],
            )  # fmt: skip
            if reply == -1:
                await self._forget(operation_id)  # ended, or its record expired
                continue
            if not reply:
                continue  # a server holds it
            fields = {_text(reply[i]): _text(reply[i + 1]) for i in range(0, len(reply), 2)}
            operation = BulkOperation.from_fields(fields)
            log.warning(
                "resuming bulk %s %s of %r, begun at %d, %d done so far", operation.action,
                operation.id, operation.queue, operation.started_at, operation.done,
            )  # fmt: skip
            try:
                flt = filter_of(operation.filter)
            except (TypeError, ValueError) as exc:
                await self._finish_failed(operation, f"its filter no longer holds: {exc}")
                continue
            self._launch(operation, self._ops.queue(operation.queue), flt)
            resumed.append(operation_id)
        return resumed

    def _launch(self, operation: BulkOperation, queue: Queue, flt: DeadLetterFilter) -> None:
        task = asyncio.create_task(self._run(operation, queue, flt))
        self._tasks[operation.id] = task
        task.add_done_callback(lambda _: self._tasks.pop(operation.id, None))

    async def _write(self, operation_id: str, server: str, **fields: Any) -> bool:
        """Set ``fields`` of a running operation's record, if ``server`` holds it ('' for
        any); whether it did."""
        pairs = [part for name, value in fields.items() for part in (name, str(value))]
        written = await _scripts.load("update_operation")(
            self._ops.client, [operation_key(self._ops.prefix, operation_id)],
            [server, self._ttl, *pairs],
        )  # fmt: skip
        return bool(written)

    async def _update(self, operation_id: str, **fields: Any) -> None:
        """Write this server's progress or end of an operation; raises :class:`_Lost` when it
        is not this server's any more."""
        if not await self._write(operation_id, self._server, updated_at=now_ms(), **fields):
            raise _Lost(operation_id)

    async def _forget(self, operation_id: str) -> None:
        await self._ops.client.zrem(running_key(self._ops.prefix), operation_id)

    async def _run(self, operation: BulkOperation, queue: Queue, flt: DeadLetterFilter) -> None:
        # What it did counts in a tally named by its id, which every server that runs it adds
        # to as it acts: a resume counts what a killed server did and never reported. A record
        # that says more (one begun before tallies) keeps its count. The tally is read when the
        # run begins and when it ends; in between, this server adds what it reports.
        before = operation.done
        try:
            if not operation.dry_run and not operation.resumes:
                # The exact count when the store has one; a text filter would need a scan.
                matched = (await queue.search_dead_letters(flt, limit=1)).total
                if matched is not None:
                    await self._update(operation.id, matched=matched)

            async def tallied() -> int:
                return max(before, await queue.get_dead_letter_tally(operation.id))

            base = await tallied() if operation.resumes else before

            async def progress(done: int) -> None:
                await self._update(operation.id, done=base + done)

            call: Callable[..., Awaitable[int]] = queue.replay_all_dead_letters
            if operation.action == "purge":
                call = queue.purge_dead_letters
            tally = None if operation.dry_run else operation.id
            done = await call(
                flt, batch_size=operation.batch_size, on_progress=progress,
                rate=operation.rate, dry_run=operation.dry_run, as_of=operation.started_at,
                tally=tally,
            )  # fmt: skip
            final = {"matched": done, "done": 0} if operation.dry_run else {"done": await tallied()}
            await self._update(operation.id, status="done", finished_at=now_ms(), **final)
            await self._forget(operation.id)
        except _Lost:
            log.info("bulk operation %s was cancelled, or another server holds it", operation.id)
        except Exception as exc:
            log.exception("bulk %s %s of %r failed", operation.action, operation.id, queue.name)
            await self._finish_failed(operation, f"{type(exc).__name__}: {exc}")
        finally:
            self._lost.discard(operation.id)

    async def _finish_failed(self, operation: BulkOperation, error: str) -> None:
        try:
            await self._update(operation.id, status="failed", error=error, finished_at=now_ms())
            await self._forget(operation.id)
        except _Lost:
            pass
        except Exception:  # Redis is gone too: the lease runs out, and a server resumes it
            log.exception("could not record the failure of bulk operation %s", operation.id)
