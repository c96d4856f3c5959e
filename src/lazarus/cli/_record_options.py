"""Options shared by the commands that use the record or webhooks: the record URL, and the
webhook endpoints from the environment (``LAZARUS_WEBHOOK_URL`` and ``LAZARUS_WEBHOOK_SECRET``
for one) or a JSON file (``LAZARUS_WEBHOOKS_FILE``: a list of ``{name, url, secret,
events}``)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from ..webhooks import WebhookEndpoint

F = TypeVar("F", bound=Callable[..., Any])
DEFAULT_RECORD_FILE = "lazarus-record.db"


def record_url_option(*, required: bool) -> Callable[[F], F]:
    """``--record-url`` (``LAZARUS_RECORD_URL``); when ``required``, a SQLite file in the
    working directory by default."""
    return click.option(
        "--record-url",
        envvar="LAZARUS_RECORD_URL",
        default=None,
        help="Record URL: sqlite:///<absolute path> or postgresql://user:pw@host:port/db "
        "(or set LAZARUS_RECORD_URL)"
        + (f"; default: ./{DEFAULT_RECORD_FILE}." if required else "."),
    )


def resolve_record_url(value: str | None) -> str:
    """The record URL to use: ``value``, else the default SQLite file."""
    return value or f"sqlite:///{os.path.abspath(DEFAULT_RECORD_FILE)}"


def webhook_options(command: F) -> F:
    """``--webhook-url``, ``--webhook-secret``, ``--webhook-events`` and ``--webhooks-file``."""
    for option in reversed([
        click.option("--webhook-url", envvar="LAZARUS_WEBHOOK_URL", default=None,
                     help="One webhook endpoint (or set LAZARUS_WEBHOOK_URL)."),
        click.option("--webhook-secret", envvar="LAZARUS_WEBHOOK_SECRET", default=None,
                     help="Its whsec_ signing secret (or set LAZARUS_WEBHOOK_SECRET)."),
        click.option("--webhook-events", envvar="LAZARUS_WEBHOOK_EVENTS",
                     default="dead-lettered", show_default=True,
                     help="Comma-separated events it receives (or LAZARUS_WEBHOOK_EVENTS)."),
        click.option("--webhooks-file", envvar="LAZARUS_WEBHOOKS_FILE", default=None,
                     type=click.Path(exists=True, dir_okay=False),
                     help="A JSON list of endpoints {name, url, secret, events} "
                          "(or set LAZARUS_WEBHOOKS_FILE)."),
    ]):  # fmt: skip
        command = option(command)
    return command


def endpoints(
    url: str | None, secret: str | None, events: str, path: str | None
) -> list[WebhookEndpoint]:
    """The configured endpoints; a usage error naming the setting when one is wrong."""
    if url is None and path is None:
        return []
    from ..webhooks import WebhookEndpoint

    found = []
    try:
        if url is not None:
            if not secret:
                raise ValueError("LAZARUS_WEBHOOK_URL needs LAZARUS_WEBHOOK_SECRET (whsec_...)")
            chosen = frozenset(e.strip() for e in events.split(",") if e.strip())
            found.append(WebhookEndpoint("default", url, secret, chosen))
        if path is not None:
            with open(path, encoding="utf-8") as file:
                specs = json.load(file)
            if not isinstance(specs, list):
                raise ValueError(f"{path} must hold a JSON list of webhook endpoints")
            found += [WebhookEndpoint.from_mapping(s, index=i) for i, s in enumerate(specs)]
    except (TypeError, ValueError) as exc:
        raise click.UsageError(str(exc)) from None
    return found


def outbox_drainers(
    redis_url: str, prefix: str, record_url: str | None, hooks: list[WebhookEndpoint],
    link_base: str | None,
) -> list[Callable[[asyncio.Event], Coroutine[Any, Any, None]]]:  # fmt: skip
    """The outbox drainer ``lazarus serve`` and ``lazarus redrive`` run beside their work when a
    record or webhooks are configured (none otherwise)."""
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
