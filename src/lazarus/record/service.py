"""Running the outbox's drainers together until told to stop: the record exporter (when a
record is configured) and the webhook deliverer (when endpoints are). What ``lazarus record
export`` runs, and ``lazarus serve`` beside the HTTP API."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .._connection import Client
from .database import Database
from .exporter import RecordExporter
from .schema import check

if TYPE_CHECKING:
    from ..webhooks import WebhookDeliverer, WebhookEndpoint

log = logging.getLogger("lazarus.record")


async def drain(
    redis: Client,
    stop: asyncio.Event,
    *,
    db: Database | None = None,
    endpoints: Sequence[WebhookEndpoint] = (),
    prefix: str = "lazarus",
    idle: float = 1.0,
    link_base: str | None = None,
    claim_idle_ms: int = 30_000,
    max_delay: float | None = None,
) -> None:
    """Export to ``db`` and deliver to ``endpoints`` until ``stop`` is set. The record's schema
    is checked first (:class:`~lazarus.record.RecordSchemaError` when it is behind).

    ``claim_idle_ms``: how long an entry another drainer took may stay unacknowledged before
    this one takes it over (that drainer died); ``max_delay``: the cap of the webhook retry
    backoff, in seconds (an hour by default)."""
    if db is None and not endpoints:
        raise ValueError("nothing to drain: configure a record URL or a webhook")
    tasks = []
    if db is not None:
        await check(db)
        exporter = RecordExporter(redis, db, prefix=prefix, claim_idle_ms=claim_idle_ms)
        tasks.append(asyncio.create_task(exporter.run(stop, idle=idle)))
    if endpoints:
        from ..webhooks import WebhookDeliverer
        from ..webhooks.deliverer import MAX_DELAY

        deliverer = WebhookDeliverer(
            redis, endpoints, prefix=prefix, link_base=link_base, claim_idle_ms=claim_idle_ms,
            max_delay=MAX_DELAY if max_delay is None else max_delay,
        )  # fmt: skip
        tasks.append(asyncio.create_task(_deliver(deliverer, stop, idle)))
    try:
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _deliver(deliverer: WebhookDeliverer, stop: asyncio.Event, idle: float) -> None:
    try:
        while not stop.is_set():
            try:
                attempts = await deliverer.step()
            except Exception:  # Redis away: the events wait in the outbox
                log.exception("webhook delivery failed; retrying")
                attempts = 0
            if attempts == 0:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), idle)
    finally:
        await deliverer.close()
