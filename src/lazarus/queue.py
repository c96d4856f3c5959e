"""Queue: add jobs, pause, remove, clean (reading them back: _reading.py).

Example::

    queue = Queue("emails", connection="redis://localhost:6379/0")
    job = await queue.add("welcome", {"to": "ada@example.com"}, attempts=3,
                          backoff={"type": "exponential", "delay": 1000})
    print(await queue.get_job_state(job.id))
    await queue.close()
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Literal, NamedTuple

from . import _codec, _scripts, _tracing
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
from ._dedup import NO_DEDUPLICATION, Deduplication, DeduplicationMixin
from ._keys import (
    QueueKeys,
    glob_escape,
    has_lone_surrogate,
    new_id,
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
from .dead_letter import DeadLetterMixin
from .dead_letter.lifecycle import settle_replay
from .errors import ErrorCode, RedisUnavailableError, error_for_code
from .job import MAX_JOB_NAME_LENGTH, Job, JobOptions
from .retry import RetryMixin
from .schema import PayloadSchema, Schema

DEFAULT_MAX_EVENTS = 10_000
# One add_jobs call takes at most BULK_CHUNK jobs and BULK_BYTES of payloads (a larger job
# goes alone), so that it holds Redis for a few milliseconds at most, whatever the payloads.
BULK_CHUNK = 250
BULK_BYTES = 1024 * 1024
BULK_IN_FLIGHT = 8
CleanState = Literal["completed", "failed", "waiting", "prioritized", "delayed"]
_ADD_KEYS = {
    "name", "data", "job_id", "attempts", "backoff", "delay", "priority",
    "remove_on_complete", "remove_on_fail", "timeout", "deduplication", "on_exhaustion",
}  # fmt: skip


class Queue(
    QueueReadingMixin,
    RetryMixin,
    DeadLetterMixin,
    DeduplicationMixin,
    JobLogsMixin,
    RateLimitMixin,
    RepeatMixin,
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

    # -- adding ----------------------------------------------------------------------------

    def _prepare(self, name: object, data: Any, options: Mapping[str, Any]) -> _Prepared:
        """Validate one job and build its script arguments; raises before any write."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"job name must be a non-empty str, got {name!r}")
        if len(name) > MAX_JOB_NAME_LENGTH:
            limit = MAX_JOB_NAME_LENGTH
            raise ValueError(f"job name is {len(name)} characters long, over the limit of {limit}")
        if has_lone_surrogate(name):
            raise ValueError(f"job name {name!r} has a lone surrogate, which UTF-8 cannot encode")
        unknown = set(options) - _ADD_KEYS
        if unknown:
            raise TypeError(f"unknown job options: {sorted(unknown)}")
        job_id = options.get("job_id")
        job_id = new_id() if job_id is None else validate_job_id(job_id)
        dedup = Deduplication.parse(options.get("deduplication"))
        opts, opts_json = self._options(
            {k: v for k, v in options.items() if k not in ("job_id", "deduplication")}
        )
        if self.schema is not None:
            data = self.schema.stored(data)
        payload = _codec.encode(data, field="data", max_bytes=self.max_payload_bytes)
        args = [job_id, name, payload, opts_json, opts.delay, opts.priority, opts.attempts]
        return _Prepared(args, data, opts, dedup)

    def _options(self, options: dict[str, Any]) -> tuple[JobOptions, str]:
        """Validated options and their JSON; a bulk of jobs with equal options builds them once."""
        try:
            key: Any = tuple(options.items())  # scalars only (the usual case): no sorting
            cached = self._options_cache.get(key)
        except TypeError:
            try:
                key = tuple(sorted((k, _freeze(v)) for k, v in options.items()))
                cached = self._options_cache.get(key)
            except TypeError:  # an unhashable value: no caching
                key, cached = None, None
        if cached is None:
            opts = JobOptions(**options)
            cached = (opts, _codec.encode(opts.to_dict(), field="opts"))
            if key is not None and len(self._options_cache) < 64:
                self._options_cache[key] = cached
        return cached

    async def add(
        self,
        name: str,
        data: Any = None,
        *,
        job_id: str | None = None,
        attempts: int = 1,
        backoff: Any = None,
        delay: int = 0,
        priority: int = 0,
        remove_on_complete: Any = False,
        remove_on_fail: Any = False,
        timeout: int | None = None,
        deduplication: Mapping[str, Any] | None = None,
        repeat: Mapping[str, Any] | None = None,
        on_exhaustion: str | None = None,
    ) -> Job:
        """Add one job and return it.

        ``data`` is any JSON value. ``attempts`` counts the first run; ``backoff`` is
        ``{"type": "fixed" | "exponential", "delay": ms}``; ``delay`` (ms) postpones the first
        run; ``priority`` 1 is the highest (0, the default, means none: such jobs run first,
        in FIFO order); ``remove_on_complete`` / ``remove_on_fail`` take ``True``, a count to
        keep, or ``{"age": seconds, "count": n}``; ``timeout`` (ms) fails an attempt that runs
        longer with :class:`~lazarus.JobTimeoutError` (by default the worker's
        ``job_timeout``, if any); ``on_exhaustion`` (``dead_letter``, ``fail`` or
        ``discard``) says what a terminal failure does. Adding a ``job_id`` that exists
        returns the existing job and writes nothing. ``deduplication={"id": key}`` adds nothing
        while another job holding ``key`` has not completed or failed, and returns that job;
        ``{"id": key, "ttl": ms}`` holds ``key`` for ``ttl`` ms from the add instead.
        ``repeat={"every": ms}`` or ``{"pattern": cron, "tz": zone}`` adds a schedule instead
        and returns its first occurrence (see docs/repeatable-jobs.md).
        """
        options = {
            "job_id": job_id, "attempts": attempts, "backoff": backoff, "delay": delay,
            "priority": priority, "remove_on_complete": remove_on_complete,
            "remove_on_fail": remove_on_fail, "timeout": timeout, "deduplication": deduplication,
            "on_exhaustion": on_exhaustion,
        }  # fmt: skip
        if repeat is not None:
            return await self._add_repeatable(name, data, options, repeat)
        return (await self._add_prepared([self._prepare(name, data, options)]))[0]

    async def add_bulk(self, jobs: Iterable[Mapping[str, Any]]) -> list[Job]:
        """Add many jobs: each a mapping with ``name``, ``data`` and any option of :meth:`add`.

        Every job is validated before the first is written, so bad input writes nothing.
        """
        prepared = []
        for index, spec in enumerate(jobs):
            if not isinstance(spec, Mapping) or "name" not in spec:
                raise ValueError(f"jobs[{index}] must be a mapping with a 'name'")
            options = {k: v for k, v in spec.items() if k not in ("name", "data")}
            try:
                prepared.append(self._prepare(spec["name"], spec.get("data"), options))
            except (TypeError, ValueError) as exc:
                raise type(exc)(f"jobs[{index}]: {exc}") from exc
        return await self._add_prepared(prepared)

    @reports_unavailable
    async def _add_prepared(self, prepared: list[_Prepared]) -> list[Job]:
        if not _tracing.active():
            return await self._add_traced(prepared)
        span = _tracing.start_add(self.name, [p.args for p in prepared])
        try:
            return await self._add_traced(prepared)
        finally:
            _tracing.end(span)

    async def _add_traced(self, prepared: list[_Prepared]) -> list[Job]:
        await self._register()
        script = _scripts.load("add_jobs")
        now = now_ms()

        calls = []
        for chunk in _chunks(prepared):
            keys = [*self.keys.group, *(self.keys.job(p.args[0]) for p in chunk)]
            args: list[Any] = [now, self.max_events]
            for p in chunk:
                args += p.args
            if any(p.dedup is not None for p in chunk):  # else no arguments: nothing to check
                for p in chunk:
                    args += NO_DEDUPLICATION if p.dedup is None else p.dedup.args()
            calls.append((keys, args))
        sending = (
            script(self._client, *calls[0]) if len(calls) == 1 else self._send_chunks(script, calls)
        )
        if len(prepared) == 1:  # a single add: nothing worth a task to overlap
            return await self._jobs_added(prepared, await sending, self._built(prepared, now))
        # The jobs are built while Redis runs the calls, which were written first: most
        # replies only confirm them.
        sent = asyncio.ensure_future(sending)
        try:
            await asyncio.sleep(0)  # let it write the calls before the loop below
            built = self._built(prepared, now)
            results = await sent
        finally:
            sent.cancel()  # a no-op once done; else (we were cancelled) the calls' task too
        return await self._jobs_added(prepared, results, built)

    async def _send_chunks(
        self, script: _scripts.Script, calls: list[tuple[list[str], list[Any]]]
    ) -> list[Any]:
        """The replies of ``calls``: one pipeline per few chunks, in order on one connection,
        one round trip each."""
        results: list[Any] = []
        for start in range(0, len(calls), BULK_IN_FLIGHT):
            for batch in await script.call_many(
                self._client, calls[start : start + BULK_IN_FLIGHT]
            ):
                results += batch
        return results

    def _built(self, prepared: list[_Prepared], now: int) -> list[Job]:
        handle = self._job_handle
        return [p.job(self.name, now).bind(handle) for p in prepared]

    async def _jobs_added(
        self, prepared: list[_Prepared], results: list[Any], built: list[Job]
    ) -> list[Job]:
        """The jobs an add returns (``built``, as written), but the existing one where the id
        was taken already, or where another job holds the deduplication id."""
        for index, (p, result) in enumerate(zip(prepared, results)):
            holder = _text(result[0]) if isinstance(result, list) else None
            if result == ErrorCode.JOB_EXISTS or holder is not None:
                existing = await self.get_job(holder or p.args[0])
                if existing is not None:
                    built[index] = existing
                elif holder is not None:
                    # A holder gone meanwhile (removed by retention, say): its id is known.
                    built[index] = dataclasses.replace(built[index], id=holder)
        return built

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
        if isinstance(grace_ms, bool) or not isinstance(grace_ms, int) or grace_ms < 0:
            raise ValueError(f"grace_ms must be an int >= 0, got {grace_ms!r}")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"limit must be an int >= 1, got {limit!r}")
        k = self.keys
        script = _scripts.load("clean_jobs")
        cutoff = now_ms() - grace_ms
        removed: list[str] = []
        # Prioritized and delayed jobs are read from the first, at most ten per job to remove.
        offset, scan = 0, limit * 10 + 1 if state in ("prioritized", "delayed") else 0
        while True:  # each call stops at its time budget; the next goes on from there
            ids, resume, read = await script(
                self._client,
                [*k.group, k.completed, k.failed],
                [state, cutoff, limit - len(removed), self.max_events, CALL_BUDGET_US, offset,
                 scan],
            )  # fmt: skip
            removed += [_text(i) for i in ids]
            offset, scan = int(resume), scan - int(read)
            if offset < 0 or len(removed) >= limit:
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


def _chunks(prepared: list[_Prepared]) -> Iterator[list[_Prepared]]:
    """``prepared`` in order, cut into the jobs of one add_jobs call each."""
    if len(prepared) == 1:
        yield prepared
        return
    chunk: list[_Prepared] = []
    size = 0
    for job in prepared:
        payload = len(job.args[2])
        if chunk and (len(chunk) == BULK_CHUNK or size + payload > BULK_BYTES):
            yield chunk
            chunk, size = [], 0
        chunk.append(job)
        size += payload
    if chunk:
        yield chunk


class _Prepared(NamedTuple):
    """One validated job: its add_jobs arguments, its payload and its options."""

    args: list[Any]
    data: Any
    opts: JobOptions
    dedup: Deduplication | None = None

    def job(self, queue_name: str, now: int) -> Job:
        return Job._build(
            id=self.args[0], name=self.args[1], original_data=self.data, opts=self.opts,
            queue_name=queue_name, timestamp=now, raw_data=self.args[2], opts_json=self.args[3],
        )  # fmt: skip


def _positive_int(value: object, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{field} must be an int, not {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{field} must be >= 1, got {value}")
    return value


def _freeze(value: Any) -> Any:
    if isinstance(value, Mapping):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    return value
