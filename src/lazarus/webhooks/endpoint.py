"""Webhook endpoints, and the signed HTTP request of one event.

Requests follow Standard Webhooks (https://www.standardwebhooks.com): a JSON body
``{"type", "timestamp", "data"}`` and the headers ``webhook-id`` (the same on every retry of
one event, so receivers can drop duplicates), ``webhook-timestamp`` (seconds) and
``webhook-signature`` (``v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">`` keyed by the
``whsec_`` secret), signed by the ``standardwebhooks`` library so that its verifiers, and
every other Standard Webhooks verifier, accept them.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import datetime
import hashlib
import json
import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Any

from .._keys import validate_name

# The outbox events a webhook can carry: arrivals, removals by cause, and the statuses a dead
# letter can enter (a status change's event is the status). dead-lettered is the default.
EVENTS = frozenset({"dead-lettered", "purged", "removed", "cleaned", "claimed",
                    "pruned", "pending", "manual", "processing", "resolved", "failed",
                    "archived"})  # fmt: skip
DEFAULT_EVENTS = frozenset({"dead-lettered"})


def _check_url(url: object) -> str:
    if not isinstance(url, str):
        raise TypeError(f"webhook url must be a str, not {type(url).__name__}")
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"webhook url {url!r} must be an http:// or https:// URL with a host")
    try:
        port_ok = parts.port != 0  # None without a port; raises for text or past 65535
    except ValueError:
        port_ok = False
    if not port_ok:
        raise ValueError(f"webhook url {url!r} has a port that is not a number from 1 to 65535")
    return url


def _check_events(events: object) -> frozenset[str]:
    """``events`` as a set of event names. A str is refused: iterable too, "purged" would
    be read as the events 'p', 'u', 'r', ..."""
    if isinstance(events, (str, bytes)) or not isinstance(events, Iterable):
        raise TypeError(
            f"webhook events must be a collection of event names, not {type(events).__name__}"
        )
    chosen = frozenset(events)
    unknown = chosen - EVENTS
    if unknown or not chosen:
        raise ValueError(
            f"webhook events must be some of {sorted(EVENTS)}, got {sorted(unknown, key=str)}"
        )
    return chosen


def _check_secret(secret: object) -> str:
    if not isinstance(secret, str):
        raise TypeError(f"webhook secret must be a str, not {type(secret).__name__}")
    if not secret.startswith("whsec_"):
        raise ValueError("webhook secret must start with 'whsec_' (a base64 key after it)")
    try:
        key = base64.b64decode(secret[len("whsec_") :], validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("webhook secret must be 'whsec_' then base64") from None
    if len(key) < 16:
        raise ValueError("webhook secret must hold at least 16 bytes of key")
    return secret


@dataclasses.dataclass(frozen=True)
class WebhookEndpoint:
    """One receiver of webhook events.

    ``name`` names its consumer group and its retries (a queue-name-like label); ``events``
    the outbox events it receives (by default only ``dead-lettered``).

    >>> WebhookEndpoint("ops", "https://hooks.example.com/in", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2Lm")
    """

    name: str
    url: str
    secret: str
    events: frozenset[str] = DEFAULT_EVENTS

    def __post_init__(self) -> None:
        validate_name(self.name, "webhook name")
        _check_url(self.url)
        _check_secret(self.secret)
        object.__setattr__(self, "events", _check_events(self.events))

    @property
    def group(self) -> str:
        """Its consumer group on each outbox."""
        return f"webhook:{self.name}"

    @classmethod
    def from_mapping(cls, spec: Mapping[str, Any], *, index: int = 0) -> WebhookEndpoint:
        """An endpoint from configuration: ``{"name", "url", "secret", "events"?}``."""
        if not isinstance(spec, Mapping):
            raise TypeError(f"webhooks[{index}] must be an object")
        unknown = set(spec) - {"name", "url", "secret", "events"}
        if unknown:
            raise ValueError(f"webhooks[{index}] has unknown fields {sorted(unknown)}")
        try:
            return cls(
                spec.get("name", f"hook{index}"), spec.get("url"), spec.get("secret"),  # type: ignore[arg-type]
                spec.get("events", DEFAULT_EVENTS),
            )  # fmt: skip
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"webhooks[{index}]: {exc}") from None


def message_id(prefix: str, queue: str, position: str) -> str:
    """The ``webhook-id`` of one outbox entry: the same for every attempt."""
    digest = hashlib.sha256(f"{prefix}\0{queue}\0{position}".encode()).hexdigest()[:32]
    return f"msg_{digest}"


def body(event_type: str, data: Mapping[str, Any], *, at: datetime.datetime) -> str:
    """The JSON body of one event (compact, keys as given)."""
    document = {"type": event_type, "timestamp": _iso(at), "data": dict(data)}
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False)


def signed_headers(
    endpoint: WebhookEndpoint, msg_id: str, payload: str, *, now: datetime.datetime
) -> dict[str, str]:
    """The Standard Webhooks headers of one request (and its content type)."""
    from standardwebhooks.webhooks import Webhook

    signature = Webhook(endpoint.secret).sign(msg_id=msg_id, timestamp=now, data=payload)
    return {
        "content-type": "application/json",
        "webhook-id": msg_id,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": signature,
        "user-agent": "lazarus-webhooks",
    }


def _iso(at: datetime.datetime) -> str:
    at = at.astimezone(datetime.timezone.utc)
    return f"{at:%Y-%m-%dT%H:%M:%S}.{at.microsecond // 1000:03d}Z"
