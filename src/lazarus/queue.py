"""Queue: pause, remove, clean, obliterate (adding jobs: _adding.py; reading them: _reading.py).

Example::

    queue = Queue("emails", connection="redis://localhost:6379/0")
    job = await queue.add("welcome", {"to": "ada@example.com"}, attempts=3,
                          backoff={"type": "exponential", "delay": 1000})
    print(await queue.get_job_state(job.id))
    await queue.close()
"""

from __future__ import annotations

from typing import Any, Literal

from . import _codec, _scripts
from ._adding import QueueAddingMixin
from ._cancelling import CancellingMixin
from ._changing import JobChangesMixin
from ._checks import at_least
from ._codec import text as _text
from ._connection import (
    CLIENT_TYPES,
    UNREACHABLE_ERRORS,
    Client,
    connect,
    now_ms,
    reports_unavailable,
    unavailable,
)
from ._dedup import DeduplicationMixin
from ._keys import (
    QueueKeys,
    glob_escape,
    validate_job_id,
    validate_name,
    validate_queue_name,
)
from ._limiter import RateLimitMixin
from ._progress import JobLogsMixin
from ._reading import QueueReadingMixin
from ._repeat import RepeatMixin
from ._scripts import CALL_BUDGET_US
from ._scripts.wait_search import call_searching_wait
from ._throughput import ThroughputMixin
from .dead_letter import DeadLetterMixin
from .dead_letter.lifecycle import settle_replay
from .errors import RedisUnavailableError, error_for_code
from .job_options import JobOptions
from .retry import RetryMixin
from .schema import PayloadSchema, Schema

DEFAULT_MAX_EVENTS = 10_000
DRAIN_BATCH = 1000  # jobs per clean() of a drain
CleanState = Literal["completed", "failed", "waiting", "prioritized", "delayed"]


class Queue(
    QueueAddingMixin,
    QueueReadingMixin,
    RetryMixin,
    JobChangesMixin,
    CancellingMixin,
    DeadLetterMixin,
    DeduplicationMixin,
    JobLogsMixin,
    RateLimitMixin,
    RepeatMixin,
    ThroughputMixin,
):
    """A named queue of jobs in Redis.

    ``connection`` is a Redis URL (``redis+cluster://host:port`` for a Redis Cluster), a
    ``redis.asyncio.Redis`` or a ``redis.asyncio.cluster.RedisCluster`` client; by default the
    URL in ``LAZARUS_REDIS_URL``, else ``redis://localhost:6379/0``. Every key lives under
    ``<prefix>:{<name>}:`` (a name opening with a hash tag, ``{payments}-dlq``, under
    ``<prefix>:<name>:``: docs/redis-cluster.md). ``schema`` (a pydantic model or a callable, see
    :mod:`lazarus.schema`) checks every payload before it is written.
    """

    def __init__(
        self,
        name: str,
        *,
        connection: str | Client | None = None,
        prefix: str = "lazarus",
        max_payload_bytes: int = _codec.DEFAULT_MAX_PAYLOAD_BYTES,
        max_events: int = DEFAULT_MAX_EVENTS,
        schema: Schema | None = None,
    ) -> None:
        self.name = validate_queue_name(name, "queue name")
        self.prefix = validate_name(prefix, "prefix")
        self.keys = QueueKeys(prefix, name)
        self.max_payload_bytes = _positive_int(max_payload_bytes, "max_payload_bytes")
        self.max_events = _positive_int(max_events, "max_events")
        self.schema = None if schema is None else PayloadSchema(schema)
        self._owns_client = not isinstance(connection, CLIENT_TYPES)
        self._client = connect(connection)
        self._registered = False
        self._options_cache: dict[Any, tuple[JobOptions, str]] = {}

    @property
    def client(self) -> Client:
        """The client this queue uses (``redis.asyncio.Redis`` or ``RedisCluster``)."""
        return self._client

    async def _register(self) -> None:
        if not self._registered:
            # With the batches: a burst of first adds must not take a connection each.
            await _scripts.send(self._client, "SADD", self.keys.registry, self.name)
            self._registered = True

    # -- managing --------------------------------------------------------------------------

    @reports_unavailable
    async def pause(self) -> None:
        """Stop workers from claiming jobs of this queue; running jobs finish."""
        script = _scripts.load("pause_queue")
        await script(self._client, [self.keys.meta, self.keys.marker, self.keys.events],
                      [1, self.max_events])  # fmt: skip

    @reports_unavailable
    async def resume(self) -> None:
        """Let workers claim jobs again."""
        script = _scripts.load("pause_queue")
        await script(self._client, [self.keys.meta, self.keys.marker, self.keys.events],
                      [0, self.max_events])  # fmt: skip

    @reports_unavailable
    async def is_paused(self) -> bool:
        return bool(await self._client.hexists(self.keys.meta, "paused"))

    @reports_unavailable
    async def remove(self, job_id: str) -> None:
        """Remove a job that is not active; raises ``JobNotFoundError`` or ``JobStateError``.

        A removed replayed job's dead letter goes back to ``pending`` at once."""
        k = self.keys
        script = _scripts.load("remove_job")
        replay = await self._client.hmget(k.job(validate_job_id(job_id)), "replayOf", "replayDlq")
        code = await call_searching_wait(
            script,
            self._client,
            k.wait,
            [*k.group, k.completed, k.failed, k.job(job_id)],
            [job_id, self.max_events],
        )
        if code != 1:
            raise error_for_code(int(code), f"remove job {job_id!r} from {self.name!r}")
        if replay[0] is not None:
            await settle_replay(self._client, k, job_id, replay[0], replay[1], self.max_events)

    @reports_unavailable
    async def clean(
        self, grace_ms: int, limit: int = 1000, state: CleanState = "completed"
    ) -> list[str]:
        """Remove up to ``limit`` jobs of ``state`` older than ``grace_ms``; returns their ids.
        However large ``limit``, no call holds Redis for longer than a few milliseconds: the
        work goes over as many calls as it needs (each emits its own ``cleaned`` event).

        On a dead letter queue, ``clean(grace_ms, state="waiting")`` drops dead letters that
        were dead-lettered more than ``grace_ms`` ago, oldest first.
        """
        if state not in ("completed", "failed", "waiting", "prioritized", "delayed"):
            raise ValueError(f"state must be a cleanable state, got {state!r}")
        at_least(grace_ms, "grace_ms", 0)
        at_least(limit, "limit")
        return await self._clean(state, now_ms() - grace_ms, limit, dead_letters=True)

    async def _clean(
        self, state: CleanState, cutoff: int, limit: int, *, dead_letters: bool
    ) -> list[str]:
        """Remove up to ``limit`` jobs of ``state`` added (finished) at or before ``cutoff``;
        in ``waiting`` the store's dead letters too when ``dead_letters``."""
        k = self.keys
        script = _scripts.load("clean_jobs")
        removed: list[str] = []
        # Prioritized and delayed jobs are read from the first, at most ten per job to remove.
        offset, scan = 0, limit * 10 + 1 if state in ("prioritized", "delayed") else 0
        while True:  # each call stops at its time budget; the next goes on from there
            ids, resume, read = await script(
                self._client,
                [*k.group, k.completed, k.failed],
                [state, cutoff, limit - len(removed), self.max_events, CALL_BUDGET_US, offset,
                 scan, int(dead_letters)],
            )  # fmt: skip
            removed += [_text(i) for i in ids]
            offset, scan = int(resume), scan - int(read)
            if offset < 0 or len(removed) >= limit:
                return removed

    @reports_unavailable
    async def drain(self, *, delayed: bool = False, dry_run: bool = False) -> int:
        """Remove the jobs that wait to run (``waiting`` and ``prioritized``, paused or not;
        with ``delayed``, the delayed ones too) and were added before the call began; returns
        how many (with ``dry_run``, how many wait now, removing nothing). Running jobs finish;
        finished jobs and dead letters stay. Goes in the bounded calls of :meth:`clean`, each
        recording ``cleaned``."""
        if dry_run:
            counts = await self.get_job_counts()
            # Dead letters count as waiting, but a drain leaves them.
            ready = counts["waiting"] + counts["prioritized"] + counts["paused"]
            ready -= await self.get_dead_letter_count()
            return ready + (counts["delayed"] if delayed else 0)
        cutoff = now_ms()
        states: tuple[CleanState, ...] = ("waiting", "prioritized", "delayed")
        removed = 0
        for state in states if delayed else states[:2]:
            while True:
                batch = await self._clean(state, cutoff, DRAIN_BATCH, dead_letters=False)
                removed += len(batch)
                if len(batch) < DRAIN_BATCH:
                    break
        return removed

    @reports_unavailable
    async def obliterate(self) -> int:
        """Delete the queue and every job in it; returns the number of keys deleted.

        Every key of the queue, and only those, starts with ``<prefix>:{<name>}:``: names
        cannot hold braces, so no other queue's keys share that start.
        """
        deleted = 0
        batch: list[str] = []
        pattern = glob_escape(self.keys.base) + "*"
        async for key in self._client.scan_iter(match=pattern, count=1000):
            batch.append(key)
            if len(batch) >= 1000:
                deleted += int(await self._client.unlink(*batch))
                batch = []
        if batch:
            deleted += int(await self._client.unlink(*batch))
        await self._client.srem(self.keys.registry, self.name)
        await self._client.srem(self.keys.dead_letter_registry, self.name)
        return deleted

    async def close(self) -> None:
        """Close the connection pool, unless the caller passed its own client."""
        if self._owns_client:
            await self._client.aclose()

    async def __aenter__(self) -> Queue:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


async def list_queues(
    connection: str | Client | None = None, *, prefix: str = "lazarus"
) -> list[str]:
    """The names of every queue under ``prefix`` that was ever written to, sorted."""
    client = connect(connection)
    try:
        names = await client.smembers(QueueKeys(prefix, "_").registry)
    except UNREACHABLE_ERRORS as exc:
        if isinstance(exc, RedisUnavailableError):
            raise
        raise unavailable(client, exc) from exc
    finally:
        if not isinstance(connection, CLIENT_TYPES):
            await client.aclose()
    return sorted(_text(n) for n in names)


def _positive_int(value: object, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{field} must be an int, not {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{field} must be >= 1, got {value}")
    return value
