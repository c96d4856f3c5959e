"""``lazarus audit``: the audit trail of the operator surfaces, newest first."""

from __future__ import annotations

import click
from rich import box
from rich.table import Table

from ..audit import AuditEntry, AuditTrail
from ..operators import Operators
from . import _render
from ._options import JSON_OPTION, emit_json, run
from .main import PREFIX_OPTION, URL_OPTION


def _table(entries: list[AuditEntry]) -> Table:
    table = Table(box=box.SIMPLE_HEAD)
    for column in ("time", "actor", "role", "request", "status", "count", "detail"):
        table.add_column(column, overflow="fold")
    for e in entries:
        request = f"{e.method} {e.path}" + (f"?{e.query}" if e.query else "")
        table.add_row(
            _render.iso(e.at), _render.Text(e.actor), e.role, _render.Text(request),
            f"{e.status} {e.outcome}", "" if e.count is None else str(e.count),
            _render.Text(_render.truncate(e.detail)),
        )  # fmt: skip
    return table


@click.command()
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 1000))
@click.option("--before", default=None, metavar="ID", help="Entries older than this entry id.")
@JSON_OPTION
@URL_OPTION
@PREFIX_OPTION
def audit(limit: int, before: str | None, as_json: bool, redis_url: str, prefix: str) -> None:
    """The audit trail: every request that asked the HTTP API or the dashboard to change
    something (replay, purge, archive, status changes, pause, policies, rules, webhooks),
    who asked, and what came of it; newest first.

    \b
    Examples:
      lazarus audit
      lazarus audit --limit 200 --json
    """

    async def work(ops: Operators) -> list[AuditEntry]:
        try:
            return await AuditTrail(ops.client, ops.prefix).read(limit=limit, before=before)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--before") from None

    entries = run(redis_url, prefix, work)
    if as_json:
        next_id = entries[-1].id if len(entries) == limit else None
        document = {"entries": [{**e.to_json(), "at": _render.iso(e.at)} for e in entries],
                    "next": next_id}  # fmt: skip
        emit_json(document)
        return
    out = _render.console()
    if not entries:
        out.print(f"the audit trail of prefix {prefix!r} is empty")
        return
    out.print(_table(entries))
    if len(entries) == limit:
        out.print(f"older entries: --before {entries[-1].id}")
