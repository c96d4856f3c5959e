"""Draining a dead letter queue's outbox through a Redis Streams consumer group.

The scripts that change a dead letter append an entry to its queue's outbox stream
(``<prefix>:{<dlq>}:dl:x``) in the same step, but only while the outbox is enabled
(``dl:x:on``): an outbox that nothing drains never grows. Each drainer — the record exporter,
each webhook endpoint — is one consumer group, so each sees every entry; several processes of
one drainer share its group and split the entries. An entry is acknowledged once applied; an
entry a crashed process had taken is claimed again by another after ``claim_idle_ms`` with
``XAUTOCLAIM``. Entries every group has acknowledged are trimmed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from redis.exceptions import ResponseError

from .. import _scripts
from .._connection import Client
from .._keys import QueueKeys

SNAPSHOT = "h:"


@dataclasses.dataclass(frozen=True)
class OutboxEntry:
    """One change of a dead letter, as its script appended it.

    ``position`` is the stream entry id: the changes of one dead letter queue in the order they
    happened. ``snapshot`` holds the dead letter's fields when the change removed it, else is
    empty (the dead letter's hash is still there to read). ``values`` holds, on arrival, the
    dead letter's indexed values (``q`` source queue, ``n`` name, ``e`` error type, ``r``
    reason). ``arrival``, when given, places the dead letter among its queue's arrivals in
    place of ``position`` (a dead letter copied from the store rather than read from the
    outbox: its position is 0-0, which any later change outranks).
    """

    queue: str
    position: str
    event: str
    id: str
    at: int
    status: str
    snapshot: Mapping[str, str]
    values: Mapping[str, str] = dataclasses.field(default_factory=dict)
    arrival: str = ""

    @property
    def sort_key(self) -> str:
        """``position`` as text that sorts in stream order (for the record's guard column)."""
        return stream_order(self.position)

    @property
    def arrival_key(self) -> str:
        """Where the dead letter arrived, as text that sorts in stream order."""
        return stream_order(self.arrival or self.position)


def stream_order(position: str) -> str:
    """A stream entry id (``<ms>-<seq>``) as text that sorts in stream order."""
    ms, _, seq = position.partition("-")
    return f"{int(ms):015d}-{int(seq or 0):010d}"


def parse_entry(queue: str, position: str, fields: Mapping[str, str]) -> OutboxEntry:
    """The :class:`OutboxEntry` of one stream entry of queue ``queue``'s outbox."""
    at = fields.get("at") or position.partition("-")[0]
    snapshot = {k[len(SNAPSHOT) :]: v for k, v in fields.items() if k.startswith(SNAPSHOT)}
    return OutboxEntry(
        queue=queue,
        position=position,
        event=fields.get("event", ""),
        id=fields.get("id", ""),
        at=int(at),
        status=fields.get("status", ""),
        snapshot=snapshot,
        values={k[2:]: v for k, v in fields.items() if k.startswith("v:")},
    )


class Outbox:
    """One consumer group's view of the outboxes of a prefix's dead letter queues.

    >>> outbox = Outbox(redis, "lazarus", group="record", consumer="host:123")
    >>> await outbox.enable("emails-dlq")
    >>> entries = await outbox.take("emails-dlq", count=100)
    """

    def __init__(
        self, redis: Client, prefix: str, *, group: str, consumer: str, claim_idle_ms: int = 30_000
    ) -> None:
        self.redis = redis
        self.prefix = prefix
        self.group = group
        self.consumer = consumer
        self.claim_idle_ms = claim_idle_ms

    def keys(self, queue: str) -> QueueKeys:
        """The key names of dead letter queue ``queue``."""
        return QueueKeys(self.prefix, queue)

    async def dead_letter_queues(self) -> list[str]:
        """The names of every dead letter queue of the prefix, sorted."""
        names: Any = await self.redis.smembers(QueueKeys(self.prefix, "_").dead_letter_registry)
        return sorted(names)

    async def enable(self, queue: str) -> bool:
        """Create this group on ``queue``'s outbox (from the oldest entry kept) and switch the
        outbox on. Returns whether the group is new: the dead letters that arrived before it
        are then not (all) in the outbox, and a caller may want to copy them."""
        keys = self.keys(queue)
        created = True
        try:
            await self.redis.xgroup_create(keys.dl_outbox, self.group, id="0", mkstream=True)
        except ResponseError as error:
            if "BUSYGROUP" not in str(error):
                raise
            created = False
        # The group exists before the marker: no entry is appended that it could miss.
        await self.redis.set(keys.dl_outbox_enabled, "1")
        return created

    async def copied(self, queue: str) -> bool:
        """Whether this group copied ``queue``'s dead letters that predate the outbox."""
        return bool(await self.redis.exists(self.keys(queue).dl_outbox_copied(self.group)))

    async def mark_copied(self, queue: str) -> None:
        """Note that this group's copy of ``queue``'s earlier dead letters is complete."""
        await self.redis.set(self.keys(queue).dl_outbox_copied(self.group), "1")

    async def forget(self, queue: str) -> None:
        """Drop this group from ``queue``'s outbox (a drainer retired for good, whose
        unacknowledged entries would otherwise be kept forever); when no group is left, switch
        the outbox off and delete it."""
        keys = self.keys(queue)
        # One script: a drainer enabling the outbox meanwhile must not see it deleted (or
        # switched off) after its group was created (forget_outbox.lua).
        left = await _scripts.load("forget_outbox")(
            self.redis, [keys.dl_outbox, keys.dl_outbox_enabled, keys.dl_outbox_copied(self.group)],
            [self.group],
        )  # fmt: skip
        if int(left):
            await self.trim(queue)

    async def take(self, queue: str, *, count: int) -> list[OutboxEntry]:
        """Up to ``count`` entries for this consumer: first those another consumer took and
        left unacknowledged for ``claim_idle_ms`` (it crashed), then new ones."""
        stream = self.keys(queue).dl_outbox
        reply: Any = await self.redis.xautoclaim(
            stream, self.group, self.consumer, self.claim_idle_ms, "0-0", count=count
        )
        raw: list[tuple[str, dict[str, str]]] = [e for e in reply[1] if e and e[1] is not None]
        if len(raw) < count:
            fresh: Any = await self.redis.xreadgroup(
                self.group, self.consumer, {stream: ">"}, count=count - len(raw)
            )
            for _, entries in fresh or []:
                raw.extend(entries)
        return [parse_entry(queue, position, fields) for position, fields in raw]

    async def pending(self, queue: str, *, count: int) -> list[OutboxEntry]:
        """Up to ``count`` entries this consumer took and has not acknowledged, oldest first."""
        reply: Any = await self.redis.xreadgroup(
            self.group, self.consumer, {self.keys(queue).dl_outbox: "0"}, count=count
        )
        entries = [(p, f) for _, items in reply or [] for p, f in items if f is not None]
        return [parse_entry(queue, position, fields) for position, fields in entries]

    async def ack(self, queue: str, positions: list[str]) -> None:
        """Acknowledge entries applied for good."""
        if positions:
            await self.redis.xack(self.keys(queue).dl_outbox, self.group, *positions)

    async def trim(self, queue: str) -> int:
        """Delete the entries every group has acknowledged; returns how many went."""
        stream = self.keys(queue).dl_outbox
        groups = await self.redis.xinfo_groups(stream)
        if not groups:
            return 0
        floor: tuple[int, int] | None = None
        for group in groups:
            oldest = await self._oldest_needed(stream, group)
            floor = oldest if floor is None or oldest < floor else floor
        assert floor is not None
        return int(
            await self.redis.xtrim(stream, minid=f"{floor[0]}-{floor[1]}", approximate=False)
        )

    async def _oldest_needed(self, stream: str, group: Mapping[str, object]) -> tuple[int, int]:
        # The oldest entry a group may still need: its oldest unacknowledged one, else the one
        # after the last it was given. Both only ever move forward, so trimming below is safe.
        if int(str(group["pending"])) > 0:
            summary = await self.redis.xpending(stream, str(group["name"]))
            if summary["min"] is not None:  # else acknowledged since the group was read
                return _split(str(summary["min"]))
        ms, seq = _split(str(group["last-delivered-id"]))
        return ms, seq + 1


def _split(position: str) -> tuple[int, int]:
    ms, _, seq = position.partition("-")
    return int(ms), int(seq or 0)
