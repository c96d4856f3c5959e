"""Sends script calls (and the few raw commands beside them) to the Redis Cluster node that
owns their keys' slot.

A call goes straight to a connection of that node, as on a single Redis (``execute``), so the
same reply-memo rules hold: a dropped connection is followed by a second send only when the
commands are ``repeatable``, a timeout never. What a cluster adds:

- Commands are grouped by the slot of their first key; each group is one write to its
  slot's master. A queue's keys share one slot (its hash tag), so a group is nearly always
  every command of the call. No command spans two slots: a script's keys carry one tag.
- ``MOVED`` (the slot has another master: resharding, failover): the topology is read again
  and the refused commands go to the new owner. Refused, they never ran: sending them again
  is safe for every script.
- ``ASK`` (the slot is migrating and the keys are on the target already): ``ASKING`` then
  the command, on one connection of the target, once.
- ``CLUSTERDOWN`` and ``TRYAGAIN`` (no master for the slot yet; a multi-key command while its
  slot migrates, some keys moved and some not, as every script creating a key meets it):
  refused unrun, so sent again after growing pauses (about 13 s in all) and a topology
  refresh; past that the last refusal is the reply.
- A dropped connection to a master that died: the topology is refreshed before the second
  send, so it reaches the replica promoted in its place.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.connection import AbstractConnection
from redis.exceptions import (
    AskError,
    ClusterDownError,
    MovedError,
    RedisClusterException,
    SlotNotCoveredError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError

from ._coalesce import resent

MAX_REDIRECTS = 16
MAX_SENDS_AFTER_DROP = 3
RETRY_PAUSE = 0.1
MAX_PAUSE_STEPS = 10  # the longest pause is RETRY_PAUSE * this: about 13 s over all redirects

Sender = Callable[
    [AbstractConnection, Sequence[Sequence[Any]], "float | None"], Awaitable[list[Any]]
]


def slot_of(client: RedisCluster, command: Sequence[Any]) -> int:
    """The slot of ``command``'s first key (FCALL, EVALSHA: its first KEYS entry)."""
    name = str(command[0]).upper()
    if name in ("FCALL", "EVALSHA", "EVAL"):
        if int(command[2]) == 0:
            return 0  # no keys: any node runs it
        return client.keyslot(command[3])
    return client.keyslot(command[1])


async def execute(
    client: RedisCluster,
    commands: Sequence[Sequence[Any]],
    send: Sender,
    *,
    timeout: float | None,
    repeatable: bool,
) -> list[Any]:
    """Run ``commands`` on their slots' masters; replies in the order of ``commands``."""
    await client.initialize()
    groups: dict[int, list[int]] = {}
    for index, command in enumerate(commands):
        groups.setdefault(slot_of(client, command), []).append(index)
    replies: list[Any] = [None] * len(commands)
    for slot, indexes in groups.items():
        batch = [commands[i] for i in indexes]
        for index, reply in zip(indexes, await _on_slot(client, slot, batch, send, timeout,
                                                        repeatable), strict=True):  # fmt: skip
            replies[index] = reply
    return replies


async def _on_slot(
    client: RedisCluster,
    slot: int,
    commands: Sequence[Sequence[Any]],
    send: Sender,
    timeout: float | None,
    repeatable: bool,
) -> list[Any]:
    # As sent next: one whose reply a dropped connection lost goes again as resent().
    sending = dict(enumerate(commands))
    replies: list[Any] = [None] * len(commands)
    pending = list(range(len(commands)))
    asking: dict[int, str] = {}  # command index -> the node an ASK named
    drops = waits = 0
    for _ in range(MAX_REDIRECTS):
        if not pending:
            return replies
        by_node: dict[str, list[int]] = {}
        for index in pending:
            by_node.setdefault(asking.get(index) or _master(client, slot).name, []).append(index)
        pending, asked_before, asking = [], asking, {}
        for name, indexes in by_node.items():
            node = client.get_node(node_name=name) or _master(client, slot)
            batch = [sending[i] for i in indexes]
            try:
                got = await _send(node, batch, send, timeout, asked=indexes[0] in asked_before)
            except RedisConnectionError:
                drops += 1
                if not repeatable or drops >= MAX_SENDS_AFTER_DROP:
                    raise
                pending.extend(indexes)  # the master may have died: see who serves it now
                sending.update({i: resent(sending[i]) for i in indexes})
                continue
            for index, reply in zip(indexes, got, strict=True):
                if isinstance(reply, AskError) and not isinstance(reply, MovedError):
                    asking[index] = f"{reply.host}:{reply.port}"
                    pending.append(index)
                elif isinstance(reply, (MovedError, ClusterDownError, TryAgainError)):
                    pending.append(index)
                else:
                    replies[index] = reply
        if len(asking) < len(pending):  # MOVED, CLUSTERDOWN, TRYAGAIN or a dropped connection
            # Growing pauses: a migration or a failover takes seconds, not milliseconds.
            waits += 1
            await asyncio.sleep(RETRY_PAUSE * min(2 ** (waits - 1), MAX_PAUSE_STEPS))
            await refresh(client)
    for index in pending:  # still redirected: report the last refusal
        replies[index] = ClusterDownError(f"slot {slot} kept moving after {MAX_REDIRECTS} tries")
    return replies


def _master(client: RedisCluster, slot: int) -> ClusterNode:
    try:
        return client.nodes_manager.get_node_from_slot(slot)
    except SlotNotCoveredError:  # mid-failover: as transient as a dropped connection
        raise RedisConnectionError(f"no master serves slot {slot} yet") from None


async def refresh(client: RedisCluster) -> None:
    """Read the cluster's topology again (which master serves which slots); a failure is
    left for the next send to report."""
    with contextlib.suppress(RedisConnectionError, ClusterDownError, RedisClusterException):
        await client.nodes_manager.initialize()


async def _send(
    node: ClusterNode,
    commands: Sequence[Sequence[Any]],
    send: Sender,
    timeout: float | None,
    *,
    asked: bool,
) -> list[Any]:
    """One write of ``commands`` to ``node`` (each behind ``ASKING`` when ``asked``)."""
    wire = [c for command in commands for c in (("ASKING",), command)] if asked else commands
    conn = node.acquire_connection()
    try:
        replies = await send(conn, wire, timeout)
    except RedisConnectionError:
        await conn.disconnect()
        raise
    finally:
        node.release(conn)
    return replies[1::2] if asked else replies
