"""Dead letters: inspection, search, replay and purge on any queue used as a dead letter queue.

A dead letter queue is an ordinary :class:`~lazarus.Queue`; dead letters wait in its waiting
list, newest first. Every operation here is a method of ``Queue``::

    dlq = Queue("payments-dlq")
    print(await dlq.get_dead_letter_count())
    for job in await dlq.get_dead_letter_jobs(0, 9):
        print(job.id, job.dead_letter.reason, job.dead_letter.failed_reason)
    await dlq.replay_all_dead_letters(DeadLetterFilter(error_type="TimeoutError"))
"""

from __future__ import annotations

import dataclasses
import datetime
import string
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from . import _codec, _scripts
from ._connection import now_ms, reports_unavailable
from ._keys import QueueKeys, validate_job_id, validate_name
from .errors import (
    ErrorCode,
    JobNotFoundError,
    NotADeadLetterError,
    error_for_code,
)
from .job import MAX_PRIORITY, DeadLetterReason, Job, JobOptions

if TYPE_CHECKING:
    from redis.asyncio import Redis

DEFAULT_BATCH = 500
Progress = Callable[[int], Any]
TimeBound = int | datetime.datetime | None
# scan_dead_letters folds the stored reason with Lua's string.lower, which knows ASCII only;
# the filter must be folded the same way, or a non-ASCII reason would not even match itself.
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


@dataclasses.dataclass(frozen=True)
class DeadLetterQueueOptions:
    """Where a worker sends jobs that fail for good."""

    queue_name: str

    def __post_init__(self) -> None:
        if not isinstance(self.queue_name, str) or not self.queue_name:
            raise ValueError("dead_letter_queue.queue_name must be a non-empty str")
        validate_name(self.queue_name, "dead_letter_queue.queue_name")


def _ms(value: TimeBound, field: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            raise ValueError(f"{field} must be timezone-aware")
        return int(value.timestamp() * 1000)
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{field} must be an int (ms) or a datetime, not {type(value).__name__}")
    return value


@dataclasses.dataclass(frozen=True)
class DeadLetterFilter:
    """Which dead letters an operation applies to; all given fields must match (AND).

    ``name`` is exact and ``name_prefix`` a prefix of the job name; ``failed_reason`` is a
    case-insensitive literal substring of the last failure's message; ``source_queue``,
    ``error_type`` (the exception class name) and ``reason`` are exact; ``since`` / ``until``
    bound when the job was dead-lettered (ms since the epoch, or an aware datetime);
    ``payload_contains`` is a literal substring of the payload's JSON text.
    """

    name: str | None = None
    failed_reason: str | None = None
    source_queue: str | None = None
    error_type: str | None = None
    since: TimeBound = None
    until: TimeBound = None
    reason: DeadLetterReason | None = None
    name_prefix: str | None = None
    payload_contains: str | None = None

    def __post_init__(self) -> None:
        for field in ("name", "failed_reason", "source_queue", "error_type", "reason",
                      "name_prefix", "payload_contains"):  # fmt: skip
            value = getattr(self, field)
            if value is not None and not isinstance(value, str):
                raise TypeError(f"filter.{field} must be a str, not {type(value).__name__}")
        since, until = _ms(self.since, "filter.since"), _ms(self.until, "filter.until")
        if since is not None and until is not None and since > until:
            raise ValueError("filter.since must not be after filter.until")

    def script_args(self) -> list[str]:
        """ARGV[3..11] of scan_dead_letters."""
        since, until = _ms(self.since, "filter.since"), _ms(self.until, "filter.until")
        return [
            self.name or "",
            (self.failed_reason or "").translate(_ASCII_LOWER),
            self.source_queue or "",
            self.error_type or "",
            "" if since is None else str(since),
            "" if until is None else str(until),
            self.reason or "",
            self.payload_contains or "",
            self.name_prefix or "",
        ]


@dataclasses.dataclass(frozen=True)
class DeadLetterStats:
    """What :meth:`~lazarus.Queue.get_dead_letter_stats` found; times are ms since the epoch."""

    total: int
    by_name: dict[str, int]
    by_error_type: dict[str, int]
    by_source_queue: dict[str, int]
    by_reason: dict[str, int]
    oldest: int | None
    newest: int | None


@dataclasses.dataclass(frozen=True)
class DeadLetterCounters:
    """Running totals of a dead letter queue: dead letters received by (source queue,
    reason), and how many were replayed and purged."""

    dead_lettered: dict[tuple[str, str], int]
    replayed: int
    purged: int


class _StatsBuilder:
    def __init__(self) -> None:
        self.total = 0
        self.groups: tuple[Counter[str], ...] = (Counter(), Counter(), Counter(), Counter())
        self.oldest: int | None = None
        self.newest: int | None = None

    def add(self, source: str, name: str, error_type: str, reason: str, at: str) -> None:
        self.total += 1
        for counter, key in zip(self.groups, (name, error_type, source, reason)):
            counter[key] += 1
        when = int(at)
        self.oldest = when if self.oldest is None else min(self.oldest, when)
        self.newest = when if self.newest is None else max(self.newest, when)

    def build(self) -> DeadLetterStats:
        by_name, by_error, by_source, by_reason = (dict(c.most_common()) for c in self.groups)
        return DeadLetterStats(self.total, by_name, by_error, by_source, by_reason,
                               self.oldest, self.newest)  # fmt: skip


def _check_batch(batch_size: int) -> int:
    if (
        isinstance(batch_size, bool)
        or not isinstance(batch_size, int)
        or not 1 <= batch_size <= 5000
    ):
        raise ValueError(f"batch_size must be an int from 1 to 5000, got {batch_size!r}")
    return batch_size


def _check_filter(value: DeadLetterFilter | None) -> DeadLetterFilter:
    if value is None:
        return DeadLetterFilter()
    if not isinstance(value, DeadLetterFilter):
        raise TypeError(f"filter must be a DeadLetterFilter, not {type(value).__name__}")
    return value


class DeadLetterMixin:
    """The dead-letter half of :class:`~lazarus.Queue`."""

    name: str
    prefix: str
    keys: QueueKeys
    max_events: int
    _client: Redis

    async def get_job(self, job_id: str) -> Job | None:
        raise NotImplementedError

    async def _get_jobs(self, ids: list[str]) -> list[Job]:
        raise NotImplementedError

    # -- inspection ------------------------------------------------------------------------

    @reports_unavailable
    async def get_dead_letter_count(self) -> int:
        """How many dead letters wait in this queue."""
        return int(await self._client.llen(self.keys.wait))

    @reports_unavailable
    async def get_dead_letter_jobs(self, start: int = 0, end: int = -1) -> list[Job]:
        """Dead letters from index ``start`` to ``end`` (inclusive), newest first."""
        ids = await self._client.lrange(self.keys.wait, start, end)
        return await self._get_jobs([str(i) for i in ids])

    @reports_unavailable
    async def peek_dead_letter(self, job_id: str) -> Job | None:
        """One dead letter with its ``_dlqMeta``, or ``None``."""
        return await self.get_job(job_id)

    async def _scan(
        self, skip: int, window: int, flt: DeadLetterFilter
    ) -> tuple[int, list[tuple[str, str]]]:
        script = _scripts.load("scan_dead_letters")
        read, matches = await script(
            self._client,
            [self.keys.wait, self.keys.job_prefix],
            [skip, window, *flt.script_args(), ""],
        )
        return int(read), [(str(m[0]), str(m[1])) for m in matches]

    async def iter_dead_letter_ids(
        self, filter: DeadLetterFilter | None = None, *, batch_size: int = DEFAULT_BATCH
    ) -> AsyncIterator[tuple[str, str]]:
        """``(dead letter id, source queue)`` of every match, oldest first, batch by batch."""
        flt, window, skip = _check_filter(filter), _check_batch(batch_size), 0
        while True:
            read, matches = await self._scan(skip, window, flt)
            for match in matches:
                yield match
            skip += read
            if read < window:
                return

    @reports_unavailable
    async def find_dead_letters(
        self, filter: DeadLetterFilter | None = None, *, limit: int = 50, offset: int = 0
    ) -> list[Job]:
        """Matching dead letters, newest first: at most ``limit`` after skipping ``offset``."""
        ids: list[str] = [i async for i, _ in self.iter_dead_letter_ids(filter)]
        ids.reverse()
        return await self._get_jobs(ids[offset : offset + limit])

    @reports_unavailable
    async def count_dead_letters(self, filter: DeadLetterFilter | None = None) -> int:
        """How many dead letters match ``filter`` (what a bulk operation would touch)."""
        return sum([1 async for _ in self.iter_dead_letter_ids(filter)])

    @reports_unavailable
    async def get_dead_letter_stats(
        self, filter: DeadLetterFilter | None = None, *, batch_size: int = DEFAULT_BATCH
    ) -> DeadLetterStats:
        """Totals of the dead letters matching ``filter``: by job name, error type, source
        queue and reason, with the oldest and newest dead-lettering times. Reads the queue
        batch by batch."""
        flt, window, skip = _check_filter(filter), _check_batch(batch_size), 0
        script = _scripts.load("scan_dead_letters")
        stats = _StatsBuilder()
        while True:
            read, matches = await script(
                self._client,
                [self.keys.wait, self.keys.job_prefix],
                [skip, window, *flt.script_args(), "1"],
            )
            for match in matches:
                stats.add(*(str(v) for v in match[1:]))
            skip += int(read)
            if int(read) < window:
                return stats.build()

    @reports_unavailable
    async def get_oldest_dead_letter_at(self) -> int | None:
        """When the oldest dead letter still here was dead-lettered (ms), or ``None``."""
        oldest = await self._client.lindex(self.keys.wait, -1)
        if oldest is None:
            return None
        at = await self._client.hget(self.keys.job(str(oldest)), "dlq:deadLetteredAt")
        return None if at is None else int(at)

    @reports_unavailable
    async def get_dead_letter_rate(
        self, minutes: int = 60, *, now: int | None = None
    ) -> list[tuple[int, int]]:
        """Dead letters that arrived per minute over the last ``minutes`` (at most 120):
        ``(minute start in ms, count)`` pairs, oldest first, zeros included."""
        if isinstance(minutes, bool) or not isinstance(minutes, int) or not 1 <= minutes <= 120:
            raise ValueError(f"minutes must be an int from 1 to 120, got {minutes!r}")
        current = (now_ms() if now is None else now) // 60_000
        fields = [f"rate:{m}" for m in range(current - minutes + 1, current + 1)]
        counts = await self._client.hmget(self.keys.meta, fields)
        return [((current - minutes + 1 + i) * 60_000, int(c or 0)) for i, c in enumerate(counts)]

    @reports_unavailable
    async def get_dead_letter_counters(self) -> DeadLetterCounters:
        """Running totals kept by this dead letter queue since it was created."""
        dead: dict[tuple[str, str], int] = {}
        replayed = purged = 0
        async for field, value in self._client.hscan_iter(self.keys.meta, match="count:*"):
            name, count = str(field), int(value)
            if name == "count:replayed":
                replayed = count
            elif name == "count:purged":
                purged = count
            elif name.startswith("count:deadLettered:"):
                reason, _, source = name.removeprefix("count:deadLettered:").partition(":")
                dead[(source, reason)] = count
        return DeadLetterCounters(dead_lettered=dead, replayed=replayed, purged=purged)

    # -- replay ----------------------------------------------------------------------------

    @reports_unavailable
    async def replay_dead_letter(
        self,
        job_id: str,
        *,
        attempts: int | None = None,
        priority: int | None = None,
        queue: str | None = None,
    ) -> str:
        """Replay one dead letter into its source queue (or ``queue``); returns the new job's id.

        The new job has the original payload and options (``attempts`` and ``priority`` may
        be changed), no attempts made, and ``replay_count`` one higher. Raises
        :class:`JobNotFoundError` when the dead letter is gone (another client replayed or
        purged it first) and :class:`NotADeadLetterError` for a job without dead-letter
        metadata, which is left as it is.
        """
        validate_job_id(job_id)
        source = await self._client.hget(self.keys.job(job_id), "dlq:sourceQueue")
        if source is None:
            if await self._client.exists(self.keys.job(job_id)):
                raise NotADeadLetterError(f"job {job_id!r} in {self.name!r} is not a dead letter")
            raise JobNotFoundError(f"no dead letter {job_id!r} in {self.name!r}")
        target = validate_name(queue, "queue") if queue is not None else str(source)
        override = ["", "", ""]
        if attempts is not None or priority is not None:
            override = await self._overridden_options(job_id, attempts, priority)
        new_id, result = (await self._replay(target, [(job_id, override)]))[0]
        if isinstance(result, int):
            raise error_for_code(result, f"replay dead letter {job_id!r}")
        return new_id

    async def _overridden_options(
        self, job_id: str, attempts: int | None, priority: int | None
    ) -> list[str]:
        raw = await self._client.hget(self.keys.job(job_id), "dlq:originalOpts")
        opts = JobOptions.from_dict(_codec.decode(raw) or {})
        changed = dataclasses.replace(
            opts,
            attempts=opts.attempts if attempts is None else attempts,
            priority=opts.priority if priority is None else priority,
        )
        if changed.priority > MAX_PRIORITY:
            raise ValueError(f"priority must be at most {MAX_PRIORITY}")
        return [_codec.encode(changed.to_dict(), field="opts"), str(changed.priority),
                str(changed.attempts)]  # fmt: skip

    async def _replay(
        self, target: str, items: list[tuple[str, list[str]]], *, oldest_first: bool = False
    ) -> list[tuple[str, str | int]]:
        """Replay ``(dead letter id, [opts, priority, attempts])`` items into ``target``.

        ``oldest_first`` tells Redis to look for the ids from the oldest end of the list, where
        bulk batches come from: searching from the other end would make bulk work quadratic.
        """
        source_keys = QueueKeys(self.prefix, target)
        new_ids = [uuid.uuid4().hex for _ in items]
        keys = [self.keys.wait, self.keys.events, self.keys.meta, *source_keys.group]
        args: list[Any] = [now_ms(), self.max_events, target, -1 if oldest_first else 1]
        for (dl_id, override), new_id in zip(items, new_ids):
            keys += [self.keys.job(dl_id), source_keys.job(new_id)]
            args += [dl_id, new_id, *override]
        results = await _scripts.load("replay_dead_letters")(self._client, keys, args)
        await self._client.sadd(source_keys.registry, target)
        return [
            (new_id, r if isinstance(r, int) else str(r)) for new_id, r in zip(new_ids, results)
        ]

    @reports_unavailable
    async def replay_all_dead_letters(
        self,
        filter: DeadLetterFilter | None = None,
        *,
        batch_size: int = DEFAULT_BATCH,
        on_progress: Progress | None = None,
    ) -> int:
        """Replay every dead letter that matches ``filter`` into its source queue.

        Works batch by batch (``batch_size`` dead letters per script call), so Redis is never
        held for long and the DLQ is never loaded whole. ``on_progress(done)`` is called after
        each batch. Returns how many were replayed.
        """
        return await self._bulk(filter, batch_size, on_progress, self._replay_batch)

    async def _replay_batch(self, matches: list[tuple[str, str]]) -> tuple[int, int]:
        by_source: dict[str, list[tuple[str, list[str]]]] = {}
        for dl_id, source in matches:
            by_source.setdefault(source, []).append((dl_id, ["", "", ""]))
        results: list[str | int] = []
        for source, items in by_source.items():
            results += [r for _, r in await self._replay(source, items, oldest_first=True)]
        return _batch_outcome(results, lambda r: isinstance(r, str))

    # -- purge -----------------------------------------------------------------------------

    @reports_unavailable
    async def purge_dead_letter(self, job_id: str) -> None:
        """Delete one dead letter; raises :class:`JobNotFoundError` if it is gone."""
        validate_job_id(job_id)
        result = (await self._purge([job_id], oldest_first=False))[0]
        if result != 1:
            raise error_for_code(int(result), f"purge dead letter {job_id!r}")

    async def _purge(self, ids: list[str], *, oldest_first: bool) -> list[int]:
        keys = [self.keys.wait, self.keys.events, self.keys.meta, *(self.keys.job(i) for i in ids)]
        args = [self.max_events, -1 if oldest_first else 1, *ids]
        script = _scripts.load("purge_dead_letters")
        return [int(r) for r in await script(self._client, keys, args)]

    @reports_unavailable
    async def purge_dead_letters(
        self,
        filter: DeadLetterFilter | None = None,
        *,
        batch_size: int = DEFAULT_BATCH,
        on_progress: Progress | None = None,
    ) -> int:
        """Delete every dead letter that matches ``filter``, batch by batch; returns the count."""
        return await self._bulk(filter, batch_size, on_progress, self._purge_batch)

    async def _purge_batch(self, matches: list[tuple[str, str]]) -> tuple[int, int]:
        results = await self._purge([dl_id for dl_id, _ in matches], oldest_first=True)
        return _batch_outcome(list(results), lambda r: r == 1)

    async def _bulk(
        self,
        filter: DeadLetterFilter | None,
        batch_size: int,
        on_progress: Progress | None,
        act: Callable[[list[tuple[str, str]]], Awaitable[tuple[int, int]]],
    ) -> int:
        flt, window = _check_filter(filter), _check_batch(batch_size)
        skip = total = 0
        while True:
            read, matches = await self._scan(skip, window, flt)
            done, gone = await act(matches) if matches else (0, 0)
            total += done
            # Matches acted on here, or taken by another client since the scan, left the
            # list; only the others stay behind the oldest end and are skipped next time.
            skip += read - gone
            if matches and on_progress is not None:
                result = on_progress(total)
                if hasattr(result, "__await__"):
                    await result
            if read < window:
                return total


def _batch_outcome(
    results: list[str | int], succeeded: Callable[[str | int], bool]
) -> tuple[int, int]:
    """``(done, gone)`` of one batch: how many this call handled, and how many matches left
    the list (handled here or by another client first); a match that turned out not to be a
    dead letter (``NOT_A_DEAD_LETTER``) stays in the list."""
    done = sum(1 for r in results if succeeded(r))
    gone = sum(1 for r in results if r != ErrorCode.NOT_A_DEAD_LETTER)
    return done, gone


__all__ = [
    "DeadLetterCounters",
    "DeadLetterFilter",
    "DeadLetterMixin",
    "DeadLetterQueueOptions",
    "DeadLetterStats",
    "ErrorCode",
]
