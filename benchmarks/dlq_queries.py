"""Reads of the dead letter store through the library, for ``dlq_scale.py``: first pages,
counts, deep pages by cursor, substring searches and statistics.

Every query kind draws its values at random for each of its repetitions (``random.Random``
seeded, so runs repeat), and each kind is a phase of its own for the pause probe.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import partial
from typing import Any

from dlq_data import (
    DOMAINS,
    ERROR_TYPES,
    NAMES,
    NO_MATCH,
    PAYLOAD_NEEDLE,
    REASON_NEEDLE,
    REASONS,
    SOURCES,
    SPAN_MS,
)
from dlq_measure import measure
from dlq_probe import PauseProbe
from dlq_report import Row

from lazarus import DeadLetterFilter, Queue

FIRST_PAGE_MS = 20
SUBSTRING_MS = 50
DAY_MS = 24 * 3600 * 1000
PAGE = 50

Make = Callable[[random.Random, int], DeadLetterFilter | None]


def _day(rng: random.Random, now: int, **exact: Any) -> DeadLetterFilter:
    """One random day of the seven, with ``exact`` filters."""
    since = now - rng.randrange(DAY_MS, SPAN_MS)
    return DeadLetterFilter(since=since, until=since + DAY_MS, **exact)


# (key, label with the share of the store it matches, filter maker).
KINDS: list[tuple[str, str, Make]] = [
    ("none", "no filter (100 %)", lambda r, now: None),
    ("source_queue", "source_queue (20 %)",
     lambda r, now: DeadLetterFilter(source_queue=r.choice(SOURCES))),
    ("name", "name (5 %)", lambda r, now: DeadLetterFilter(name=r.choice(NAMES))),
    ("error_type", "error_type (10 %)",
     lambda r, now: DeadLetterFilter(error_type=r.choice(ERROR_TYPES))),
    ("reason", "reason (25 %)", lambda r, now: DeadLetterFilter(reason=r.choice(REASONS))),
    ("status", "status pending (100 %)", lambda r, now: DeadLetterFilter(status="pending")),
    ("rare", "name + error_type + source_queue (0.1 %)",
     lambda r, now: DeadLetterFilter(name=r.choice(NAMES), error_type=r.choice(ERROR_TYPES),
                                     source_queue=r.choice(SOURCES))),
    ("time", "time range, 1 day (14 %)", lambda r, now: _day(r, now)),
    ("time_error", "1 day + error_type (1.4 %)",
     lambda r, now: _day(r, now, error_type=r.choice(ERROR_TYPES))),
    ("prefix", "name_prefix, 4 of 20 names (20 %)",
     lambda r, now: DeadLetterFilter(name_prefix=r.choice(DOMAINS) + ".")),
]  # fmt: skip


async def first_pages(
    queue: Queue, probe: PauseProbe, rng: random.Random, now: int, reps: int
) -> list[Row]:
    """find (first page), search (first page and total) and count, per filter kind, each
    over the same ``reps`` filters drawn at random."""
    rows: list[Row] = []
    # Unmeasured: the first calls load the query script and open the pool's connections.
    await queue.find_dead_letters(limit=PAGE)
    await queue.search_dead_letters(limit=PAGE)
    for key, label, make in KINDS:
        filters = [make(rng, now) for _ in range(reps)]
        async with probe.phase(f"first page: {label}"):
            find = await measure(probe, [partial(queue.find_dead_letters, f, limit=PAGE)
                                         for f in filters])  # fmt: skip
            search = await measure(probe, [partial(queue.search_dead_letters, f, limit=PAGE)
                                           for f in filters])  # fmt: skip
            count = await measure(probe, [partial(queue.count_dead_letters, f) for f in filters])
        rows += [
            find.latency(f"find.{key}", f"find_dead_letters, {label}", FIRST_PAGE_MS),
            search.latency(f"search.{key}", f"search_dead_letters, {label}", FIRST_PAGE_MS),
            count.latency(f"count.{key}", f"count_dead_letters, {label}", None),
        ]
    return rows


class _Walk:
    """search_dead_letters page after page by cursor; :attr:`done` once there is no more."""

    def __init__(self, queue: Queue, flt: DeadLetterFilter | None, cursor: str | None) -> None:
        self.queue, self.flt, self.cursor = queue, flt, cursor

    @property
    def done(self) -> bool:
        return self.cursor is None

    async def __call__(self) -> None:
        page = await self.queue.search_dead_letters(self.flt, limit=PAGE, cursor=self.cursor)
        self.cursor = page.next_cursor


async def deep_pages(queue: Queue, probe: PauseProbe, pages: int) -> list[Row]:
    """Pages 2 to ``pages`` of a cursor walk, and find_dead_letters at the same depth by
    offset, without a filter and with one error type."""
    rows: list[Row] = []
    for key, label, flt in (
        ("none", "no filter", None),
        ("error_type", "error_type", DeadLetterFilter(error_type="TimeoutError")),
    ):
        first = await queue.search_dead_letters(flt, limit=PAGE)
        walk = _Walk(queue, flt, first.next_cursor)
        async with probe.phase(f"deep pages by cursor: {label}"):
            deep = await measure(probe, [walk] * (pages - 1), stop=lambda w=walk: w.done)
        depth = len(deep.seconds) + 1
        if deep.seconds:
            rows.append(deep.latency(
                f"deep.{key}", f"search_dead_letters by cursor, pages 2 to {depth}, {label}",
                FIRST_PAGE_MS, f"{depth} pages walked",
            ))  # fmt: skip
        offset = (depth - 1) * PAGE
        async with probe.phase(f"deep page by offset: {label}"):
            call = partial(queue.find_dead_letters, flt, limit=PAGE, offset=offset)
            by_offset = await measure(probe, [call] * 10)
        rows.append(by_offset.latency(
            f"offset.{key}", f"find_dead_letters offset={offset:,} (page {depth}), {label}", None
        ))  # fmt: skip
    return rows


SUBSTRINGS = [
    ("reason_common", "failed_reason common (10 %)", DeadLetterFilter(failed_reason=REASON_NEEDLE)),
    ("reason_none", "failed_reason no match", DeadLetterFilter(failed_reason=NO_MATCH)),
    ("payload_common", "payload_contains common (10 %)",
     DeadLetterFilter(payload_contains=PAYLOAD_NEEDLE)),
    ("payload_none", "payload_contains no match", DeadLetterFilter(payload_contains=NO_MATCH)),
]  # fmt: skip


async def substring(queue: Queue, probe: PauseProbe, reps: int) -> list[Row]:
    """Time to the first page returned by search_dead_letters (it returns after its time
    budget with what it found); and, without a match, a whole walk by count_dead_letters."""
    rows: list[Row] = []
    for key, label, flt in SUBSTRINGS:
        async with probe.phase(f"substring, first page: {label}"):
            sample = await measure(probe, [partial(queue.search_dead_letters, flt, limit=PAGE)]
                                   * reps)  # fmt: skip
        found = sum(sample.results) / reps  # each page's length
        rows.append(sample.latency(
            f"substring.{key}", f"search_dead_letters first page, {label}", SUBSTRING_MS,
            f"{found:.0f} matches on the page on average",
        ))  # fmt: skip
    total = await queue.get_dead_letter_count()
    async with probe.phase("substring, whole store: count_dead_letters(payload_contains)"):
        walk = await measure(probe, [partial(queue.count_dead_letters, SUBSTRINGS[3][2])])
    label = "count_dead_letters(payload_contains), whole store walked"
    rows.append(walk.throughput("substring.walk", label, total, None))
    return rows


async def stats(queue: Queue, probe: PauseProbe, rng: random.Random, reps: int) -> list[Row]:
    """get_dead_letter_stats without a filter and with one error type."""
    rows = []
    for key, label, filters in (
        ("none", "no filter", [None] * reps),
        ("error_type", "error_type",
         [DeadLetterFilter(error_type=rng.choice(ERROR_TYPES)) for _ in range(reps)]),
    ):  # fmt: skip
        async with probe.phase(f"stats: {label}"):
            sample = await measure(probe, [partial(queue.get_dead_letter_stats, f)
                                           for f in filters])  # fmt: skip
        rows.append(sample.latency(f"stats.{key}", f"get_dead_letter_stats, {label}", None))
    return rows
