"""Coalesced calls: the commands that many tasks send at about the same time share one write.

A worker's slots finish their jobs at about the same time, and so do the tasks of a producer
adding jobs one by one. Sent one by one, each call costs a socket write, a read and the
client's per-call bookkeeping; the socket write alone was the largest single cost of a busy
worker. Here every call submitted while a batch is on its way waits for the next one, and a
batch goes out as one write on one connection; Redis answers in order, and each caller gets
its own reply. So a lone call goes out at once (the next turn of the event loop), and under
load the batch size follows the load by itself: whatever is ready when the connection frees
up, up to :data:`MAX_BATCH` commands and :data:`MAX_BATCH_BYTES` bytes.

The byte cap keeps the two batches on their way taking turns in Redis. Redis reads a
client's input 16 KiB at a time and serves its clients in turn: a larger batch is run
interleaved with the other batch, both end at about the same time, and their callers then
run side by side while Redis waits. With dead-lettering calls (a stack trace and the attempt
each) at concurrency 50 that cost a quarter of the rate.

Each command stays what it was: one script, atomic on its own, with its own reply (an error
reply is that caller's exception, not the batch's). A dropped connection fails the batch; its
commands that are harmless to send twice (``repeatable``) are sent again, each on its own, as
:func:`~lazarus._scripts.execute` would have; the others raise, since they may have run.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from .._connection import Client

MAX_BATCH = 256  # commands in one write; a batch larger than this waits for the next
MAX_BATCH_BYTES = 16 * 1024  # and bytes, as Redis reads them (a lone larger command goes alone)
IN_FLIGHT = 2  # batches on their way at once (each on its own connection)

Execute = Callable[..., Awaitable[list[Any]]]
_Call = tuple[Sequence[Any], bool, "asyncio.Future[Any]"]


class Coalescer:
    """The batches of one connection pool."""

    def __init__(self, client: Client, execute: Execute) -> None:
        # Weakly: the pool is this object's key in a weak dictionary, and the client holds
        # the pool. The client of the latest call: every client of a pool will do, and a
        # caller keeps its own alive while its call is on its way.
        self.client = weakref.ref(client)
        self._execute = execute
        self._pending: list[_Call] = []
        self._flushers = 0
        self._tasks: set[asyncio.Task[None]] = set()  # the loop keeps weak references only
        self._alone = False  # a call on its way by itself
        self.limit = MAX_BATCH
        # Whether a call that finds nothing on its way goes at once, without a batch: the
        # fastest for calls that come one at a time; a worker turns it off (its slots' calls
        # come together, and it sends them in halves).
        self.alone_first = True

    async def call(self, command: Sequence[Any], repeatable: bool) -> Any:
        """The reply of ``command`` (an exception for an error reply)."""
        if self.alone_first and not (self._alone or self._flushers or self._pending):
            self._alone = True
            try:
                (reply,) = await self._execute(self._live(), [command], repeatable=repeatable)
            finally:
                self._alone = False
            return reply
        return await self.submit(command, repeatable)

    def submit(self, command: Sequence[Any], repeatable: bool) -> asyncio.Future[Any]:
        """The reply of ``command`` (an exception for an error reply), once its batch is back."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._pending.append((command, repeatable, future))
        if self._flushers + self._alone < IN_FLIGHT:  # a call on its way alone counts
            self._flushers += 1
            task = loop.create_task(self._flush())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return future

    def _live(self) -> Client:
        client = self.client()
        if client is None:  # pragma: no cover - a caller awaiting a reply holds its client
            raise RuntimeError("the client of these calls is gone")
        return client

    async def _flush(self) -> None:
        try:
            while self._pending:
                size = _batch_size(self._pending, self.limit)
                batch = [call for call in self._pending[:size] if not call[2].done()]
                del self._pending[:size]
                if batch:
                    await self._send(batch)
        finally:
            self._flushers -= 1

    async def _send(self, batch: list[_Call]) -> None:
        commands = [command for command, _, _ in batch]
        repeatable = all(again for _, again, _ in batch)
        try:
            replies = await self._execute(self._live(), commands, repeatable=repeatable)
        except BaseException as error:
            await self._failed(batch, error)
            if isinstance(error, asyncio.CancelledError):
                raise
            return
        for (_, _, future), reply in zip(batch, replies):
            if not future.done():
                future.set_result(reply)

    async def _failed(self, batch: list[_Call], error: BaseException) -> None:
        """A batch whose replies are lost: what may be sent twice goes again on its own."""
        # A batch of repeatable commands only was sent again already, as the client's retry
        # policy says; in a mixed batch, the repeatable ones have not been.
        mixed = any(again for _, again, _ in batch) and not all(again for _, again, _ in batch)
        retry = mixed and not isinstance(error, asyncio.CancelledError)
        for command, repeatable, future in batch if retry else ():
            if not repeatable:
                continue
            try:
                (reply,) = await self._execute(self._live(), [resent(command)], repeatable=True)
            except Exception as failure:
                _settle(future, failure)
            else:
                if not future.done():
                    future.set_result(reply)
        for _, _, future in batch:
            _settle(future, error)


def _batch_size(pending: list[_Call], limit: int) -> int:
    """How many of the ``pending`` calls go in the next batch: at most ``limit``, and no more
    than :data:`MAX_BATCH_BYTES` of packed commands (at least one). A command packed ahead
    (:class:`Packed`) counts its bytes; any other counts as small."""
    total = 0
    for count, (command, _, _) in enumerate(pending[:limit]):
        wire = getattr(command, "wire", None)
        total += len(wire) if wire is not None else 0
        if total > MAX_BATCH_BYTES and count > 0:
            return count
    return min(len(pending), limit)


class Packed(tuple[Any, ...]):
    """A command, with ``wire``: its bytes in the Redis protocol, packed once when it is made
    (they size its batch, and are what is sent); and ``again``, when a second send must say
    that it is one (:func:`resent`)."""

    wire: bytes
    again: Callable[[], Packed] | None = None


def resent(command: Sequence[Any]) -> Sequence[Any]:
    """``command`` as sent again after a dropped connection lost its reply (its first send may
    have run): the variant its ``again`` makes, if it has one, else itself."""
    again = getattr(command, "again", None)
    return command if again is None else again()


def _settle(future: asyncio.Future[Any], error: BaseException) -> None:
    if future.done():
        return
    if isinstance(error, asyncio.CancelledError):
        future.cancel()
    else:
        future.set_exception(error)


_ATTRIBUTE = "_lazarus_coalescer"  # on the pool object: the batches go with the pool


def coalescer(client: Client, execute: Execute) -> Coalescer:
    """The coalescer of ``client``'s connection pool (of a client without one, such as a
    cluster client, which keeps a pool per node: of the client itself)."""
    holder = getattr(client, "connection_pool", None) or client
    found: Coalescer | None = vars(holder).get(_ATTRIBUTE)
    if found is None:
        found = Coalescer(client, execute)
        setattr(holder, _ATTRIBUTE, found)
    elif found.client() is not client:
        found.client = weakref.ref(client)
    return found
