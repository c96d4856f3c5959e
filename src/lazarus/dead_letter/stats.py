"""Dead letter statistics: totals by field from the store's counters (a bounded walk only for
substring searches and mixed time ranges), running counters and the per-minute arrival rate."""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import TYPE_CHECKING

from . import search, store
from .filters import DeadLetterFilter, check_now

if TYPE_CHECKING:
    from .._connection import Client
    from .._keys import QueueKeys


@dataclasses.dataclass(frozen=True)
class DeadLetterStats:
    """What :meth:`~lazarus.Queue.get_dead_letter_stats` found; times are ms since the epoch."""

    total: int
    by_name: dict[str, int]
    by_error_type: dict[str, int]
    by_source_queue: dict[str, int]
    by_reason: dict[str, int]
    oldest: int | None
    newest: int | None
    by_status: dict[str, int] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class DeadLetterCounters:
    """Running totals of a dead letter queue: dead letters received by (source queue,
    reason), and how many were replayed and purged."""

    dead_lettered: dict[tuple[str, str], int]
    replayed: int
    purged: int


def _sorted(counts: dict[str, int]) -> dict[str, int]:
    return dict(Counter(counts).most_common())


async def compute_stats(client: Client, keys: QueueKeys, flt: DeadLetterFilter) -> DeadLetterStats:
    """Statistics of the dead letters matching ``flt``."""
    groups = None if flt.scans or flt.timed else await store.grouped_counts(client, keys, flt)
    if groups is None:
        return await _walked_stats(client, keys, flt)
    total = sum(groups["s"].values())
    oldest, newest = await _ends(client, keys, flt)
    return DeadLetterStats(
        total=total,
        by_name=_sorted(groups["n"]),
        by_error_type=_sorted(groups["e"]),
        by_source_queue=_sorted(groups["q"]),
        by_reason=_sorted(groups["r"]),
        oldest=oldest,
        newest=newest,
        by_status=_sorted(groups["s"]),
    )


async def _ends(
    client: Client, keys: QueueKeys, flt: DeadLetterFilter
) -> tuple[int | None, int | None]:
    exact = flt.exact()
    held = await store.statuses(client, keys)
    only_live = set(held) <= set(store.LIVE_STATUSES)  # then no status filter means any
    if not flt.name_prefix and len(exact) <= 1 and (only_live or flt.status is not None):
        if exact:
            return await store.index_ends(client, [keys.dl_index(*next(iter(exact.items())))])
        every = [keys.dl_index("s", s) for s in held]
        return await store.index_ends(client, every)
    if not flt.name_prefix and not exact:
        live = [keys.dl_index("s", s) for s in held if s in store.LIVE_STATUSES]
        return await store.index_ends(client, live)
    ends: list[int | None] = []
    for order in ("oldest", "newest"):
        found: int | None = None
        async for result in search.walk(client, keys, flt, order=order, batch=1, detail=True):
            if result.matches:
                found = int(result.matches[0][6])
                break
        ends.append(found)
    return ends[0], ends[1]


async def _walked_stats(client: Client, keys: QueueKeys, flt: DeadLetterFilter) -> DeadLetterStats:
    groups: tuple[Counter[str], ...] = tuple(Counter() for _ in range(5))
    total, oldest, newest = 0, None, None
    async for result in search.walk(client, keys, flt, order="oldest", detail=True):
        for _id, source, name, error_type, reason, status, at, _score in result.matches:
            total += 1
            for counter, value in zip(groups, (name, error_type, source, reason, status)):
                counter[value] += 1
            when = int(at)
            oldest = when if oldest is None else min(oldest, when)
            newest = when if newest is None else max(newest, when)
    by_name, by_error, by_source, by_reason, by_status = (dict(c.most_common()) for c in groups)
    return DeadLetterStats(
        total, by_name, by_error, by_source, by_reason, oldest, newest, by_status
    )


async def counters(client: Client, keys: QueueKeys) -> DeadLetterCounters:
    """Running totals kept in the dead letter queue's meta hash."""
    dead: dict[tuple[str, str], int] = {}
    replayed = purged = 0
    async for field, value in client.hscan_iter(keys.meta, match="count:*"):
        name, count = str(field), int(value)
        if name == "count:replayed":
            replayed = count
        elif name == "count:purged":
            purged = count
        elif name.startswith("count:deadLettered:"):
            reason, _, source = name.removeprefix("count:deadLettered:").partition(":")
            dead[(source, reason)] = count
    return DeadLetterCounters(dead_lettered=dead, replayed=replayed, purged=purged)


async def rate(
    client: Client, keys: QueueKeys, minutes: int, now: int | None
) -> list[tuple[int, int]]:
    """Arrivals per minute over the last ``minutes`` (at most 120), oldest first."""
    if isinstance(minutes, bool) or not isinstance(minutes, int) or not 1 <= minutes <= 120:
        raise ValueError(f"minutes must be an int from 1 to 120, got {minutes!r}")
    current = check_now(now) // 60_000
    fields = [f"rate:{m}" for m in range(current - minutes + 1, current + 1)]
    counts = await client.hmget(keys.meta, fields)
    return [((current - minutes + 1 + i) * 60_000, int(c or 0)) for i, c in enumerate(counts)]
