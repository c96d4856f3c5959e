"""The dead letter store of one dead letter queue, read without scripts: exact counts from its
count hash, distinct values, ends of its indexes.

The store's keys (``<prefix>:{<dlq>}:dl:*``, see ``docs/redis-keys.md``) are written only by
the Lua scripts that move dead letters in and out (``includes/store.lua``): an arrival-ordered
index of every dead letter, one index per value of each exact field (source queue, job name,
error type, reason, status), the distinct values of each field, and a count for every
combination of field values, so that any combination is counted without reading entries.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from .._keys import validate_name
from .filters import INDEXED, DeadLetterFilter, combo_key

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from .._keys import QueueKeys

# A name prefix is counted exactly (and walked index by index) while it matches this many
# distinct job names at most; beyond, it is checked entry by entry.
MAX_PREFIX_NAMES = 64
MAX_DISTINCT_VALUES = 10_000
# The statuses whose dead letters still wait for a decision: what seed 000's count and pages
# (get_dead_letter_count, get_dead_letter_jobs) cover.
LIVE_STATUSES = ("pending", "manual", "failed")


@dataclasses.dataclass(frozen=True)
class DeadLetterQueueOptions:
    """Where a worker sends jobs that fail for good."""

    queue_name: str

    def __post_init__(self) -> None:
        if not isinstance(self.queue_name, str) or not self.queue_name:
            raise ValueError("dead_letter_queue.queue_name must be a non-empty str")
        validate_name(self.queue_name, "dead_letter_queue.queue_name")


async def names_with_prefix(client: Redis, keys: QueueKeys, prefix: str) -> list[str] | None:
    """The distinct job names in the store that start with ``prefix``; ``None`` when there
    are more than :data:`MAX_PREFIX_NAMES`."""
    names = await client.zrange(
        keys.dl_values("n"), f"[{prefix}", f"({prefix}\xff", bylex=True, offset=0,
        num=MAX_PREFIX_NAMES + 1,
    )  # fmt: skip
    if len(names) > MAX_PREFIX_NAMES:
        return None
    return [_text(n) for n in names]


async def statuses(client: Redis, keys: QueueKeys) -> list[str]:
    """The statuses that hold dead letters; their indexes partition the store."""
    return [_text(s) for s in await client.zrange(keys.dl_values("s"), 0, -1)]


async def count_in(
    client: Redis, keys: QueueKeys, status_names: tuple[str, ...] | list[str], flt: DeadLetterFilter
) -> int:
    """How many dead letters of these statuses fall in the filter's time range."""
    low, high = flt.score_range()
    async with client.pipeline(transaction=False) as pipe:
        for status in status_names:
            pipe.zcount(keys.dl_index("s", status), low, high)
        counts = await pipe.execute()
    return sum(int(c) for c in counts)


async def exact_count(client: Redis, keys: QueueKeys, flt: DeadLetterFilter) -> int | None:
    """How many dead letters match ``flt``, from counters and index sizes alone; ``None``
    when that needs entries to be read (substring searches, a time range with several exact
    filters or a name prefix, a name prefix over too many names)."""
    if flt.scans:
        return None
    exact = flt.exact()
    if flt.timed:
        if len(exact) > 1 or flt.name_prefix:
            return None
        if not exact:
            return await count_in(client, keys, await statuses(client, keys), flt)
        low, high = flt.score_range()
        return int(await client.zcount(keys.dl_index(*next(iter(exact.items()))), low, high))
    if flt.name_prefix:
        if "n" in exact:
            if not exact["n"].startswith(flt.name_prefix):
                return 0
        else:
            names = await names_with_prefix(client, keys, flt.name_prefix)
            if names is None:
                return None
            if not names:
                return 0
            counts = await client.hmget(
                keys.dl_counts, [combo_key({**exact, "n": n}) for n in names]
            )
            return sum(int(c or 0) for c in counts)
    if not exact:
        return await count_in(client, keys, await statuses(client, keys), flt)
    return int(await client.hget(keys.dl_counts, combo_key(exact)) or 0)


async def grouped_counts(
    client: Redis, keys: QueueKeys, flt: DeadLetterFilter
) -> dict[str, dict[str, int]]:
    """For each indexed field (by code), the number of matches of ``flt`` per value, from the
    count hash. Only for filters :func:`exact_count` answers without a time range."""
    exact = flt.exact()
    async with client.pipeline(transaction=False) as pipe:
        for code, _ in INDEXED:
            pipe.zrange(keys.dl_values(code), 0, MAX_DISTINCT_VALUES - 1)
        distinct = await pipe.execute()
    groups: dict[str, list[str]] = {}
    for (code, _), values in zip(INDEXED, distinct):
        found = [_text(v) for v in values]
        groups[code] = [exact[code]] if code in exact else found
    names = groups["n"]
    if flt.name_prefix:
        names = [n for n in names if n.startswith(flt.name_prefix)]
    requests: list[tuple[str, str, str]] = []
    for code, values in groups.items():
        for value in values:
            for name in names if flt.name_prefix and code != "n" else [None]:
                combo = {**exact, code: value}
                if name is not None:
                    combo["n"] = name
                if code == "n" and flt.name_prefix and not value.startswith(flt.name_prefix):
                    continue
                requests.append((code, value, combo_key(combo)))
    counts = await client.hmget(keys.dl_counts, [r[2] for r in requests]) if requests else []
    result: dict[str, dict[str, int]] = {code: {} for code, _ in INDEXED}
    for (code, value, _), count in zip(requests, counts):
        if count:
            result[code][value] = result[code].get(value, 0) + int(count)
    return result


async def index_ends(client: Redis, index_keys: list[str]) -> tuple[int | None, int | None]:
    """The first and last arrival times (ms) over indexes of the store (scores are ms * 1000
    plus a sequence number)."""
    async with client.pipeline(transaction=False) as pipe:
        for key in index_keys:
            pipe.zrange(key, 0, 0, withscores=True)
            pipe.zrange(key, -1, -1, withscores=True)
        ends = await pipe.execute()
    firsts = [int(e[0][1]) // 1000 for e in ends[0::2] if e]
    lasts = [int(e[0][1]) // 1000 for e in ends[1::2] if e]
    return min(firsts, default=None), max(lasts, default=None)


async def newest_first(
    client: Redis, keys: QueueKeys, status_names: tuple[str, ...], start: int, end: int
) -> list[str]:
    """Ids ``start`` to ``end`` (inclusive, -1 for the last) of the dead letters of these
    statuses, newest first: one index read when a single status holds them, else a merge."""
    present = [s for s in await statuses(client, keys) if s in status_names]
    if not present:
        return []
    if len(present) == 1:
        ids = await client.zrange(keys.dl_index("s", present[0]), start, end, desc=True)
        return [_text(i) for i in ids]
    async with client.pipeline(transaction=False) as pipe:
        for status in present:
            pipe.zrange(keys.dl_index("s", status), 0, end, desc=True, withscores=True)
        parts = await pipe.execute()
    merged = sorted(
        ((score, _text(member)) for part in parts for member, score in part), reverse=True
    )
    chosen = merged[start:] if end == -1 else merged[start : end + 1]
    return [member for _, member in chosen]


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
