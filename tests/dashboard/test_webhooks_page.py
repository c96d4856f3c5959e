"""The dashboard's webhook page: the delivery log, one row per attempt."""

from __future__ import annotations

import html

import httpx
import redis.asyncio as aioredis

from lazarus._keys import QueueKeys
from lazarus.webhooks.log import log_attempt


async def test_the_page_lists_each_attempt_newest_first_and_filters_by_dead_letter(
    client: httpx.AsyncClient, raw: aioredis.Redis, prefix: str
) -> None:
    # Given two attempts for one dead letter and one for another, logged by a deliverer
    await raw.sadd(QueueKeys(prefix, "jobs-dlq").dead_letter_registry, "jobs-dlq")
    for attempt, outcome, status in ((1, "failed", 503), (2, "delivered", 204)):
        await log_attempt(raw, prefix, "jobs-dlq", endpoint="ops", event="dead-lettered",
                          dead_letter_id="dl-1", message="msg_1", attempt=attempt,
                          outcome=outcome, http_status=status, error="<HTTP 503>")  # fmt: skip
    await log_attempt(raw, prefix, "jobs-dlq", endpoint="ops", event="dead-lettered",
                      dead_letter_id="dl-2", message="msg_2", attempt=1, outcome="failed",
                      http_status=None, error="ConnectError")  # fmt: skip

    # When the page is loaded, whole and for dl-1
    everything = await client.get("/dashboard/webhooks")
    one = await client.get("/dashboard/webhooks", params={"id": "dl-1"})

    # Then every attempt is a row, newest first, its text escaped
    assert everything.status_code == 200
    rows = everything.text.split('<tr class="outcome-')[1:]
    assert [r.split('"')[0] for r in rows] == ["failed", "delivered", "failed"]
    assert "dl-2" in rows[0] and "ConnectError" in rows[0]
    assert html.escape("<HTTP 503>") in everything.text and "<HTTP 503>" not in everything.text
    assert one.text.count('<tr class="outcome-') == 2 and "dl-2" not in one.text


async def test_the_page_needs_the_sign_in_when_a_token_is_set(secured: httpx.AsyncClient) -> None:
    response = await secured.get("/dashboard/webhooks")

    assert response.status_code == 303
    assert response.headers["location"].startswith("/dashboard/login")
