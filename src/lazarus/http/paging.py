"""Pages of dead letters in the API's shape: cursor first (``pagination.next_cursor``, as OJS
recommends), with the page-number fields of the first versions kept for their clients.

A cursor page is one bounded walk of the dead letter store from where the previous page
stopped (:meth:`~lazarus.Queue.search_dead_letters`, :meth:`~lazarus.DeadLetterView.search`),
so page 1,000 costs what page 1 does. A numbered page beyond the first skips the matches before
it, which costs a walk over all of them.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from typing import Annotated, Literal

from fastapi import Query

from .. import dead_letter
from ..dead_letter import DeadLetterFilter
from ..job import Job
from ..queue import Queue
from ._deps import ApiError
from .schemas import DeadLetterPage, Pagination, dead_letter_out

Order = Literal["newest", "oldest"]
Search = Callable[..., Awaitable[dead_letter.DeadLetterPage]]

Cursor = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=2000,
        description="Where to go on from: a previous page's `pagination.next_cursor`.",
    ),
]
Limit = Annotated[int, Query(ge=1, le=500, description="Dead letters per page, at most.")]
OrderParam = Annotated[
    Order,
    Query(description="`newest` first, or `oldest` first. A cursor belongs to its order."),
]
PageNumber = Annotated[
    int | None,
    Query(
        ge=1,
        le=1_000_000,
        description="A page number (from 1), for older clients: costs a walk over every "
        "earlier page. Prefer `cursor`.",
    ),
]


async def search(
    call: Search, flt: DeadLetterFilter, *, limit: int, cursor: str | None, order: Order
) -> dead_letter.DeadLetterPage:
    """``call(flt, ...)``, a search of one queue or all; a bad cursor is a 422."""
    try:
        return await call(flt, limit=limit, cursor=cursor, order=order)
    except (TypeError, ValueError) as exc:  # the filter and limit are valid: the cursor is not
        raise ApiError(422, "invalid_parameter", str(exc), field="cursor") from None


def page_out(
    jobs: list[Job],
    *,
    next_cursor: str | None,
    total: int | None,
    limit: int,
    page: int | None,
    has_more: bool | None = None,
) -> DeadLetterPage:
    """The API's page of ``jobs``."""
    data = [dead_letter_out(j, j.dead_letter) for j in jobs if j.dead_letter is not None]
    more = next_cursor is not None if has_more is None else has_more
    return DeadLetterPage(
        data=data,
        pagination=Pagination(total=total, has_more=more, next_cursor=next_cursor, limit=limit),
        total=total,
        page=page,
        limit=limit,
        totalPages=None if total is None else math.ceil(total / limit),
    )


async def numbered_page(
    queue: Queue, flt: DeadLetterFilter, *, page: int, limit: int
) -> DeadLetterPage:
    """Page ``page`` (from 1) of ``queue``'s matches, newest first, found by skipping the
    earlier ones; it has no ``next_cursor``."""
    offset = (page - 1) * limit
    jobs, head = await asyncio.gather(
        queue.find_dead_letters(flt, limit=limit, offset=offset),
        # A one-entry walk: its total is the store's exact count, when it has one.
        queue.search_dead_letters(flt, limit=1),
    )
    total = head.total
    more = len(jobs) == limit if total is None else offset + len(jobs) < total
    return page_out(jobs, next_cursor=None, total=total, limit=limit, page=page, has_more=more)
