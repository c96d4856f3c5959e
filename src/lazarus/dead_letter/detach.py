"""Purge of a whole store: its indexes detached at once, its dead letters then deleted in
bounded calls.

A purge whose filter covers every dead letter in the store (no filter but a status, and every
dead letter in one of the purge's statuses) has no index entry to keep right:
``detach_dead_letters`` renames the status indexes to detached keys of this purge and unlinks
the rest of the indexes, the counts and the original-id map, which Redis frees in the
background; the few dead letters that arrived since the purge began are indexed again. The
store then holds those alone, for every reader and writer; new dead letters enter fresh
indexes. ``drop_detached_dead_letters`` then deletes the detached dead letters' hashes and
logs, oldest first, a time budget per call. It waits while Redis frees the unlinked indexes in
the background (for at most ten seconds): both freeing at once on a busy machine stalls
Redis's commands for tens of milliseconds.

A detached key is listed in ``dl:p`` until it is empty. One left by a purge that stopped
half-way (its process killed, its connection lost) is dropped, once a minute old, by the dead
letter queue's next pruning or purge (:func:`drop_leftovers`), so no hash outlives its purge
for long. Until then such a dead letter is still found by its id, outside the store: no
operation but its deletion applies to it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import secrets
from typing import TYPE_CHECKING

from .. import _scripts
from .._connection import now_ms
from . import bulk
from .filters import LIVE_STATUSES, DeadLetterFilter

if TYPE_CHECKING:
    from .._connection import Client
    from .._keys import QueueKeys

# The most index keys (distinct values of the indexed fields) a detach unlinks in one call;
# a store with more is purged one dead letter at a time. Likewise the most dead letters arrived
# since the purge began that it indexes again (they stay).
MOST_INDEX_KEYS = 1_000
MOST_AFTER = 100
# How long one drop call may hold Redis (µs): half a replay or purge call's budget
# (_scripts.CALL_BUDGET_US); and the most dead letters it deletes.
DROP_BUDGET_US = 2_000
DROP_MOST = 20_000
# While Redis frees values in the background (the indexes a detach unlinked), a drop call
# yields, and the purge calls again this much later (s), for at most YIELD_FOR in all.
YIELD_WAIT, YIELD_FOR = 0.01, 10.0
# A purge finishes what other purges detached once they are this old (ms): a younger one is
# most likely still running.
LEFTOVER_AGE_MS = 60_000


def covers_store(flt: DeadLetterFilter) -> bool:
    """Whether ``flt`` selects by status alone (or not at all), so that a purge of it may
    cover the whole store."""
    return all(
        value is None
        for field, value in dataclasses.asdict(flt).items()
        if field not in ("status", "until")
    ) and (flt.until_ms is None or flt.until_ms >= now_ms())


async def purge(
    client: Client,
    keys: QueueKeys,
    max_events: int,
    flt: DeadLetterFilter,
    *,
    on_progress: bulk.Progress | None,
    rate: float | None,
    as_of: int | None = None,
    tally: str = "",
) -> int | None:
    """Purge the whole store when ``flt`` covers it (see the module): how many dead letters
    were purged, or ``None`` when the store holds one ``flt`` does not cover (nothing
    changed; purge one by one). Dead letters arrived after ``as_of`` (ms; by default now)
    stay. ``tally`` names a tally that counts the dead letters purged (``''`` for none)."""
    if not covers_store(flt):
        return None
    statuses = LIVE_STATUSES if flt.status is None else (str(flt.status),)
    now = now_ms()
    until = (now if as_of is None else as_of) * 1000 + 999  # a store score: arrivals by then
    token = f"{now}-{secrets.token_hex(4)}"
    reply = await _scripts.load("detach_dead_letters")(
        client,
        [keys.dl, keys.job_prefix],
        [",".join(statuses), until, token, MOST_INDEX_KEYS, MOST_AFTER, tally],
    )
    if not reply:
        return None
    detached = [_text(key) for key in reply[1:]]
    await drop(client, keys, max_events, detached, on_progress=on_progress, rate=rate)
    return int(reply[0])


async def drop(
    client: Client,
    keys: QueueKeys,
    max_events: int,
    detached: list[str],
    *,
    on_progress: bulk.Progress | None = None,
    rate: float | None = None,
) -> int:
    """Delete the dead letters of the ``detached`` keys, a bounded call at a time (at most
    ``rate`` a second); returns how many these calls deleted (a rival dropping the same keys
    deletes the rest)."""
    script = _scripts.load("drop_detached_dead_letters")
    started, done, yielded = asyncio.get_running_loop().time(), 0, 0.0
    most = DROP_MOST if rate is None else max(1, min(DROP_MOST, int(rate)))
    for key in detached:
        left = 1
        while left:
            patient = "1" if yielded < YIELD_FOR else "0"
            args = [max_events, DROP_BUDGET_US, most, now_ms(), patient]
            deleted, left, waits = await script(
                client, [keys.dl, keys.events, keys.meta, key, keys.job_prefix], args
            )
            if waits:
                yielded += YIELD_WAIT
                await asyncio.sleep(YIELD_WAIT)
                continue
            done += int(deleted)
            if on_progress is not None and deleted:
                await bulk.report(on_progress, done)
            await bulk.throttle(started, done, rate)
    return done


async def drop_leftovers(
    client: Client, keys: QueueKeys, max_events: int, *, older_than_ms: int = 0
) -> int:
    """Finish the purges that stopped half-way: delete what their detached keys still hold,
    of those detached over ``older_than_ms`` ago; returns how many dead letters that
    deleted. Dropping a key that its purge still drops is harmless: each dead letter goes
    once."""
    before = now_ms() - older_than_ms
    leftovers = sorted(
        key
        for key in (_text(k) for k in await client.smembers(keys.dl_detached))
        if _detached_at(keys, key) <= before
    )
    if not leftovers:
        return 0
    return await drop(client, keys, max_events, leftovers)


def _detached_at(keys: QueueKeys, key: str) -> int:
    """When ``key`` (``dl:p:<ms>-<random>:<status>``) was detached, in ms; 0 if unreadable."""
    stamp = key.removeprefix(keys.dl_detached + ":").split("-", 1)[0]
    return int(stamp) if stamp.isdigit() else 0


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
