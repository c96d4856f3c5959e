"""QueueEvents: follow a queue's events stream.

Every transition appends an event (``waiting``, ``active``, ``completed``, ``retrying``,
``failed``, ``deadLettered``, ``stalled``, ``delayed``, ``removed``, ``skipped``, ``retried``,
``paused``, ``resumed``, ``cleaned``, ``replayed``, ``purged``) with its fields, ``jobId``
among them.
Events are read from the moment :meth:`QueueEvents.wait_until_ready` returns.

Example::

    events = QueueEvents("payments")
    events.on("deadLettered", lambda args, event_id: alert(args["jobId"]))
    await events.wait_until_ready()
    ...
    async for name, args, event_id in events:   # or iterate instead of callbacks
        ...
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from ._codec import text as _text
from ._connection import CLIENT_TYPES, TRANSIENT_ERRORS, Client, blocking_ms, connect
from ._keys import QueueKeys, validate_name, validate_queue_name
from ._listeners import Listeners

log = logging.getLogger("lazarus.events")

EventCallback = Callable[[dict[str, str], str], Any]


class QueueEvents:
    """Reads the events of queue ``name`` as they happen."""

    def __init__(
        self,
        name: str,
        *,
        connection: str | Client | None = None,
        prefix: str = "lazarus",
        block_ms: int = 1000,
        last_event_id: str | None = None,
    ) -> None:
        self.name = validate_queue_name(name, "queue name")
        self.keys = QueueKeys(validate_name(prefix, "prefix"), name)
        self._owns_client = not isinstance(connection, CLIENT_TYPES)
        self._client = connect(connection)
        self._block_ms = block_ms
        self._last_id = last_event_id
        self._listeners = Listeners(log, f"events of {self.name}")
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    def on(self, event: str, callback: EventCallback) -> None:
        """Call ``callback(args, event_id)`` for every ``event``; ``"*"`` for all events (then
        ``args["event"]`` names it). Callbacks may be sync or async. Starts reading."""
        self._listeners.add(event, callback)
        if self._task is None and not self._closed:
            self._task = asyncio.get_running_loop().create_task(self._dispatch())

    def off(self, event: str, callback: EventCallback) -> None:
        """Stop calling ``callback`` for ``event`` (a callback never registered is ignored)."""
        self._listeners.remove(event, callback)

    async def wait_until_ready(self) -> None:
        """Fix the starting point: every event after this call is delivered."""
        if self._last_id is None:
            newest = await self._client.xrevrange(self.keys.events, count=1)
            self._last_id = _text(newest[0][0]) if newest else "0-0"

    async def _read(self) -> list[tuple[str, dict[str, str]]]:
        await self.wait_until_ready()
        reply: Any = await self._client.xread(
            {self.keys.events: self._last_id or "0-0"},
            block=blocking_ms(self._client, self._block_ms),
            count=500,
        )
        entries: list[tuple[str, dict[str, str]]] = []
        for _stream, messages in reply or []:
            for event_id, fields in messages:
                entries.append((_text(event_id), {_text(k): _text(v) for k, v in fields.items()}))
        if entries:
            self._last_id = entries[-1][0]
        return entries

    async def __aiter__(self) -> AsyncIterator[tuple[str, dict[str, str], str]]:
        """Yield ``(event, args, event_id)`` for each event, until :meth:`close`."""
        while not self._closed:
            for event_id, args in await self._read():
                yield args.get("event", ""), args, event_id

    async def _dispatch(self) -> None:
        failures = 0
        while not self._closed:
            try:
                entries = await self._read()
                failures = 0
            except TRANSIENT_ERRORS as exc:
                failures += 1
                log.warning("events of %s: %s", self.name, exc)
                await asyncio.sleep(min(0.1 * 2**failures, 5.0))
                continue
            for event_id, args in entries:
                await self._listeners.emit(args.get("event", ""), args, event_id, to=("*",))

    async def close(self) -> None:
        """Stop reading and release the connection."""
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._owns_client:
            await self._client.aclose()

    async def __aenter__(self) -> QueueEvents:
        await self.wait_until_ready()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
