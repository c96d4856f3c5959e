"""Bulk replays and purges that run in the background of a server process, and their records.

:class:`BulkOperations` (one per app, built by the app factory: no globals) starts each
operation as an asyncio task of the process that was asked, calling the library's
``replay_all_dead_letters`` / ``purge_dead_letters`` with ``on_progress``, and keeps the
tasks so that shutting the app down stops them. What each operation is and how far it got
lives in Redis, in a hash under :func:`operation_key` that expires :data:`RECORD_TTL` seconds
after its last update, so that every server process of the prefix can report on it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import re
import socket
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal, cast

from .._codec import text as _text
from .._connection import now_ms
from ..dead_letter import DeadLetterFilter
from ..dead_letter.bulk import check_rate
from ..operators import Operators
from ..queue import Queue

log = logging.getLogger("lazarus.http")

Action = Literal["replay", "purge"]
Status = Literal["running", "done", "failed"]
RECORD_TTL = 24 * 3600
STOPPED = "the server stopped before the operation finished"
_ID = re.compile(r"[0-9a-f]{32}")


def operation_key(prefix: str, operation_id: str) -> str:
    """The key of a bulk operation's record: ``<prefix>:bulkops:<id>``. It belongs to the
    server, not to a queue, so it carries no hash tag."""
    return f"{prefix}:bulkops:{operation_id}"


def describe_filter(flt: DeadLetterFilter) -> dict[str, Any]:
    """The fields of ``flt`` that are set, times in ms: what the record shows."""
    described: dict[str, Any] = {}
    for field in dataclasses.fields(flt):
        value = getattr(flt, field.name)
        if value is not None:
            described[field.name] = str(value) if field.name == "status" else value
    if flt.since is not None:
        described["since"] = flt.since_ms
    if flt.until is not None:
        described["until"] = flt.until_ms
    return described


@dataclasses.dataclass(frozen=True)
class BulkOperation:
    """One bulk operation: what was asked, where it stands, and how far it got. ``matched``
    is how many matched when it began (``None`` when counting needs a scan); ``done`` how
    many were replayed or purged so far (0 for a dry run, whose count is ``matched``).
    Times are ms since the epoch."""

    id: str
    action: Action
    queue: str
    filter: dict[str, Any]
    dry_run: bool
    rate: float | None
    batch_size: int
    status: Status
    matched: int | None
    done: int
    started_at: int
    updated_at: int
    finished_at: int | None
    error: str | None
    server: str

    def to_fields(self) -> dict[str, str]:
        """The record's hash fields."""
        values = dataclasses.asdict(self)
        values["filter"] = json.dumps(self.filter, sort_keys=True)
        values["dry_run"] = "1" if self.dry_run else ""
        return {k: "" if v is None else str(v) for k, v in values.items()}

    @classmethod
    def from_fields(cls, fields: Mapping[str, str]) -> BulkOperation:
        def number(name: str) -> int | None:
            return int(fields[name]) if fields.get(name) else None

        return cls(
            id=fields["id"], action=cast(Action, fields["action"]), queue=fields["queue"],
            filter=json.loads(fields.get("filter") or "{}"), dry_run=bool(fields.get("dry_run")),
            rate=float(fields["rate"]) if fields.get("rate") else None,
            batch_size=int(fields["batch_size"]), status=cast(Status, fields["status"]),
            matched=number("matched"), done=int(fields.get("done") or 0),
            started_at=int(fields["started_at"]), updated_at=int(fields["updated_at"]),
            finished_at=number("finished_at"), error=fields.get("error") or None,
            server=fields.get("server", ""),
        )  # fmt: skip


class BulkOperations:
    """The bulk operations this process runs, and the records of every process's."""

    def __init__(self, ops: Operators, *, ttl: int = RECORD_TTL) -> None:
        self._ops = ops
        self._ttl = ttl
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._server = f"{socket.gethostname()}:{os.getpid()}"

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
        if (
            isinstance(batch_size, bool)
            or not isinstance(batch_size, int)
            or not 1 <= batch_size <= 5000
        ):
            raise ValueError(f"batch_size must be an int from 1 to 5000, got {batch_size!r}")
        queue = self._ops.queue(queue_name)
        now = now_ms()
        operation = BulkOperation(
            id=uuid.uuid4().hex, action=action, queue=queue.name, filter=describe_filter(flt),
            dry_run=dry_run, rate=None if rate is None else float(rate), batch_size=batch_size,
            status="running", matched=None, done=0, started_at=now, updated_at=now,
            finished_at=None, error=None, server=self._server,
        )  # fmt: skip
        await self._write(operation)
        task = asyncio.create_task(self._run(operation, queue, flt))
        self._tasks[operation.id] = task
        task.add_done_callback(lambda _: self._tasks.pop(operation.id, None))
        return operation

    async def get(self, operation_id: str) -> BulkOperation | None:
        """The record of operation ``operation_id``, whichever process runs it; ``None``
        when there is none (or it expired)."""
        if not isinstance(operation_id, str) or not _ID.fullmatch(operation_id):
            return None
        raw = await self._ops.client.hgetall(operation_key(self._ops.prefix, operation_id))
        fields = {_text(k): _text(v) for k, v in raw.items()}
        return BulkOperation.from_fields(fields) if fields else None

    @property
    def running(self) -> list[str]:
        """The ids of the operations this process is running."""
        return list(self._tasks)

    async def close(self) -> None:
        """Stop this process's operations; their records say so."""
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _write(self, operation: BulkOperation) -> None:
        key = operation_key(self._ops.prefix, operation.id)
        fields: dict[Any, Any] = operation.to_fields()
        async with self._ops.client.pipeline(transaction=True) as pipe:
            pipe.hset(key, mapping=fields)
            pipe.expire(key, self._ttl)
            await pipe.execute()

    async def _update(self, operation: BulkOperation, **changes: Any) -> BulkOperation:
        changed = dataclasses.replace(operation, **changes, updated_at=now_ms())
        await self._write(changed)
        return changed

    async def _run(self, operation: BulkOperation, queue: Queue, flt: DeadLetterFilter) -> None:
        current = operation
        try:
            if not operation.dry_run:
                # The exact count when the store has one; a text filter would need a scan.
                matched = (await queue.search_dead_letters(flt, limit=1)).total
                current = await self._update(current, matched=matched)

            async def progress(done: int) -> None:
                nonlocal current
                current = await self._update(current, done=done)

            call: Callable[..., Awaitable[int]] = queue.replay_all_dead_letters
            if operation.action == "purge":
                call = queue.purge_dead_letters
            done = await call(
                flt, batch_size=operation.batch_size, on_progress=progress,
                rate=operation.rate, dry_run=operation.dry_run,
            )  # fmt: skip
            final = {"matched": done, "done": 0} if operation.dry_run else {"done": done}
            await self._update(current, status="done", finished_at=now_ms(), **final)
        except asyncio.CancelledError:
            await self._finish_failed(current, STOPPED)
            raise
        except Exception as exc:
            log.exception("bulk %s %s of %r failed", operation.action, operation.id, queue.name)
            await self._finish_failed(current, f"{type(exc).__name__}: {exc}")

    async def _finish_failed(self, operation: BulkOperation, error: str) -> None:
        try:
            await self._update(operation, status="failed", error=error, finished_at=now_ms())
        except Exception:  # Redis is gone too: the record stays "running" until it expires
            log.exception("could not record the failure of bulk operation %s", operation.id)
