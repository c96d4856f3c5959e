"""``lazarus scripts``: the function libraries lazarus loads into Redis (7.0 and later), one
per script and version. They persist with the data, so an upgrade leaves the old version's
behind: ``lazarus scripts prune`` removes them."""

from __future__ import annotations

import click

from .. import _scripts
from .._scripts import _loading
from ..operators import Operators
from . import _render
from ._options import JSON_OPTION, emit_json, run
from .main import URL_OPTION


def _current() -> set[str]:
    return {_scripts.load(name).function for name in _scripts.NAMES}


@click.group()
def scripts() -> None:
    """The function libraries of lazarus in Redis (Redis 7.0 and later)."""


@scripts.command(name="list")
@JSON_OPTION
@URL_OPTION
def list_libraries(as_json: bool, redis_url: str) -> None:
    """List the lazarus libraries Redis holds, and whether each is this version's.

    \b
    Examples:
      lazarus scripts list
      lazarus scripts list --json
    """

    async def work(ops: Operators) -> dict[str, bool]:
        return await _loading.libraries(ops.client, _current())

    found = run(redis_url, "lazarus", work)
    if as_json:
        emit_json({"libraries": [{"name": n, "current": c} for n, c in sorted(found.items())]})
        return
    out = _render.console()
    if not found:
        out.print("no lazarus libraries (none loaded yet, or Redis before 7.0)")
    for name, current in sorted(found.items()):
        out.print(f"{name}  {'this version' if current else 'another version'}")


@scripts.command()
@click.option("--dry-run", is_flag=True, help="List what would be deleted; delete nothing.")
@JSON_OPTION
@URL_OPTION
def prune(dry_run: bool, as_json: bool, redis_url: str) -> None:
    """Delete the lazarus libraries of other versions from Redis (every master of a cluster).

    Safe while workers run: a version still running loads its own libraries again at its next
    call. Run it once every process runs this version, after an upgrade.

    \b
    Examples:
      lazarus scripts prune --dry-run
      lazarus scripts prune
    """

    async def work(ops: Operators) -> list[str]:
        if dry_run:
            found = await _loading.libraries(ops.client, _current())
            return sorted(name for name, current in found.items() if not current)
        return await _loading.prune(ops.client, _current())

    names = run(redis_url, "lazarus", work)
    if as_json:
        emit_json({"deleted": [] if dry_run else names, "would_delete": names if dry_run else []})
        return
    out = _render.console()
    verb = "would delete" if dry_run else "deleted"
    for name in names:
        out.print(f"{verb} {name}")
    out.print(f"{verb} {len(names)} librar{'y' if len(names) == 1 else 'ies'} of other versions")
