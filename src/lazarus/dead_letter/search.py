"""Walking the dead letter store: bounded script calls, positions and opaque cursors.

A walk follows the store's arrival order (newest first by default) from a position — the
arrival time and id of the last entry examined — so it is stable under concurrent inserts and
removals: every entry that was there when the walk began and is still there when the walk gets
to it is seen exactly once. Each script call examines a bounded number of entries and bytes
and returns where it stopped; callers resume from there.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import math
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Literal

from .. import _scripts
from .._codec import text as _text
from ..job import Job
from .filters import DeadLetterFilter

if TYPE_CHECKING:
    from .._connection import Client
    from .._keys import QueueKeys

Order = Literal["newest", "oldest"]
# Per script call: at most this many entries and bytes of text examined, to keep a call within
# a few milliseconds (benchmarks/dlq_scale.py). Checking exact fields costs one HMGET an entry;
# a substring search also reads and folds text, so it examines fewer entries per call.
MAX_ENTRIES = 1000
MAX_SEARCH_ENTRIES = 500
# Reading a match's fields costs a hash read each (about 4 µs at 100k for its source queue,
# 10 µs for every field): walks that return them examine fewer entries per call.
MAX_SOURCE_ENTRIES = 250
MAX_DETAIL_ENTRIES = 200
MAX_BYTES = 256 * 1024
# A page of a substring search returns after this long (seconds) with what it found, and a
# cursor: within 50 ms even when nothing matches, reading the page's dead letters included.
TIME_BUDGET = 0.04
_CURSOR_VERSION = "1"


@dataclasses.dataclass(frozen=True, order=True)
class Position:
    """Where a walk stands: the arrival time (ms) and id of the last entry it examined."""

    score: int
    id: str


@dataclasses.dataclass(frozen=True)
class Step:
    """What one script call found: matches in walk order, where it stopped, whether the walk
    reached the end, and how many entries it examined."""

    matches: list[Any]
    position: Position | None
    done: bool
    examined: int


@dataclasses.dataclass(frozen=True)
class DeadLetterPage:
    """One page of dead letters.

    ``next_cursor`` resumes the walk (pass it back as ``cursor=``); it is ``None`` when there
    is nothing more. A page can hold fewer than ``limit`` dead letters and still have a
    ``next_cursor`` when a substring search ran out of its time budget. ``total`` is the
    number of matches when the store can count them without reading entries (exact filters,
    a name prefix, a time range with at most one exact filter), else ``None``.
    """

    jobs: list[Job]
    next_cursor: str | None
    total: int | None


def check_limit(limit: object) -> int:
    """A page size: an int from 1 to 10,000."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 10_000:
        raise ValueError(f"limit must be an int from 1 to 10000, got {limit!r}")
    return limit


def check_time_budget(value: object) -> float:
    """How long a search may go on (seconds): a finite number >= 0; raises naming
    ``time_budget``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"time_budget must be a number of seconds, not {type(value).__name__}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"time_budget must be a finite number of seconds >= 0, got {value!r}")
    return float(value)


def check_order(order: object) -> Order:
    if order not in ("newest", "oldest"):
        raise ValueError(f"order must be 'newest' or 'oldest', got {order!r}")
    return order


def encode_cursor(order: Order, position: Position, scope: str = "") -> str:
    """An opaque cursor for ``position`` in a walk of ``order`` (``scope`` names the dead
    letter queue for walks over several)."""
    text = "\x1f".join((_CURSOR_VERSION, order, str(position.score), scope, position.id))
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def decode_cursor(cursor: object, order: Order) -> tuple[Position, str]:
    """The position and scope of a cursor made by :func:`encode_cursor` for ``order``."""
    if not isinstance(cursor, str):
        raise TypeError(f"cursor must be a str, not {type(cursor).__name__}")
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        version, made_for, score, scope, job_id = (
            base64.urlsafe_b64decode(padded.encode()).decode().split("\x1f")
        )
        position = Position(int(score), job_id)
    except (ValueError, UnicodeError, binascii.Error):
        raise ValueError("cursor is not a cursor this API returned") from None
    if version != _CURSOR_VERSION or made_for != order:
        raise ValueError(f"cursor was made for another walk than order={order!r}")
    return position, scope


async def step(
    client: Client,
    keys: QueueKeys,
    flt: DeadLetterFilter,
    *,
    order: Order,
    position: Position | None,
    limit: int,
    detail: bool = False,
    sources: bool = False,
    max_entries: int | None = None,
    max_bytes: int = MAX_BYTES,
) -> Step:
    """One bounded call of query_dead_letters: matches are ids, or with ``detail`` rows of
    their fields, or with ``sources`` ``[id, source queue]`` pairs."""
    if max_entries is None:
        max_entries = MAX_SEARCH_ENTRIES if flt.scans else MAX_ENTRIES
        if detail or sources:
            max_entries = min(max_entries, MAX_DETAIL_ENTRIES if detail else MAX_SOURCE_ENTRIES)
    args: list[Any] = [
        "desc" if order == "newest" else "asc",
        "" if position is None else position.score,
        "" if position is None else position.id,
        limit, max_entries, max_bytes, *flt.query_args(),
        "1" if detail else "s" if sources else "",
    ]  # fmt: skip
    done, score, last_id, examined, found = await _scripts.load("query_dead_letters")(
        client, [keys.dl, keys.job_prefix], args
    )
    score, last_id = _text(score), _text(last_id)
    reached = Position(int(score), last_id) if score != "" else position
    if detail or sources:
        matches: list[Any] = [[_text(v) for v in item] for item in found]
    else:
        matches = [_text(v) for v in found]
    return Step(matches, reached, bool(int(done)), int(examined))


async def walk(
    client: Client,
    keys: QueueKeys,
    flt: DeadLetterFilter,
    *,
    order: Order = "newest",
    position: Position | None = None,
    batch: int = 500,
    detail: bool = False,
    sources: bool = False,
) -> AsyncIterator[Step]:
    """Every step of a whole walk from ``position``; steps may hold no matches."""
    while True:
        result = await step(client, keys, flt, order=order, position=position, limit=batch,
                            detail=detail, sources=sources)  # fmt: skip
        yield result
        if result.done:
            return
        position = result.position
