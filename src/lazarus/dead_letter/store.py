"""The dead letter store of one dead letter queue, read without scripts: exact counts from its
count hash, distinct values, ends of its indexes.

The store's keys (``<prefix>:{<dlq>}:dl:*``, see ``docs/redis-keys.md``) are written only by
the Lua scripts that move dead letters in and out (``includes/store.lua``): one arrival-ordered
index per value of each exact field (source queue, job name, error type, reason, status), the
distinct values of each field, and a count per combination of the five values, so that any
combination of exact filters is counted by adding counters, without reading entries.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING

from .._keys import glob_escape, validate_queue_name
from .filters import INDEXED, LIVE_STATUSES, DeadLetterFilter, combo_key

__all__ = ["LIVE_STATUSES", "DeadLetterQueueOptions"]

if TYPE_CHECKING:
    from .._connection import Client
    from .._keys import QueueKeys

# Counts over several exact fields add up the store's combination counters, while there are
# at most this many distinct combinations; beyond, they are made by a bounded walk.
MAX_COMBINATIONS = 50_000
# Counts read the combinations they need by name (one HMGET) while there are at most this many.
MAX_NAMED = 1_000
CODES = tuple(code for code, _ in INDEXED)
ONE_READ = 1_000  # count hash fields HSCAN matches per call (a few ms of Redis at most)


@dataclasses.dataclass(frozen=True)
class DeadLetterQueueOptions:
    """Where a worker sends jobs that fail for good."""

    queue_name: str

    def __post_init__(self) -> None:
        if not isinstance(self.queue_name, str) or not self.queue_name:
            raise ValueError("dead_letter_queue.queue_name must be a non-empty str")
        validate_queue_name(self.queue_name, "dead_letter_queue.queue_name")


async def statuses(client: Client, keys: QueueKeys) -> list[str]:
    """The statuses that hold dead letters; their indexes partition the store."""
    return [_text(s) for s in await client.zrange(keys.dl_values("s"), 0, -1)]


async def count_in(
    client: Client,
    keys: QueueKeys,
    status_names: tuple[str, ...] | list[str],
    flt: DeadLetterFilter,
) -> int:
    """How many dead letters of these statuses fall in the filter's time range."""
    low, high = flt.score_range()
    async with client.pipeline(transaction=False) as pipe:
        for status in status_names:
            pipe.zcount(keys.dl_index("s", status), low, high)
        counts = await pipe.execute()
    return sum(int(c) for c in counts)


async def combinations(
    client: Client, keys: QueueKeys, flt: DeadLetterFilter
) -> list[tuple[tuple[str, ...], int]] | None:
    """The store's counts of the combinations of (source queue, name, error type, reason,
    status) that can match the exact filters of ``flt``: read by name (HMGET) when the
    values held of the fields the filter leaves open make at most :data:`MAX_NAMED` of them,
    else picked out of the count hash by pattern (HSCAN MATCH), so only those cross the
    wire; ``None`` when the hash holds more than :data:`MAX_COMBINATIONS` (then counts that
    need them are made by a walk)."""
    named = await _named_combinations(client, keys, flt)
    if named is not None:
        return named
    if int(await client.hlen(keys.dl_counts)) > MAX_COMBINATIONS:
        return None
    exact = flt.exact()
    # Fields hold the five parts in order, so the parts a filter names, in order, with
    # anything between, select a superset of the matches; parsing each removes the rest. A
    # name prefix is a name part of any length that begins with it.
    parts = []
    for code, _ in INDEXED:
        if code in exact:
            parts.append(glob_escape(combo_key({code: exact[code]})))
        elif code == "n" and flt.name_prefix:
            parts.append("n[0-9]*:" + glob_escape(flt.name_prefix))
    pattern = "*" + "*".join(parts) + "*" if parts else None
    return [
        (parse_combination(_text(f)), int(c))
        async for f, c in client.hscan_iter(keys.dl_counts, match=pattern, count=ONE_READ)
    ]


async def _named_combinations(
    client: Client, keys: QueueKeys, flt: DeadLetterFilter
) -> list[tuple[tuple[str, ...], int]] | None:
    """The combinations ``flt`` can match, read by name from the values each open field holds
    (the store's 'v:' sets); ``None`` when they would be more than :data:`MAX_NAMED`."""
    exact = flt.exact()
    open_codes = [code for code, _ in INDEXED if code not in exact]
    # The names that begin with the prefix, byte-wise, if one is given.
    prefix = flt.name_prefix.encode() if flt.name_prefix else None
    names = (b"[" + prefix, b"(" + prefix + b"\xff") if prefix else (b"-", b"+")
    async with client.pipeline(transaction=False) as pipe:
        for code in open_codes:  # a field with more values than MAX_NAMED rules it out
            low, high = names if code == "n" else (b"-", b"+")
            pipe.zrange(keys.dl_values(code), low, high, bylex=True, offset=0, num=MAX_NAMED + 1)
        held = {code: [_text(v) for v in values]
                for code, values in zip(open_codes, await pipe.execute())}  # fmt: skip
    if math.prod(len(values) for values in held.values()) > MAX_NAMED:
        return None
    if not all(held.values()):
        # No value held for an open field: nothing matches, unless the store predates the
        # value sets of every field (its count hash holds combinations all the same).
        legacy = not await client.zcard(keys.dl_values("q")) and await client.hlen(keys.dl_counts)
        return None if legacy else []
    if flt.status is None:  # a filter without a status counts the live ones
        held["s"] = [s for s in held["s"] if s in LIVE_STATUSES]
    choices = [[exact[code]] if code in exact else held[code] for code, _ in INDEXED]
    found = list(itertools.product(*choices))
    if not found:
        return []
    counts = await client.hmget(
        keys.dl_counts, [combo_key(dict(zip(CODES, values))) for values in found]
    )
    return [(values, int(c)) for values, c in zip(found, counts) if c is not None]


@functools.lru_cache(maxsize=65_536)
def parse_combination(field: str) -> tuple[str, ...]:
    """The five values of a count hash field ('<code><byte length>:<value>' per field). The
    same few combinations come back on every count, so parses are kept."""
    raw, values, at = field.encode(), [], 0
    for _ in INDEXED:
        colon = raw.index(b":", at)
        length = int(raw[at + 1 : colon])
        values.append(raw[colon + 1 : colon + 1 + length].decode())
        at = colon + 1 + length
    return tuple(values)


def _selector(flt: DeadLetterFilter) -> Callable[[tuple[str, ...]], bool]:
    """Whether a combination of values matches the exact filters and name prefix of ``flt``
    (and, without a status filter, has a live status)."""
    exact = flt.exact()
    wanted = [(i, exact[code]) for i, (code, _) in enumerate(INDEXED) if code in exact]
    prefix = flt.name_prefix or ""
    live = flt.status is None

    def selects(values: tuple[str, ...]) -> bool:
        return (
            all(values[i] == v for i, v in wanted)
            and values[1].startswith(prefix)
            and (not live or values[4] in LIVE_STATUSES)
        )

    return selects


async def exact_count(client: Client, keys: QueueKeys, flt: DeadLetterFilter) -> int | None:
    """How many dead letters match ``flt``, from counters and index sizes alone; ``None``
    when that needs entries to be read (substring searches, a time range with several exact
    filters or a name prefix, too many distinct combinations)."""
    if flt.scans:
        return None
    held = await statuses(client, keys)
    if flt.status is None and not set(held) <= set(LIVE_STATUSES):
        # Some dead letters are history (processing, resolved, archived): count each live
        # status on its own.
        parts = [
            await exact_count(client, keys, dataclasses.replace(flt, status=s))
            for s in LIVE_STATUSES
            if s in held
        ]
        return None if None in parts else sum(p for p in parts if p is not None)
    exact = flt.exact()
    if not flt.name_prefix and len(exact) <= 1:
        if not exact:
            return await count_in(client, keys, held, flt)
        low, high = flt.score_range()
        return int(await client.zcount(keys.dl_index(*next(iter(exact.items()))), low, high))
    if flt.timed:
        return None
    found = await combinations(client, keys, flt)
    if found is None:
        return None
    selects = _selector(flt)
    return sum(count for values, count in found if selects(values))


async def grouped_counts(
    client: Client, keys: QueueKeys, flt: DeadLetterFilter
) -> dict[str, dict[str, int]] | None:
    """For each indexed field (by code), the number of matches of ``flt`` per value, from the
    count hash; ``None`` when it has too many combinations. Not for time ranges."""
    found = await combinations(client, keys, flt)
    if found is None:
        return None
    selects = _selector(flt)
    groups: dict[str, Counter[str]] = {code: Counter() for code, _ in INDEXED}
    for values, count in found:
        if count > 0 and selects(values):
            for (code, _), value in zip(INDEXED, values):
                groups[code][value] += count
    return {code: dict(counter) for code, counter in groups.items()}


async def index_ends(client: Client, index_keys: list[str]) -> tuple[int | None, int | None]:
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
    client: Client, keys: QueueKeys, status_names: tuple[str, ...], start: int, end: int
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
