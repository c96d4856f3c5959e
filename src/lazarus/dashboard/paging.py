"""The dead letter browser's pages: "Older" and "Newer" links that carry cursors.

A page is one bounded walk of the store (``Queue.search_dead_letters`` or
``DeadLetterView.search``), so page 1,000 costs what page 1 does. "Older" continues the walk
with the page's ``next_cursor`` (``?older=``). "Newer" walks the other way, oldest first,
from where the page began (``?newer=``), and shows what it finds newest first. The library's
cursors are made for one walk order; turning one around at the same place is the only
thing this module knows about them: where a newest-first walk stood after the last entry it
examined, an oldest-first walk resumes *at* that entry, and the other way round.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable

from ..dead_letter import DeadLetterFilter, DeadLetterPage
from ..dead_letter.search import Position, decode_cursor, encode_cursor
from ..job import Job

Search = Callable[..., Awaitable[DeadLetterPage]]
# Sorts after every job id (ids are at most 200 characters), as the library's own view does.
_AFTER_EVERY_ID = "\U0010ffff" * 201


def newer_than(cursor: str) -> str:
    """An oldest-first cursor that starts at the entry where the newest-first ``cursor``
    stopped, that entry included (ids at one time are walked in id order: "" comes first)."""
    position, scope = decode_cursor(cursor, "newest")
    return encode_cursor("oldest", Position(position.score, ""), scope)


def older_than(cursor: str) -> str:
    """A newest-first cursor that starts at the entry where the oldest-first ``cursor``
    stopped, that entry included."""
    position, scope = decode_cursor(cursor, "oldest")
    return encode_cursor("newest", Position(position.score, _AFTER_EVERY_ID), scope)


@dataclasses.dataclass(frozen=True)
class Paged:
    """One page, newest first, with the cursors of its neighbours (``None``: there is none)
    and the total when the store counts it without a scan."""

    jobs: list[Job]
    older: str | None
    newer: str | None
    total: int | None


async def fetch(
    search: Search, flt: DeadLetterFilter, *, limit: int, older: str = "", newer: str = ""
) -> Paged:
    """The page after ``older`` or before ``newer`` (the newest page when neither is given);
    raises ``ValueError`` for a cursor that is not one."""
    if newer:
        page = await search(flt, limit=limit, cursor=newer, order="oldest")
        if page.next_cursor is None and len(page.jobs) < limit:
            # Back at the newest end with a short page: show the newest full page instead.
            return await fetch(search, flt, limit=limit)
        jobs = list(reversed(page.jobs))
        return Paged(jobs, older_than(newer), page.next_cursor, page.total)
    page = await search(flt, limit=limit, cursor=older or None, order="newest")
    return Paged(page.jobs, page.next_cursor, newer_than(older) if older else None, page.total)
