"""A queue's limits across its workers: a rate limit (at most ``max`` jobs started per
``duration`` ms) and a global concurrency (at most ``n`` jobs active at once).

Both are settings of the queue (its ``meta`` hash: ``limiter:max``, ``limiter:duration``,
``concurrency``), enforced where jobs are claimed (``includes/claim.lua``), so that every
worker of the queue shares them. ``Worker(limiter={"max": n, "duration": ms})`` sets the rate
limit when the worker starts; ``queue.set_global_rate_limit`` and ``remove_global_rate_limit``
manage it directly, ``queue.set_global_concurrency`` and ``remove_global_concurrency`` the
concurrency.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from ._checks import check_int
from ._connection import Client, reports_unavailable
from ._keys import QueueKeys
from ._supervision import Incident, pause
from .job_options import MAX_DURATION_MS

MAX_CONCURRENCY = 2**31 - 1


def _max(value: Any, field: str) -> int:
    return check_int(value, field, minimum=1, maximum=MAX_CONCURRENCY)


def _duration(value: Any, field: str) -> int:
    # The window is the PX of a key: Redis refuses one past a 64-bit millisecond count, and
    # a claim whose PEXPIRE fails would fail every claim of the queue.
    return check_int(value, field, minimum=1, maximum=MAX_DURATION_MS)


class RateLimit(NamedTuple):
    """At most ``max`` jobs started per ``duration`` milliseconds."""

    max: int
    duration: int

    @classmethod
    def parse(cls, value: Any, field: str = "limiter") -> RateLimit | None:
        """``None``, or ``{"max": n, "duration": ms}`` validated, errors naming the field."""
        if value is None or isinstance(value, RateLimit):
            return value
        if not isinstance(value, dict):
            raise TypeError(f"{field} must be a dict, not {type(value).__name__}")
        unknown = set(value) - {"max", "duration"}
        if unknown:
            raise ValueError(f"{field} has unknown keys: {sorted(unknown)}")
        return cls(
            _max(value.get("max"), f"{field}.max"),
            _duration(value.get("duration"), f"{field}.duration"),
        )


async def set_limit(client: Client, keys: QueueKeys, limit: RateLimit | None) -> None:
    """Set the queue's rate limit, or with ``None`` remove it (and its current window)."""
    if limit is None:
        async with client.pipeline(transaction=True) as pipe:
            pipe.hdel(keys.meta, "limiter:max", "limiter:duration")
            pipe.delete(keys.limiter)
            await pipe.execute()
        return
    await client.hset(
        keys.meta, mapping={"limiter:max": limit.max, "limiter:duration": limit.duration}
    )


async def publish(
    client: Client,
    queues: Sequence[QueueKeys],
    limit: RateLimit | None,
    *,
    incident: Incident,
    report: Callable[[BaseException, Incident], None],
    stopping: asyncio.Event,
) -> None:
    """Set a starting worker's rate limit on each of its queues (none: nothing to do),
    retried with backoff until Redis answers (or the worker stops): a worker must not claim
    unlimited for want of one write."""
    while limit is not None and not stopping.is_set():
        try:
            for keys in queues:
                await set_limit(client, keys, limit)
        except Exception as exc:
            report(exc, incident)
            await pause(stopping, incident.backoff())
        else:
            incident.succeeded()
            return


class RateLimitMixin:
    """The limits half of :class:`~lazarus.Queue`: rate limit and global concurrency."""

    keys: QueueKeys
    _client: Client

    @reports_unavailable
    async def set_global_rate_limit(self, max: int, duration: int) -> None:
        """Let the workers of this queue start at most ``max`` jobs per ``duration`` ms, all
        together (what ``Worker(limiter={"max": max, "duration": duration})`` sets)."""
        limit = RateLimit(_max(max, "max"), _duration(duration, "duration"))
        await set_limit(self._client, self.keys, limit)

    @reports_unavailable
    async def remove_global_rate_limit(self) -> None:
        """Remove the queue's rate limit and its current window."""
        await set_limit(self._client, self.keys, None)

    @reports_unavailable
    async def get_global_rate_limit(self) -> RateLimit | None:
        """The queue's rate limit, or ``None``."""
        fields = await self._client.hmget(self.keys.meta, ["limiter:max", "limiter:duration"])
        if fields[0] is None or fields[1] is None:
            return None
        return RateLimit(int(fields[0]), int(fields[1]))

    @reports_unavailable
    async def get_rate_limit_ttl(self) -> int:
        """Milliseconds until the current window ends when the limit is reached, else 0."""
        limit = await self.get_global_rate_limit()
        if limit is None:
            return 0
        async with self._client.pipeline(transaction=False) as pipe:
            pipe.get(self.keys.limiter)
            pipe.pttl(self.keys.limiter)
            count, ttl = await pipe.execute()
        if count is None or int(count) < limit.max:
            return 0
        return max(int(ttl), 0)

    @reports_unavailable
    async def set_global_concurrency(self, concurrency: int) -> None:
        """Let the workers of this queue hold at most ``concurrency`` jobs active at once, all
        together (a job a worker claimed ahead counts). Jobs running when it is lowered
        finish; no more start until fewer are active."""
        value = check_int(concurrency, "concurrency", minimum=1, maximum=MAX_CONCURRENCY)
        async with self._client.pipeline(transaction=True) as pipe:
            pipe.hset(self.keys.meta, "concurrency", value)
            pipe.zadd(self.keys.marker, {"0": 0})  # a worker waiting for room may have it now
            await pipe.execute()

    @reports_unavailable
    async def remove_global_concurrency(self) -> None:
        """Let the workers of this queue run as many jobs as their own ``concurrency``."""
        async with self._client.pipeline(transaction=True) as pipe:
            pipe.hdel(self.keys.meta, "concurrency")
            pipe.zadd(self.keys.marker, {"0": 0})
            await pipe.execute()

    @reports_unavailable
    async def get_global_concurrency(self) -> int | None:
        """The queue's global concurrency, or ``None``."""
        value = await self._client.hget(self.keys.meta, "concurrency")
        return None if value is None else int(value)
