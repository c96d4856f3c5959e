"""``lazarus schedules QUEUE``: the repeatable jobs of a queue."""

from __future__ import annotations

from typing import Any

import click
from rich.table import Table

from .._schedule import RepeatableJob
from ..operators import Operators
from . import _render
from ._options import JSON_OPTION, emit_json, run
from .main import PREFIX_OPTION, URL_OPTION


def schedule_json(s: RepeatableJob) -> dict[str, Any]:
    """One schedule as ``--json`` prints it (times as ISO 8601, UTC)."""
    return {
        "key": s.key, "name": s.name, "every": s.every, "pattern": s.pattern, "tz": s.tz,
        "next": _render.iso(s.next), "count": s.count, "limit": s.limit,
        "endDate": _render.iso(s.end_date),
    }  # fmt: skip


def schedules_table(schedules: list[RepeatableJob]) -> Table:
    table = Table(box=None, header_style="bold")
    for column in ("key", "name", "every / pattern", "tz", "next", "count", "limit"):
        table.add_column(column)
    for s in schedules:
        when = f"{s.every} ms" if s.every is not None else str(s.pattern)
        table.add_row(s.key, s.name, when, s.tz or "", _render.iso(s.next) or "",
                      str(s.count), "" if s.limit is None else str(s.limit))  # fmt: skip
    return table


@click.command()
@click.argument("queue")
@JSON_OPTION
@URL_OPTION
@PREFIX_OPTION
def schedules(queue: str, as_json: bool, redis_url: str, prefix: str) -> None:
    """The repeatable jobs (schedules) of QUEUE, the soonest due first: their key, job name,
    interval or cron pattern, next due time and how many occurrences were added.

    \b
    Examples:
      lazarus schedules reports
      lazarus schedules reports --json | jq '.schedules[].next'
    """

    async def work(ops: Operators) -> list[RepeatableJob]:
        try:
            target = ops.queue(queue)
        except (TypeError, ValueError) as exc:
            raise click.UsageError(str(exc)) from None
        return await target.get_repeatable_jobs()

    found = run(redis_url, prefix, work)
    if as_json:
        emit_json({"queue": queue, "schedules": [schedule_json(s) for s in found]})
        return
    out = _render.console()
    if not found:
        out.print(f"no schedules in {queue!r}")
        return
    out.print(schedules_table(found))
