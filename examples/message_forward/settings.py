"""The service's settings: names, retries, retention and limits, with the required defaults."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

QUEUE = "message-forward"
DEAD_LETTER_QUEUE = "message-forward-dlq"


@dataclasses.dataclass(frozen=True)
class Settings:
    """What the service runs with. The defaults are the service's requirements; tests and
    benchmarks shorten the times.

    ``lock_duration_ms`` is the visibility timeout: a job whose consumer died (its lease no
    longer renewed) is handed to another consumer within about that long, checked every
    ``stalled_interval_ms``.
    """

    redis_url: str | None = None
    prefix: str = "lazarus"
    queue: str = QUEUE
    dead_letter_queue: str = DEAD_LETTER_QUEUE
    attempts: int = 3
    backoff_ms: int = 5_000  # exponential: 5 s before the 2nd attempt, 10 s before the 3rd
    keep_completed: int = 1_000
    keep_failed: int = 5_000  # jobs failed for good: in the dead letter queue
    max_payload_bytes: int = 64 * 1024
    concurrency: int = 10
    lock_duration_ms: int = 30_000
    stalled_interval_ms: int = 30_000
    connect_timeout_s: float = 2.0
    api_token: str | None = None  # the dashboard's and API's token; None: no sign-in

    @classmethod
    def from_env(cls, **overrides: Any) -> Settings:
        """Settings with the Redis URL from ``LAZARUS_REDIS_URL`` (unset: ``None``) and the
        dashboard's token from ``LAZARUS_API_TOKEN`` (unset: the dashboard asks for none,
        which suits a service on 127.0.0.1 only)."""
        return cls(
            redis_url=os.environ.get("LAZARUS_REDIS_URL") or None,
            api_token=os.environ.get("LAZARUS_API_TOKEN") or None,
            **overrides,
        )

    def job_options(self) -> dict[str, Any]:
        """The options every forward job is added with."""
        return {
            "attempts": self.attempts,
            "backoff": {"type": "exponential", "delay": self.backoff_ms},
            "remove_on_complete": {"count": self.keep_completed},
            "remove_on_fail": {"count": self.keep_failed},
        }
