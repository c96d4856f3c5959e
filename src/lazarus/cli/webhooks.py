"""``lazarus webhooks``: send a signed test event, and read the delivery log."""

from __future__ import annotations

import click

from ._options import emit_json
from .main import PREFIX_OPTION, URL_OPTION
from .record import forget_group, run_async


@click.group()
def webhooks() -> None:
    """Signed webhooks for dead letter events (docs/webhooks.md)."""


@webhooks.command()
@click.argument("url")
@click.option("--secret", envvar="LAZARUS_WEBHOOK_SECRET", required=True,
              help="The whsec_ signing secret (or set LAZARUS_WEBHOOK_SECRET).")  # fmt: skip
def test(url: str, secret: str) -> None:
    """Send one signed ``webhook.test`` event to URL now and say how it answered."""
    from ..webhooks import WebhookEndpoint, send_test

    try:
        endpoint = WebhookEndpoint("test", url, secret)
    except (TypeError, ValueError) as exc:
        raise click.UsageError(str(exc)) from None
    status, line = run_async(send_test(endpoint))
    click.echo(line)
    if status is None or not 200 <= status < 300:
        raise SystemExit(1)


@webhooks.command()
@URL_OPTION
@PREFIX_OPTION
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 1000))
@click.option("--id", "dead_letter_id", default=None, help="Only the events of this dead letter.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def deliveries(
    redis_url: str, prefix: str, limit: int, dead_letter_id: str | None, as_json: bool
) -> None:
    """The webhook delivery log, newest first: every attempt and how it ended."""
    from .._connection import connect
    from ..dead_letter import DeadLetterView
    from ..webhooks import deliveries as read

    async def work() -> list[dict[str, object]]:
        redis = connect(redis_url)
        try:
            queues = await DeadLetterView(redis, prefix=prefix).dead_letter_queues()
            return await read(redis, prefix, queues, limit=limit, dead_letter_id=dead_letter_id)
        finally:
            await redis.aclose()

    found = run_async(work())
    if as_json:
        emit_json(found)
        return
    for d in found:
        status = d["status"] if d["status"] is not None else "-"
        click.echo(
            f"{d['at']}  {d['endpoint']:<12} {d['event']:<14} {d['deadLetterId']}  "
            f"attempt {d['attempt']}  {d['outcome']:<9} {status}  {d['error'] or ''}".rstrip()
        )
    click.echo(f"{len(found)} delivery attempts")


@webhooks.command()
@click.argument("name")
@URL_OPTION
@PREFIX_OPTION
def forget(name: str, redis_url: str, prefix: str) -> None:
    """Retire webhook endpoint NAME (``default`` for the one from LAZARUS_WEBHOOK_URL): drop
    its place and its pending retries in every outbox, so that they are no longer kept."""
    from .._keys import validate_name

    try:
        validate_name(name, "webhook name")
    except (TypeError, ValueError) as exc:
        raise click.UsageError(str(exc)) from None
    count = run_async(forget_group(redis_url, prefix, f"webhook:{name}", name))
    click.echo(f"webhook {name!r} forgotten in {count} dead letter queues")
