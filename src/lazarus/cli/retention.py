"""``lazarus retention DLQ``: show or set the retention policy of a dead letter queue, and
prune it now."""

from __future__ import annotations

import dataclasses
import json

import click

from ..dead_letter import RetentionPolicy
from ..operators import Operators
from ._options import open_queue, run
from .main import PREFIX_OPTION, URL_OPTION, check_name, one_line


@click.command()
@click.argument("dlq", callback=check_name)
@click.option("--max-age", default=None, help="ISO 8601 duration (P180D); 'none' for no limit.")
@click.option("--max-count", default=None, help="Most dead letters kept; 'none' for no limit.")
@click.option("--prune", "action", type=click.Choice(["delete", "archive"]), default=None,
              help="What the limits do.")  # fmt: skip
@click.option("--now", "prune_now", is_flag=True, help="Prune by the policy now.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@URL_OPTION
@PREFIX_OPTION
def retention(
    dlq: str, max_age: str | None, max_count: str | None, action: str | None, prune_now: bool,
    as_json: bool, redis_url: str, prefix: str,
) -> None:  # fmt: skip
    """Show the retention policy of DLQ; with options, change it first (the rest is kept);
    with --now, prune by it."""
    changes: dict[str, object] = {}
    if max_age is not None:
        changes["max_age"] = None if max_age.lower() == "none" else max_age
    if max_count is not None:
        changes["max_count"] = _count(max_count)
    if action is not None:
        changes["prune"] = action
    try:  # the values alone, before Redis is touched
        dataclasses.replace(RetentionPolicy(), **changes)  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        raise click.UsageError(one_line(str(exc))) from None

    async def work(ops: Operators) -> tuple[dict[str, object], int | None]:
        queue = await open_queue(ops, dlq)
        policy = await queue.get_retention_policy()
        if changes:
            policy = dataclasses.replace(policy, **changes)  # type: ignore[arg-type]
            await queue.set_retention_policy(policy)
        pruned = await queue.prune_dead_letters() if prune_now else None
        return policy.to_json(), pruned

    policy, pruned = run(redis_url, prefix, work)
    if as_json:
        click.echo(json.dumps({"policy": policy, "pruned": pruned}, indent=2))
        return
    click.echo(f"max age {policy['maxAge'] or 'none'}, max count "
               f"{policy['maxCount'] if policy['maxCount'] is not None else 'none'}, "
               f"prune by {policy['prune']}")  # fmt: skip
    for status, rule in policy["statuses"].items():  # type: ignore[attr-defined]
        then = f" then {rule['prune']}" if rule["prune"] else ""
        click.echo(f"  {status:10} {rule['maxAge'] or 'kept'}{then}")
    if pruned is not None:
        click.echo(f"pruned {pruned}")


def _count(text: str) -> int | None:
    if text.lower() == "none":
        return None
    try:
        return int(text)
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a whole number or 'none'",
                                 param_hint="'--max-count'") from None  # fmt: skip
