"""Delivering webhook events from the outbox, at least once, retried for days.

Each endpoint is a consumer group on every dead letter queue's outbox, so an event waits in
Redis until the endpoint has answered 2xx: neither a receiver that is down nor a deliverer
that crashed loses it. A failed attempt leaves the entry unacknowledged and records when to try
again (``dl:wh:s:<endpoint>``): capped exponential backoff with jitter, for ``retry_for``
(three days by default); then the event is given up, and the log says so. Every attempt is
logged (``dl:wh:log``). Redirects are not followed and each request has bounded timeouts.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import os
import random
import socket
import time
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from .._connection import Client
from ..record.database import from_ms
from ..record.outbox import Outbox, OutboxEntry
from .endpoint import WebhookEndpoint, body, message_id, signed_headers
from .log import log_attempt

log = logging.getLogger("lazarus.webhooks")
FIRST_DELAY = 5.0
MAX_DELAY = 3600.0
RETRY_FOR = datetime.timedelta(days=3)
TIMEOUT = httpx.Timeout(10.0, connect=5.0)
# Requests in flight at once per endpoint: a receiver that answers slowly costs a step at
# most batch / CONCURRENCY timeouts.
CONCURRENCY = 8


def backoff(
    attempt: int, *, first: float = FIRST_DELAY, cap: float = MAX_DELAY,
    rng: random.Random | None = None,
) -> float:  # fmt: skip
    """Seconds to wait after failed attempt number ``attempt`` (1 first): ``first`` (5 s)
    doubling up to ``cap`` (an hour), each time between half of it and all of it ("equal
    jitter", so that deliverers retrying together spread out)."""
    full = min(cap, first * 2 ** min(attempt - 1, 30))
    return float(full / 2 + (rng or random).random() * full / 2)


def summary(entry: OutboxEntry, h: Mapping[str, str], *, link_base: str | None) -> dict[str, Any]:
    """The ``data`` of one event: the dead letter's summary and a link to it. ``h`` is its
    hash (empty when it is gone already: the entry's own values stand in)."""
    if not h:
        v = entry.values
        h = {"dlq:sourceQueue": v.get("q", ""), "name": v.get("n", ""),
             "dlq:errorType": v.get("e", ""), "dlq:reason": v.get("r", ""),
             "dlq:deadLetteredAt": str(entry.at)}  # fmt: skip
    at = from_ms(h.get("dlq:deadLetteredAt"))
    path = f"/api/v1/dead-letter/{entry.id}"
    return {
        "id": entry.id,
        "event": entry.event,
        "deadLetterQueue": entry.queue,
        "sourceQueue": h.get("dlq:sourceQueue"),
        "jobName": h.get("name"),
        "originalJobId": h.get("dlq:originalJobId"),
        "failedReason": h.get("dlq:failedReason"),
        "errorType": h.get("dlq:errorType"),
        "reason": h.get("dlq:reason"),
        # The status this change entered, not the one the dead letter has by delivery time.
        "status": entry.status or h.get("dlq:status", ""),
        "attemptsMade": int(h.get("dlq:attemptsMade") or 0),
        "deadLetteredAt": at.isoformat().replace("+00:00", "Z") if at else None,
        "link": (link_base.rstrip("/") + path) if link_base else path,
    }


class WebhookDeliverer:
    """Delivers the outbox events of every dead letter queue of ``prefix`` to ``endpoints``.

    >>> deliverer = WebhookDeliverer(redis, [endpoint], prefix="lazarus")
    >>> await deliverer.step()
    """

    def __init__(
        self,
        redis: Client,
        endpoints: Sequence[WebhookEndpoint],
        *,
        prefix: str = "lazarus",
        batch: int = 50,
        claim_idle_ms: int = 60_000,
        retry_for: datetime.timedelta = RETRY_FOR,
        first_delay: float = FIRST_DELAY,
        max_delay: float = MAX_DELAY,
        link_base: str | None = None,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        names = [e.name for e in endpoints]
        if len(set(names)) != len(names):
            raise ValueError(f"webhook names must be distinct, got {names}")
        self.redis = redis
        self.prefix = prefix
        self.batch = batch
        self.retry_for_ms = int(retry_for.total_seconds() * 1000)
        self.first_delay, self.max_delay = first_delay, max_delay
        self.link_base = link_base
        consumer = f"{socket.gethostname()}:{os.getpid()}"
        self.endpoints = list(endpoints)
        self.outboxes = {
            e.name: Outbox(redis, prefix, group=e.group, consumer=consumer,
                           claim_idle_ms=claim_idle_ms)
            for e in endpoints
        }  # fmt: skip
        self._client = client or httpx.AsyncClient(follow_redirects=False, timeout=TIMEOUT)
        self._owns_client = client is None
        self._enabled: set[tuple[str, str]] = set()

    async def step(self) -> int:
        """One round over every queue and endpoint; returns how many attempts it made. The
        endpoints go at once, so a slow one does not hold back the others."""
        return sum(await asyncio.gather(*(self._endpoint_step(e) for e in self.endpoints)))

    async def _endpoint_step(self, endpoint: WebhookEndpoint) -> int:
        attempts = 0
        outbox = self.outboxes[endpoint.name]
        for queue in await outbox.dead_letter_queues():
            if (endpoint.name, queue) not in self._enabled:
                await outbox.enable(queue)
                self._enabled.add((endpoint.name, queue))
            attempts += await self._deliver_queue(endpoint, outbox, queue)
        return attempts

    async def _deliver_queue(self, endpoint: WebhookEndpoint, outbox: Outbox, queue: str) -> int:
        # This consumer's unacknowledged entries (waiting for a retry) first, then new ones and
        # those a crashed deliverer left; an entry not yet due stays where it is.
        entries = await outbox.pending(queue, count=self.batch)
        entries += await outbox.take(queue, count=self.batch)
        unique = list({e.position: e for e in entries}.values())
        slots = asyncio.Semaphore(CONCURRENCY)

        async def handle(entry: OutboxEntry) -> int:
            async with slots:
                return await self._handle(endpoint, outbox, entry)

        attempts = sum(await asyncio.gather(*(handle(e) for e in unique)))
        await outbox.trim(queue)
        return attempts

    async def _handle(self, endpoint: WebhookEndpoint, outbox: Outbox, entry: OutboxEntry) -> int:
        if entry.event not in endpoint.events:
            await outbox.ack(entry.queue, [entry.position])
            return 0
        schedule = outbox.keys(entry.queue).dl_webhook_schedule(endpoint.name)
        state: Any = await self.redis.hget(schedule, entry.position)
        made, due, first = (int(x) for x in str(state or "0:0:0").split(":"))
        now = int(time.time() * 1000)
        if due > now:
            return 0
        first = first or now
        given_up = now - first >= self.retry_for_ms
        if await self._attempt(endpoint, entry, made + 1, given_up) or given_up:
            await outbox.ack(entry.queue, [entry.position])
            await self.redis.hdel(schedule, entry.position)
        else:
            due = now + int(backoff(made + 1, first=self.first_delay, cap=self.max_delay) * 1000)
            await self.redis.hset(schedule, entry.position, f"{made + 1}:{due}:{first}")
        return 1

    async def _attempt(
        self, endpoint: WebhookEndpoint, entry: OutboxEntry, attempt: int, last: bool
    ) -> bool:
        h: Any = entry.snapshot or await self.redis.hgetall(outbox_job_key(self.prefix, entry))
        at = from_ms(entry.at) or datetime.datetime.now(datetime.timezone.utc)
        data = summary(entry, h, link_base=self.link_base)
        payload = body(f"dead_letter.{entry.event}", data, at=at)
        msg_id = message_id(self.prefix, entry.queue, entry.position)
        now = datetime.datetime.now(datetime.timezone.utc)
        headers = signed_headers(endpoint, msg_id, payload, now=now)
        status, error = None, ""
        try:
            response = await self._client.post(
                endpoint.url, content=payload.encode(), headers=headers
            )
            status = response.status_code
            ok = 200 <= status < 300
            error = "" if ok else f"HTTP {status}"
        except httpx.HTTPError as exc:
            ok, error = False, f"{type(exc).__name__}: {exc}".rstrip(": ")
        outcome = "delivered" if ok else ("abandoned" if last else "failed")
        await log_attempt(
            self.redis, self.prefix, entry.queue,
            endpoint=endpoint.name, event=entry.event, dead_letter_id=entry.id, message=msg_id,
            attempt=attempt, outcome=outcome, http_status=status, error=error,
        )  # fmt: skip
        if not ok:
            log.warning("webhook %s: %s for %s (attempt %d)", endpoint.name, error, msg_id, attempt)
        return ok

    async def close(self) -> None:
        """Close the HTTP client, when the deliverer made it."""
        if self._owns_client:
            await self._client.aclose()


def outbox_job_key(prefix: str, entry: OutboxEntry) -> str:
    """The hash of the dead letter an entry is about."""
    from .._keys import QueueKeys

    return QueueKeys(prefix, entry.queue).job(entry.id)
