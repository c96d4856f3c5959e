"""Adding jobs: the ``add`` and ``add_bulk`` methods of :class:`~lazarus.Queue`. Every job is
checked before the first is written; a bulk goes in calls of at most ``BULK_CHUNK`` jobs and
``BULK_BYTES`` of payloads, a few of them pipelined."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple

from . import _codec, _scripts, _tracing
from ._codec import text as _text
from ._connection import now_ms, reports_unavailable
from ._dedup import NO_DEDUPLICATION, Deduplication
from ._keys import QueueKeys, has_lone_surrogate, new_id, validate_job_id
from ._scripts._coalesce import Packed
from .errors import ErrorCode
from .job import Job
from .job_options import MAX_JOB_NAME_LENGTH, Delay, JobOptions, resolve_delay
from .schema import PayloadSchema

if TYPE_CHECKING:
    from ._connection import Client
    from ._progress import JobHandle

# One add_jobs call takes at most BULK_CHUNK jobs and BULK_BYTES of payloads (a larger job
# goes alone), so that it holds Redis for a few milliseconds at most, whatever the payloads.
BULK_CHUNK = 250
BULK_BYTES = 1024 * 1024
BULK_IN_FLIGHT = 8
_ADD_KEYS = frozenset({
    "name", "data", "job_id", "attempts", "backoff", "delay", "priority",
    "remove_on_complete", "remove_on_fail", "timeout", "deduplication", "on_exhaustion", "run_at",
    "expires", "expires_at",
})  # fmt: skip
_TIMES = ("run_at", "expires_at")  # moments, resolved into waits from the add's clock
_NOT_OPTIONS = frozenset(("job_id", "deduplication", *_TIMES))  # not kept in JobOptions
_NAME_AND_DATA = frozenset(("name", "data"))
_NO_OPTIONS: Mapping[str, Any] = MappingProxyType({})


class QueueAddingMixin:
    """The adding half of :class:`~lazarus.Queue`."""

    name: str
    keys: QueueKeys
    max_payload_bytes: int
    max_events: int
    schema: PayloadSchema | None
    _client: Client
    _options_cache: dict[Any, tuple[JobOptions, str]]
    _job_handle: JobHandle  # JobLogsMixin's

    if TYPE_CHECKING:  # Queue's own, QueueReadingMixin's and RepeatMixin's

        async def _register(self) -> None: ...

        async def get_job(self, job_id: str) -> Job | None: ...

        async def _add_repeatable(
            self, name: str, data: Any, options: Mapping[str, Any], value: Any
        ) -> Job: ...

    def _prepare(
        self, name: object, data: Any, options: Mapping[str, Any], *, known: bool = False
    ) -> _Prepared:
        """Validate one job and build its script arguments; raises before any write.
        ``known``: every key of ``options`` is an option of :meth:`add` (add's own call)."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"job name must be a non-empty str, got {name!r}")
        if len(name) > MAX_JOB_NAME_LENGTH:
            limit = MAX_JOB_NAME_LENGTH
            raise ValueError(f"job name is {len(name)} characters long, over the limit of {limit}")
        if has_lone_surrogate(name):
            raise ValueError(f"job name {name!r} has a lone surrogate, which UTF-8 cannot encode")
        if options:
            job_id, dedup, opts, opts_json = self._resolved(options, known)
        else:  # name and data only, as most jobs of a bulk: every option at its default
            job_id, dedup = new_id(), None
            opts, opts_json = self._options(_NO_OPTIONS)
        if self.schema is not None:
            data = self.schema.stored(data)
        payload = _codec.encode(data, field="data", max_bytes=self.max_payload_bytes)
        args = [job_id, name, payload, opts_json, opts.delay, opts.priority, opts.attempts]
        return _Prepared(args, data, opts, dedup)

    def _resolved(
        self, options: Mapping[str, Any], known: bool
    ) -> tuple[str, Deduplication | None, JobOptions, str]:
        """A job's id, deduplication, options and their JSON, from the options of its add."""
        if not known and not _ADD_KEYS.issuperset(options):
            raise TypeError(f"unknown job options: {sorted(set(options) - _ADD_KEYS)}")
        job_id = options.get("job_id")
        job_id = new_id() if job_id is None else validate_job_id(job_id)
        dedup = Deduplication.parse(options.get("deduplication"))
        if (
            options.get("run_at") is not None
            or options.get("expires_at") is not None
            or isinstance(options.get("delay"), timedelta)
            or isinstance(options.get("expires"), timedelta)
        ):
            options = resolve_delay(options, now_ms())
        opts, opts_json = self._options({k: v for k, v in options.items() if k not in _NOT_OPTIONS})
        return job_id, dedup, opts, opts_json

    def _options(self, options: Mapping[str, Any]) -> tuple[JobOptions, str]:
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
        delay: Delay = 0,
        run_at: datetime | None = None,
        priority: int = 0,
        remove_on_complete: Any = False,
        remove_on_fail: Any = False,
        timeout: int | None = None,
        deduplication: Mapping[str, Any] | None = None,
        repeat: Mapping[str, Any] | None = None,
        on_exhaustion: str | None = None,
        expires: Delay | None = None,
        expires_at: datetime | None = None,
    ) -> Job:
        """Add one job and return it.

        ``data`` is any JSON value. ``attempts`` counts the first run; ``backoff`` is
        ``{"type": "fixed" | "exponential", "delay": ms}``; ``delay`` (ms, or a ``timedelta``)
        postpones the first run, or ``run_at`` (a timezone-aware ``datetime``; one past runs
        now) says when it is due; ``priority`` 1 is the highest (0, the default, means none:
        such jobs run first, in FIFO order); ``remove_on_complete`` / ``remove_on_fail`` take
        ``True``, a count to keep, or ``{"age": seconds, "count": n}``; ``timeout`` (ms) fails
        an attempt that runs longer with :class:`~lazarus.JobTimeoutError` (by default the
        worker's ``job_timeout``, if any); ``expires`` (ms, or a ``timedelta``, from now) or
        ``expires_at`` (a timezone-aware ``datetime``) is when the job must have started: one
        a worker claims later fails with :class:`~lazarus.JobExpiredError`, not retried,
        without running; ``on_exhaustion`` (``dead_letter``, ``fail`` or ``discard``) says
        what a terminal failure does. Adding a ``job_id`` that exists
        returns the existing job and writes nothing. ``deduplication={"id": key}`` adds
        nothing while another job holding ``key`` has not completed or failed, and returns
        that job; ``{"id": key, "ttl": ms}`` holds ``key`` for ``ttl`` ms from the add instead.
        ``repeat={"every": ms}`` or ``{"pattern": cron, "tz": zone}`` adds a schedule instead
        and returns its first occurrence (see docs/repeatable-jobs.md).
        """
        options = {
            "job_id": job_id, "attempts": attempts, "backoff": backoff, "delay": delay,
            "run_at": run_at, "priority": priority, "remove_on_complete": remove_on_complete,
            "remove_on_fail": remove_on_fail, "timeout": timeout, "deduplication": deduplication,
            "on_exhaustion": on_exhaustion, "expires": expires, "expires_at": expires_at,
        }  # fmt: skip
        if repeat is not None:
            return await self._add_repeatable(name, data, options, repeat)
        return (await self._add_prepared([self._prepare(name, data, options, known=True)]))[0]

    async def add_bulk(self, jobs: Iterable[Mapping[str, Any]]) -> list[Job]:
        """Add many jobs: each a mapping with ``name``, ``data`` and any option of :meth:`add`.

        Every job is validated before the first is written, so bad input writes nothing.
        """
        return await self._add_prepared(self._prepared_bulk(jobs))

    async def _add_bulk_unmarking(
        self, jobs: Iterable[Mapping[str, Any]], mark: str, marks: list[str]
    ) -> list[Job]:
        """:meth:`add_bulk`, where the add of ``jobs[i]`` deletes field ``mark`` of hash
        ``marks[i]`` (a key of the queue's hash slot) in the same script call, and only if the
        job is in the queue then: a mark that says an add is awaited never outlives it (an
        OJS record's ``adding``)."""
        prepared = self._prepared_bulk(jobs)
        if len(marks) != len(prepared):
            raise ValueError(f"marks must name one hash per job ({len(prepared)}), "
                             f"got {len(marks)}")  # fmt: skip
        return await self._add_prepared(prepared, (mark, marks))

    def _prepared_bulk(self, jobs: Iterable[Mapping[str, Any]]) -> list[_Prepared]:
        prepared = []
        for index, spec in enumerate(jobs):
            # type() first: isinstance against the Mapping ABC is slow, once per job
            if not (type(spec) is dict or isinstance(spec, Mapping)) or "name" not in spec:
                raise ValueError(f"jobs[{index}] must be a mapping with a 'name'")
            options = (
                _NO_OPTIONS
                if spec.keys() <= _NAME_AND_DATA
                else {k: v for k, v in spec.items() if k not in _NAME_AND_DATA}
            )
            try:
                prepared.append(self._prepare(spec["name"], spec.get("data"), options))
            except (TypeError, ValueError) as exc:
                raise type(exc)(f"jobs[{index}]: {exc}") from exc
        return prepared

    @reports_unavailable
    async def _add_prepared(
        self, prepared: list[_Prepared], marks: tuple[str, list[str]] | None = None
    ) -> list[Job]:
        if not _tracing.active():
            return await self._add_traced(prepared, marks)
        span = _tracing.start_add(self.name, [p.args for p in prepared])
        try:
            return await self._add_traced(prepared, marks)
        finally:
            _tracing.end(span)

    async def _add_traced(
        self, prepared: list[_Prepared], marks: tuple[str, list[str]] | None = None
    ) -> list[Job]:
        await self._register()
        script = _scripts.load("add_jobs")
        now = now_ms()

        chunks = list(_chunks(prepared))
        calls = []
        first = 0  # the index of the chunk's first job in `prepared`
        for chunk in chunks:
            keys = [*self.keys.group, *(self.keys.job(p.args[0]) for p in chunk)]
            args: list[Any] = [now, self.max_events, 0, ""]  # resent: see _scripts.Script
            if marks is not None:
                args[3] = marks[0]
                keys += marks[1][first : first + len(chunk)]
            first += len(chunk)
            for p in chunk:
                args += p.args
            if any(p.dedup is not None for p in chunk):  # else no arguments: nothing to check
                for p in chunk:
                    args += NO_DEDUPLICATION if p.dedup is None else p.dedup.args()
            calls.append((keys, args))
        if len(prepared) == 1:  # a single add: nothing worth a task to overlap
            results = await script(self._client, *calls[0])
            return await self._jobs_added(prepared, results, self._built(prepared, now))
        return await self._jobs_added(
            prepared, *await self._send_chunks(script, calls, chunks, now)
        )

    async def _send_chunks(
        self,
        script: _scripts.Script,
        calls: list[tuple[list[str], list[Any]]],
        chunks: list[list[_Prepared]],
        now: int,
    ) -> tuple[list[Any], list[Job]]:
        """The replies of ``calls`` (one per job) and the jobs they add, as written: one
        pipeline per few calls, in order on one connection, one round trip each. While Redis
        runs a pipeline, the client builds its jobs and readies the next one's commands, so
        that it goes out as soon as the replies are in."""
        shared = Job._added_fields(self.name, now, self._job_handle)
        results: list[Any] = []
        built: list[Job] = []
        group = calls[:BULK_IN_FLIGHT]
        functions = _scripts.functions_on(self._client)
        commands = _packed(script, group, functions)
        for start in range(0, len(calls), BULK_IN_FLIGHT):
            sent = asyncio.ensure_future(self._pipeline(script, group, commands))
            try:
                await asyncio.sleep(0)  # let it write the pipeline before the work below
                for chunk in chunks[start : start + BULK_IN_FLIGHT]:
                    built += [p.job(shared) for p in chunk]
                group = calls[start + BULK_IN_FLIGHT : start + 2 * BULK_IN_FLIGHT]
                commands = _packed(script, group, functions)
                for batch in await sent:
                    results += batch
            finally:
                sent.cancel()
        return results, built

    async def _pipeline(
        self,
        script: _scripts.Script,
        group: list[tuple[list[str], list[Any]]],
        commands: list[Packed],
    ) -> list[Any]:
        """The replies of ``group``'s calls; a lone call goes with the batches that the
        client's other calls share (``_scripts.coalesced``), as an add of one job does."""
        if len(group) == 1:
            return [await script(self._client, *group[0])]
        return await script.call_many(self._client, group, commands)

    def _built(self, prepared: list[_Prepared], now: int) -> list[Job]:
        shared = Job._added_fields(self.name, now, self._job_handle)
        return [p.job(shared) for p in prepared]

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


def _packed(
    script: _scripts.Script, group: list[tuple[list[str], list[Any]]], functions: bool
) -> list[Packed]:
    """The commands of a pipeline of several calls, packed ahead (as functions, or not:
    ``_scripts.functions_on``); none for a lone call, which its batch packs."""
    if len(group) < 2:
        return []
    return [script.command(keys, args, functions) for keys, args in group]


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

    def job(self, shared: dict[str, Any]) -> Job:
        """The job as its add writes it; ``shared`` from :meth:`Job._added_fields`."""
        args = self.args
        return Job._added(shared, args[0], args[1], args[2], args[3], self.data, self.opts)


def _freeze(value: Any) -> Any:
    if isinstance(value, Mapping):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    return value
