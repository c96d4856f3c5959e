"""Bulk replay and purge: a cursor walk over the dead letters that match a filter, acting on
each batch as it is found.

The walk runs oldest first over the dead letters that had arrived when the operation began (a
snapshot bounded by arrival time), from a position that only moves forward. So a match is never
skipped and never handled twice, whatever rival bulk operations remove meanwhile and whatever
arrives: a dead letter that another client replayed or purged first is simply not counted.
Progress is reported after each batch, and ``rate`` throttles the work in the library itself.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from .._checks import positive_or_none
from .._connection import now_ms
from .._keys import validate_name
from .._scripts import CALL_BUDGET_US
from . import search, store
from .filters import DeadLetterFilter, TimeBound, to_ms

if TYPE_CHECKING:
    from .._connection import Client
    from .._keys import QueueKeys

Progress = Callable[[int], Any]
# Acts on one batch of matches, (dead letter id, source queue) each, each script call of it
# within the time budget given (µs); returns how many it handled.
Act = Callable[[list[tuple[str, str]], int], Awaitable[int]]
DEFAULT_BATCH = 100
# Bulk replay and purge (and the CLI and HTTP API's): fewer, fuller script calls, each still
# stopped by its time budget.
BULK_BATCH = 500
# The time budget of each script call of an act without a rate (see run): two acts are on
# their way at once, and their calls may reach Redis back to back, so each has half a lone
# call's budget. With a rate, one act at a time has a lone call's.
ACT_BUDGET_US = CALL_BUDGET_US // 2


def check_batch(batch_size: object) -> int:
    if (
        isinstance(batch_size, bool)
        or not isinstance(batch_size, int)
        or not 1 <= batch_size <= 5000
    ):
        raise ValueError(f"batch_size must be an int from 1 to 5000, got {batch_size!r}")
    return batch_size


def check_rate(rate: object) -> float | None:
    return positive_or_none(rate, "rate", "dead letters per second")


def check_progress(on_progress: object) -> Progress | None:
    """``on_progress`` when it is None or callable; checked before a bulk operation writes."""
    if on_progress is not None and not callable(on_progress):
        raise TypeError(
            f"on_progress must be a function of the count done, not {type(on_progress).__name__}"
        )
    return on_progress


async def report(on_progress: Progress, done: int) -> None:
    """Tell ``on_progress`` (a function or a coroutine function) that ``done`` are done."""
    reply = on_progress(done)
    if inspect.isawaitable(reply):
        await reply


async def throttle(started: float, done: int, rate: float | None) -> None:
    """Wait until ``done`` items since ``started`` (the event loop's clock) keep to ``rate`` a
    second; at once without a rate."""
    if rate is not None:
        wait = started + done / rate - asyncio.get_running_loop().time()
        if wait > 0:
            await asyncio.sleep(wait)


def check_tally(tally: object) -> str:
    """The name of a bulk run's tally (see ``includes/tally.lua``): ``''`` for ``None``, else
    a name as :func:`~lazarus._keys.validate_name` takes it. Raises naming ``tally``."""
    return "" if tally is None else validate_name(tally, "tally")


def check_as_of(as_of: TimeBound) -> int:
    """The moment (ms) a bulk operation's snapshot is taken: ``as_of`` (ms since the epoch, or
    a timezone-aware datetime) when given, at most now; else now. Raises naming ``as_of``."""
    now = now_ms()
    moment = to_ms(as_of, "as_of")
    if moment is None:
        return now
    if moment < 0:
        raise ValueError(f"as_of must be a moment since the epoch, got {moment}")
    return min(moment, now)


def snapshot(flt: DeadLetterFilter, as_of: int) -> DeadLetterFilter | None:
    """``flt`` bounded to the dead letters that had arrived at ``as_of`` (ms); ``None`` when
    none can match (the filter starts later)."""
    until = flt.until_ms
    if flt.since_ms is not None and flt.since_ms > as_of:
        return None
    return dataclasses.replace(flt, until=as_of if until is None else min(until, as_of))


async def count_matches(client: Client, keys: QueueKeys, flt: DeadLetterFilter) -> int:
    """How many dead letters match ``flt``: from counters when possible, else by a walk."""
    exact = await store.exact_count(client, keys, flt)
    if exact is not None:
        return exact
    total = 0
    async for result in search.walk(client, keys, flt, batch=search.MAX_ENTRIES):
        total += len(result.matches)
    return total


async def run(
    client: Client,
    keys: QueueKeys,
    flt: DeadLetterFilter,
    act: Act,
    *,
    batch_size: int,
    on_progress: Progress | None,
    rate: float | None,
    as_of: int,
    sources: bool = True,
) -> int:
    """Act on every dead letter that matches ``flt`` and had arrived at ``as_of`` (ms),
    batch by batch; returns how many were handled. Without ``sources``, the source queue of
    each match is not read (``''``).

    Without a ``rate``, a batch is acted on while the act on the one before it is still on
    its way: the client readies one batch's calls while Redis runs the other's (on another
    connection), so the two overlap. Each call of an act keeps to :data:`ACT_BUDGET_US`, so
    two of them reaching Redis back to back hold it no longer than one lone call. With a
    ``rate``, one act at a time keeps the pace exact, with a lone call's budget."""
    bounded = snapshot(flt, as_of)
    if bounded is None:
        return 0
    started = asyncio.get_running_loop().time()
    batch = batch_size if rate is None else max(1, min(batch_size, int(rate)))
    budget = ACT_BUDGET_US if rate is None else CALL_BUDGET_US
    total = 0
    steps = search.walk(client, keys, bounded, order="oldest", batch=batch, sources=sources)
    # The walk reads one step ahead while batches are acted on: the step starts past them,
    # so acting on them cannot change what the step finds.
    ahead: asyncio.Future[search.Step | None] = asyncio.ensure_future(anext(steps, None))
    acting: asyncio.Future[int] | None = None  # the act on its way, without a rate
    try:
        while (result := await ahead) is not None:
            ahead = asyncio.ensure_future(anext(steps, None))
            if not result.matches:
                continue
            if sources:
                matches = [(row[0], row[1]) for row in result.matches]
            else:
                matches = [(dl_id, "") for dl_id in result.matches]
            if rate is None:
                previous, acting = acting, asyncio.ensure_future(act(matches, budget))
                if previous is None:
                    continue
                total += await previous
            else:
                total += await act(matches, budget)
            if on_progress is not None:
                await report(on_progress, total)
            await throttle(started, total, rate)
        if acting is not None:
            last, acting = acting, None
            total += await last
            if on_progress is not None:
                await report(on_progress, total)
    finally:
        pending = [f for f in (ahead, acting) if f is not None]
        for future in pending:
            future.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
    return total
