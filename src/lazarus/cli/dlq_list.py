"""``lazarus dlq list``: a page of dead letters, of one dead letter queue or of all of them,
and the cursor that continues it.

Pages are cursor walks (``Queue.search_dead_letters``, ``DeadLetterView.search``): the next
page costs what the first did, however deep it is. ``--offset`` still works for one queue but
walks over every dead letter it skips.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

import click

from ..dead_letter import DeadLetterFilter, DeadLetterPage
from ..job import Job
from ..operators import Operators
from . import _render
from ._columns import hidden_note
from ._options import (
    JSON_OPTION,
    WIDE_OPTION,
    check_queue_name,
    emit_json,
    filter_options,
    open_queue,
    run,
)
from .main import PREFIX_OPTION, URL_OPTION

Search = Callable[..., Awaitable[DeadLetterPage]]


@dataclasses.dataclass(frozen=True)
class Request:
    """What the operator asked ``dlq list`` for."""

    queue: str | None
    flt: DeadLetterFilter
    limit: int
    cursor: str | None
    order: str
    offset: int
    count: bool

    def check(self) -> None:
        """Refuse combinations that cannot be answered, as usage errors (exit 2)."""
        if self.offset and self.cursor is not None:
            raise click.UsageError("give --cursor or --offset, not both")
        if self.offset and self.queue is None:
            raise click.UsageError("--offset needs a QUEUE; page --all-queues with --cursor")
        if self.offset and self.order != "newest":
            raise click.UsageError("--offset pages newest first only; page with --cursor")


@dataclasses.dataclass(frozen=True)
class Listing:
    """One page and what is known about the rest: the total when the store could count it
    (or ``--count`` asked), and the cursor of the next page."""

    jobs: list[Job]
    total: int | None
    next_cursor: str | None


async def _page(ops: Operators, request: Request) -> Listing:
    if request.queue is None:
        search: Search = ops.view.search
        count: Callable[[DeadLetterFilter], Awaitable[int]] = ops.view.count
    else:
        queue = await open_queue(ops, request.queue)
        search, count = queue.search_dead_letters, queue.count_dead_letters
        if request.offset:
            jobs = await queue.find_dead_letters(request.flt, limit=request.limit,
                                                 offset=request.offset)  # fmt: skip
            # A one-entry walk answers the total whenever the store counts without a scan.
            total = (await search(request.flt, limit=1)).total
            if total is None and request.count:
                total = await count(request.flt)
            return Listing(jobs, total, None)
    try:
        page = await search(request.flt, limit=request.limit, cursor=request.cursor,
                            order=request.order)  # fmt: skip
    except (TypeError, ValueError) as exc:
        raise click.BadParameter(str(exc), param_hint="'--cursor'") from None
    total = page.total
    if total is None and request.count:
        total = await count(request.flt)
    return Listing(page.jobs, total, page.next_cursor)


def _document(request: Request, listing: Listing, rows: list[Job]) -> dict[str, Any]:
    return {
        "queue": request.queue, "allQueues": request.queue is None, "total": listing.total,
        "limit": request.limit, "order": request.order, "offset": request.offset,
        "cursor": request.cursor, "nextCursor": listing.next_cursor,
        "deadLetters": [_render.dead_letter_row_json(job) for job in rows],
    }  # fmt: skip


def _summary(request: Request, listing: Listing, shown: int) -> str:
    where = "every dead letter queue" if request.queue is None else repr(request.queue)
    if request.cursor is not None:
        showing = f"showing {shown} more"
    else:
        showing = f"showing {request.offset + 1}-{request.offset + shown}" if shown else "none"
    if listing.total is None:
        return (f"{showing} from {where}; the total is not counted, as that needs a scan "
                "(add --count)")  # fmt: skip
    noun = "dead letter" if listing.total == 1 else "dead letters"
    return f"{listing.total} matching {noun} in {where}; {showing}"


@click.command("list")
@click.argument("queue_name", metavar="[QUEUE]", required=False, callback=check_queue_name)
@click.option("--all-queues", is_flag=True,
              help="Every dead letter queue of the prefix, merged in one order.")  # fmt: skip
@filter_options
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 10_000),
              help="Show at most this many.")  # fmt: skip
@click.option("--cursor", help="Go on from where an earlier list stopped (the cursor it printed).")
@click.option("--order", type=click.Choice(["newest", "oldest"]), default="newest",
              show_default=True, help="Which end to start from.")  # fmt: skip
@click.option("--offset", default=0, type=click.IntRange(min=0),
              help="Skip this many first (walks over all of them: prefer --cursor).")  # fmt: skip
@click.option("--count", "count", is_flag=True,
              help="Count the matches even when that needs a scan (text filters).")  # fmt: skip
@JSON_OPTION
@WIDE_OPTION
@URL_OPTION
@PREFIX_OPTION
def list_dead_letters(
    queue_name: str | None, all_queues: bool, flt: DeadLetterFilter, limit: int,
    cursor: str | None, order: str, offset: int, count: bool, as_json: bool, wide: bool,
    redis_url: str, prefix: str,
) -> None:  # fmt: skip
    """List the dead letters in QUEUE (or, with --all-queues, in every dead letter queue)
    that match the filters, newest first, a page at a time.

    When there is more, the last line prints the cursor of the next page: pass it back with
    --cursor. The total is shown when the store can count it without reading entries; text
    filters (--contains, --failed-reason) need a scan, which --count asks for.

    --since and --until take an ISO 8601 time (UTC unless it says otherwise) or a duration
    before now: 30m, 2h, 7d, 1h30m.

    \b
    Examples:
      lazarus dlq list payments-dlq
      lazarus dlq list payments-dlq --error-type TimeoutError --since 2h
      lazarus dlq list payments-dlq --cursor MR9uZXdlc3QfMTcz...
      lazarus dlq list --all-queues --status pending
      lazarus dlq list payments-dlq --name charge --contains '"customer":"c_42"' --json
    """
    if (queue_name is None) == (not all_queues):
        raise click.UsageError("give either a QUEUE or --all-queues")
    request = Request(queue_name, flt, limit, cursor, order, offset, count)
    request.check()

    async def work(ops: Operators) -> Listing:
        return await _page(ops, request)

    listing = run(redis_url, prefix, work)
    rows = [job for job in listing.jobs if job.dead_letter is not None]
    if as_json:
        emit_json(_document(request, listing, rows))
        return
    out = _render.console()
    if rows:
        table, hidden = _render.dead_letters_table(
            rows, out=out, with_queue=all_queues, wide=wide, now=_render.now_ms()
        )
        out.print(table)
        if (note := hidden_note(hidden)) is not None:
            out.print(note)
    out.print(_summary(request, listing, len(rows)))
    if listing.next_cursor is not None:
        out.print(f"next page: --cursor {listing.next_cursor}")
