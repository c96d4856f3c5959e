"""``lazarus migrate``: the upgrade step from lazarus 0.1, which kept dead letters in the
waiting list of their dead letter queue; ``Queue.migrate_dead_letters`` moves them into the
queue's dead letter store."""

from __future__ import annotations

from typing import Any

import click

from .._keys import validate_queue_name
from ..operators import Operators
from . import _render
from ._options import JSON_OPTION, emit_json, run
from .main import PREFIX_OPTION, URL_OPTION


def _check_names(
    ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> tuple[str, ...]:
    try:
        return tuple(validate_queue_name(value, "queue") for value in values)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx, param) from None


async def dead_letter_queues(ops: Operators) -> list[str]:
    """Every queue of the prefix that has received a dead letter (its counters say so, which
    0.1 kept too) or is registered as a dead letter queue, sorted."""
    names = set(await ops.view.dead_letter_queues())
    for summary in await ops.summaries():
        if summary.is_dead_letter_queue:
            names.add(summary.name)
    return sorted(names)


@click.command()
@click.argument("queue_names", metavar="[QUEUE]...", nargs=-1, callback=_check_names)
@JSON_OPTION
@URL_OPTION
@PREFIX_OPTION
def migrate(queue_names: tuple[str, ...], as_json: bool, redis_url: str, prefix: str) -> None:
    """Move dead letters that lazarus 0.1 left in the waiting lists of dead letter queues into
    their dead letter stores: the upgrade step from 0.1. Prints how many moved per queue.

    Without QUEUE, every dead letter queue of the prefix is migrated: every queue that has
    ever received a dead letter. Ordinary queues are left alone (a migration looks at every
    waiting job); name one to migrate it anyway. Safe to run again, and while workers run.

    \b
    Examples:
      lazarus migrate
      lazarus migrate payments-dlq emails-dlq --json
    """

    async def work(ops: Operators) -> list[tuple[str, int]]:
        names = list(queue_names) or await dead_letter_queues(ops)
        return [(name, await ops.queue(name).migrate_dead_letters()) for name in names]

    results = run(redis_url, prefix, work)
    moved = sum(count for _, count in results)
    if as_json:
        document: dict[str, Any] = {
            "queues": [{"name": name, "moved": count} for name, count in results],
            "moved": moved,
        }
        emit_json(document)
        return
    out = _render.console()
    if not results:
        out.print(f"no dead letter queues under prefix {prefix!r}: nothing to migrate")
        return
    for name, count in results:
        out.print(f"{name}: moved {count} dead letter{'' if count == 1 else 's'}")
    queues = f"{len(results)} queue{'' if len(results) == 1 else 's'}"
    out.print(f"moved {moved} dead letter{'' if moved == 1 else 's'} in {queues}")
