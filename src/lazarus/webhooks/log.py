"""The webhook delivery log: one entry per attempt in each dead letter queue's
``dl:wh:log`` stream, trimmed to about :data:`LOG_LENGTH` entries; read newest first."""

from __future__ import annotations

from typing import Any

from .._connection import Client
from .._keys import QueueKeys

LOG_LENGTH = 10_000


async def log_attempt(
    redis: Client, prefix: str, queue: str, *, endpoint: str, event: str, dead_letter_id: str,
    message: str, attempt: int, outcome: str, http_status: int | None, error: str,
) -> None:  # fmt: skip
    """Append one attempt: ``outcome`` is ``delivered``, ``failed`` (to be retried) or
    ``abandoned`` (retried for as long as allowed)."""
    await redis.xadd(
        QueueKeys(prefix, queue).dl_webhook_log,
        {"endpoint": endpoint, "event": event, "id": dead_letter_id, "message": message,
         "attempt": attempt, "outcome": outcome, "status": http_status or "",
         "error": error[:500]},
        maxlen=LOG_LENGTH, approximate=True,
    )  # fmt: skip


async def deliveries(
    redis: Client, prefix: str, queues: list[str], *, limit: int = 50,
    dead_letter_id: str | None = None,
) -> list[dict[str, Any]]:  # fmt: skip
    """The newest ``limit`` attempts over ``queues``, newest first."""
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 1000:
        raise ValueError("limit must be an int from 1 to 1000")
    found: list[dict[str, Any]] = []
    for queue in queues:
        reply: Any = await redis.xrevrange(QueueKeys(prefix, queue).dl_webhook_log, count=limit)
        for position, fields in reply:
            if dead_letter_id is not None and fields.get("id") != dead_letter_id:
                continue
            found.append({
                "at": int(position.split("-")[0]), "queue": queue,
                "endpoint": fields.get("endpoint"), "event": fields.get("event"),
                "deadLetterId": fields.get("id"), "message": fields.get("message"),
                "attempt": int(fields.get("attempt") or 0), "outcome": fields.get("outcome"),
                "status": int(fields["status"]) if fields.get("status") else None,
                "error": fields.get("error") or None,
            })  # fmt: skip
    found.sort(key=lambda d: d["at"], reverse=True)
    return found[:limit]
