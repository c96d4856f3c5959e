"""``lazarus serve``: the HTTP API and dashboard."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import click

from .._connection import DEFAULT_URL
from ._record_options import endpoints, record_url_option, webhook_options

if TYPE_CHECKING:
    from ..webhooks import WebhookEndpoint


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` exposes the server to this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name other than localhost may resolve to anything


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535))
@click.option("--redis-url", envvar="LAZARUS_REDIS_URL", default=DEFAULT_URL, show_default=True,
              help="Redis URL (or set LAZARUS_REDIS_URL).")  # fmt: skip
@click.option("--prefix", default="lazarus", show_default=True, help="Key prefix.")
@click.option("--token", envvar="LAZARUS_API_TOKEN", default=None,
              help="Bearer token required by state-changing routes (or set LAZARUS_API_TOKEN); "
                   "required to bind a non-loopback address.")  # fmt: skip
@click.option("--dead-letter-queue", default="ojs-dead-letter", show_default=True,
              help="Dead letter queue of jobs enqueued over Open Job Spec (OJS).")  # fmt: skip
@click.option(
    "--ojs-test-hooks",
    is_flag=True,
    hidden=True,
    help="Honour the OJS conformance suite's test directives (tests only).",
)
@record_url_option(required=False)
@webhook_options
@click.option("--link-base", envvar="LAZARUS_PUBLIC_URL", default=None,
              help="This server's public URL, for links in webhooks.")  # fmt: skip
def serve(
    host: str, port: int, redis_url: str, prefix: str, token: str | None,
    dead_letter_queue: str, ojs_test_hooks: bool,
    record_url: str | None, webhook_url: str | None, webhook_secret: str | None,
    webhook_events: str, webhooks_file: str | None, link_base: str | None,
) -> None:  # fmt: skip
    """Serve the HTTP API and the dashboard with uvicorn until SIGTERM or SIGINT; with a
    record or webhooks configured, export and deliver the dead letter outbox beside it."""
    if not token and not is_loopback(host):
        raise click.UsageError(
            f"refusing to serve on {host!r} without a token: anyone who can reach it could "
            "replay or purge dead letters. Pass --token (or set LAZARUS_API_TOKEN), or bind "
            "127.0.0.1."
        )
    try:
        import uvicorn

        from ..http import create_app
    except ImportError as exc:
        raise click.ClickException(
            f"{exc}; install the server extra: pip install 'lazarus-queue[server]'"
        ) from None
    try:
        hooks = endpoints(webhook_url, webhook_secret, webhook_events, webhooks_file)
        drainers = _drainers(redis_url, prefix, record_url, hooks, link_base)
        app = create_app(
            connection=redis_url, prefix=prefix, token=token, record=record_url,
            drainers=drainers, dead_letter_queue=dead_letter_queue, ojs_test_hooks=ojs_test_hooks,
        )  # fmt: skip
    except (TypeError, ValueError) as exc:
        raise click.BadParameter(str(exc)) from None
    click.echo(f"lazarus API on http://{host}:{port} (prefix {prefix!r})")
    uvicorn.run(app, host=host, port=port, log_level="info")


def _drainers(
    redis_url: str, prefix: str, record_url: str | None, hooks: list[WebhookEndpoint],
    link_base: str | None,
) -> list[Callable[[asyncio.Event], Awaitable[None]]]:  # fmt: skip
    """The outbox drainer the server runs in the background, when anything is configured."""
    if record_url is None and not hooks:
        return []

    async def run(stop: asyncio.Event) -> None:
        from .._connection import connect
        from ..record import open_database
        from ..record.service import drain

        redis = connect(redis_url)
        db = open_database(record_url) if record_url else None
        try:
            await drain(redis, stop, db=db, endpoints=hooks, prefix=prefix, link_base=link_base)
        except Exception:
            logging.getLogger("lazarus.record").exception("the outbox drainer stopped")
            raise
        finally:
            if db is not None:
                await db.close()
            await redis.aclose()

    return [run]
