"""``lazarus queues``."""

from __future__ import annotations

import click

from ..operators import Operators, QueueSummary
from . import _render
from ._columns import hidden_note
from ._options import JSON_OPTION, WIDE_OPTION, emit_json, run
from .main import PREFIX_OPTION, URL_OPTION


@click.command()
@JSON_OPTION
@WIDE_OPTION
@URL_OPTION
@PREFIX_OPTION
def queues(as_json: bool, wide: bool, redis_url: str, prefix: str) -> None:
    """A table of every queue with its job counts, whether it is paused, its dead-letter
    depth and the age of its oldest dead letter.

    \b
    Examples:
      lazarus queues
      lazarus queues --wide
      lazarus queues --json | jq '.queues[] | select(.deadLetters > 0)'
    """

    async def work(ops: Operators) -> list[QueueSummary]:
        return await ops.summaries()

    summaries = run(redis_url, prefix, work)
    now = _render.now_ms()
    if as_json:
        emit_json({"queues": [_render.summary_json(s, now=now) for s in summaries]})
        return
    out = _render.console()
    if not summaries:
        out.print(f"no queues under prefix {prefix!r}")
        return
    table, hidden = _render.queues_table(summaries, now=now, out=out, wide=wide)
    out.print(table)
    if (note := hidden_note(hidden)) is not None:
        out.print(note)
