"""Signed webhooks for dead letter events (docs/webhooks.md), delivered from each dead letter
queue's outbox. Needs the ``record`` extra (httpx, standardwebhooks)."""

from __future__ import annotations

from .deliverer import WebhookDeliverer, backoff
from .endpoint import WebhookEndpoint
from .log import deliveries
from .testing import send_test

__all__ = ["WebhookDeliverer", "WebhookEndpoint", "backoff", "deliveries", "send_test"]
