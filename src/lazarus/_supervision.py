"""Riding out failures: which errors are worth retrying, how long to wait, what to log.

A worker's loops (start-up, claiming, recording outcomes, lease renewal, the stall sweep)
never end on a Redis error: each keeps an :class:`Incident` that logs the first failure, a
change of error and the recovery, with a reminder while the same failure goes on — one
line per state change instead of one per attempt — and waits a capped, jittered backoff
between attempts. Only a configuration Redis refuses outright (a wrong password, a database
index it does not have, a server that does not speak its protocol) is worth failing for.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from redis.backoff import EqualJitterBackoff
from redis.exceptions import (
    AuthenticationError,
    AuthenticationWrongNumberOfArgsError,
    InvalidResponse,
    NoPermissionError,
    ResponseError,
)

from ._connection import Client, address, unavailable
from .errors import RedisUnavailableError

MAX_BACKOFF = 5.0  # seconds: the longest wait between two attempts
FIRST_BACKOFF = 0.1
REMINDER_INTERVAL = 60.0  # seconds between two log lines about the same failure

_BAD_CONFIGURATION = (
    AuthenticationError,
    AuthenticationWrongNumberOfArgsError,
    NoPermissionError,
    InvalidResponse,
)
_BAD_DATABASE = ("db index is out of range", "invalid db index", "select is not allowed")


def is_configuration_error(exc: BaseException) -> bool:
    """Whether ``exc`` says the connection settings are wrong, not that Redis is in trouble."""
    if isinstance(exc, _BAD_CONFIGURATION):
        return True
    return isinstance(exc, ResponseError) and any(
        text in str(exc).lower() for text in _BAD_DATABASE
    )


def describe(exc: BaseException) -> str:
    """``exc`` in one line: its class and its message's first line."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


class Incident:
    """One loop's failures until it succeeds again, logged without flooding.

    ``failed(exc)`` logs at WARNING the first failure, any failure of another kind than the
    last one logged, and a reminder every ``reminder`` seconds while the same failure goes
    on; ``succeeded()`` logs the recovery once, at INFO. ``backoff()`` is the wait before the next
    attempt: capped and jittered (redis-py's equal-jitter exponential backoff).
    """

    def __init__(
        self, logger: logging.Logger, what: str, *, reminder: float = REMINDER_INTERVAL
    ) -> None:
        self.what = what
        self.failures = 0
        self._log = logger
        self._reminder = reminder
        self._since = 0.0
        self._logged_at = 0.0
        self._logged_kind = ""
        self._backoff = EqualJitterBackoff(cap=MAX_BACKOFF, base=FIRST_BACKOFF)

    def failed(self, exc: BaseException) -> None:
        """Count a failure of the loop and log it if it is news (or a reminder is due)."""
        now = time.monotonic()
        kind = describe(exc)
        self.failures += 1
        if self.failures == 1:
            self._since = now
            self._say("%s failed: %s; retrying with backoff", now, kind)
        elif kind != self._logged_kind:
            self._say("%s failed again, differently: %s; retrying with backoff", now, kind)
        elif now - self._logged_at >= self._reminder:
            self._log.warning(
                "%s still failing after %d attempts over %.0f s: %s; retrying with backoff",
                self.what, self.failures, now - self._since, kind,
            )  # fmt: skip
            self._logged_at = now
        self._logged_kind = kind

    def _say(self, message: str, now: float, kind: str) -> None:
        self._log.warning(message, self.what, kind)
        self._logged_at = now

    def succeeded(self) -> None:
        """The loop works again: log the recovery if it had failed."""
        if self.failures:
            self._log.info(
                "%s works again after %d failed attempts over %.0f s",
                self.what, self.failures, time.monotonic() - self._since,
            )  # fmt: skip
            self.failures = 0
            self._logged_kind = ""

    def backoff(self) -> float:
        """Seconds to wait before the next attempt."""
        return float(self._backoff.compute(self.failures))


async def pause(stopping: asyncio.Event, seconds: float) -> None:
    """Wait ``seconds``, or less if ``stopping`` is set meanwhile."""
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(stopping.wait(), seconds)


async def register(
    client: Client,
    entries: dict[str, list[str]],
    *,
    incident: Incident,
    report: Callable[[BaseException, Incident], None],
    stopping: asyncio.Event,
) -> bool:
    """Add names to registries (``{registry key: names}``), the first thing a worker asks of
    Redis: retried
    with backoff until Redis answers (it may start after the worker, or be out of memory).
    False when ``stopping`` is set first; a configuration Redis refuses raises
    :class:`~lazarus.RedisUnavailableError` with a one-line message at once."""
    while not stopping.is_set():
        try:
            for registry, names in entries.items():
                await client.sadd(registry, *names)
        except Exception as exc:
            if isinstance(exc, InvalidResponse):
                raise unavailable(client, exc) from exc
            if is_configuration_error(exc):
                raise RedisUnavailableError(
                    f"Redis at {address(client)} refused the connection settings: {describe(exc)}"
                ) from exc
            report(exc, incident)
            await pause(stopping, incident.backoff())
        else:
            incident.succeeded()
            return True
    return False
