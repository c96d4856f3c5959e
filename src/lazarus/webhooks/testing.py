"""``lazarus webhooks test URL``: one signed test event, sent at once."""

from __future__ import annotations

import datetime
import uuid

import httpx

from .deliverer import TIMEOUT
from .endpoint import WebhookEndpoint, body, signed_headers


async def send_test(endpoint: WebhookEndpoint) -> tuple[int | None, str]:
    """Send a ``webhook.test`` event to ``endpoint``; returns the HTTP status (None when no
    answer came) and a line saying what happened."""
    now = datetime.datetime.now(datetime.timezone.utc)
    payload = body("webhook.test", {"message": "lazarus webhook test"}, at=now)
    headers = signed_headers(endpoint, f"msg_{uuid.uuid4().hex}", payload, now=now)
    async with httpx.AsyncClient(follow_redirects=False, timeout=TIMEOUT) as client:
        try:
            response = await client.post(endpoint.url, content=payload.encode(), headers=headers)
        except httpx.HTTPError as exc:
            return None, f"no answer from {endpoint.url}: {type(exc).__name__} {exc}".strip()
    verdict = "delivered" if 200 <= response.status_code < 300 else "refused"
    return response.status_code, f"{verdict}: HTTP {response.status_code} from {endpoint.url}"
