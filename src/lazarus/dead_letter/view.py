"""One view over every dead letter queue of a prefix: the server's dead letter store.

Dead letter queues register themselves in ``<prefix>:dlqs`` (workers at start-up, migrations);
each keeps its own store in its own slot, so the view asks each queue and merges: counts and
statistics add up, lookups by id ask every queue, and a search walks every queue at once in
one arrival order, (time, queue, id), with a cursor that says where all of them stand.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import TYPE_CHECKING, Any

from .._connection import connect, reports_unavailable
from .._keys import QueueKeys, validate_job_id, validate_name
from ..job import Job
from . import search
from .filters import DeadLetterFilter, check_filter
from .search import DeadLetterPage, Order, Position
from .stats import DeadLetterStats

if TYPE_CHECKING:
    from .._connection import Client
    from ..queue import Queue

_TOP = "\U0010ffff" * 201  # sorts after every job id


class DeadLetterView:
    """Every dead letter of every dead letter queue under ``prefix``.

    Example::

        view = DeadLetterView("redis://localhost:6379/0")
        job = await view.find_by_original_id(job_id)     # where did job X go?
        page = await view.search(DeadLetterFilter(error_type="TimeoutError"))
    """

    def __init__(self, connection: str | Client | None = None, *, prefix: str = "lazarus") -> None:
        self.prefix = validate_name(prefix, "prefix")
        self._owns_client = connection is None or isinstance(connection, str)
        self._client = connect(connection)
        self._queues: dict[str, Queue] = {}

    def _queue(self, name: str) -> Queue:
        from ..queue import Queue

        if name not in self._queues:
            self._queues[name] = Queue(name, connection=self._client, prefix=self.prefix)
        return self._queues[name]

    @reports_unavailable
    async def dead_letter_queues(self) -> list[str]:
        """The names of the dead letter queues under the prefix, sorted."""
        names = await self._client.smembers(QueueKeys(self.prefix, "_").dead_letter_registry)
        return sorted(_text(n) for n in names)

    async def _each(self, call: Any) -> list[tuple[str, Any]]:
        names = await self.dead_letter_queues()
        results = await asyncio.gather(*(call(self._queue(n)) for n in names))
        return list(zip(names, results))

    async def count(self, filter: DeadLetterFilter | None = None) -> int:
        """How many dead letters match ``filter`` in every dead letter queue."""
        flt = check_filter(filter)
        return sum(c for _, c in await self._each(lambda q: q.count_dead_letters(flt)))

    async def stats(self, filter: DeadLetterFilter | None = None) -> DeadLetterStats:
        """Statistics of the matches in every dead letter queue, added up."""
        flt = check_filter(filter)
        parts = [s for _, s in await self._each(lambda q: q.get_dead_letter_stats(flt))]
        groups: list[Counter[str]] = [Counter() for _ in range(5)]
        for part in parts:
            fields = (part.by_name, part.by_error_type, part.by_source_queue, part.by_reason,
                      part.by_status)  # fmt: skip
            for counter, values in zip(groups, fields):
                counter.update(values)
        olds = [p.oldest for p in parts if p.oldest is not None]
        news = [p.newest for p in parts if p.newest is not None]
        by = [dict(c.most_common()) for c in groups]
        return DeadLetterStats(sum(p.total for p in parts), by[0], by[1], by[2], by[3],
                               min(olds, default=None), max(news, default=None), by[4])  # fmt: skip

    async def find_by_original_id(self, job_id: str) -> Job | None:
        """The dead letter of the job whose own id was ``job_id``, whichever queue holds it."""
        validate_job_id(job_id)
        for _, job in await self._each(lambda q: q.find_dead_letter_by_original_id(job_id)):
            if isinstance(job, Job):
                return job
        return None

    async def get(self, dead_letter_id: str) -> Job | None:
        """The dead letter with this id, whichever queue holds it."""
        validate_job_id(dead_letter_id, "dead_letter_id")
        for _, job in await self._each(lambda q: q.get_job(dead_letter_id)):
            if isinstance(job, Job) and job.dead_letter is not None:
                return job
        return None

    @reports_unavailable
    async def search(
        self,
        filter: DeadLetterFilter | None = None,
        *,
        limit: int = 50,
        cursor: str | None = None,
        order: Order = "newest",
        time_budget: float = search.TIME_BUDGET,
    ) -> DeadLetterPage:
        """A page of the matches across every dead letter queue, in arrival order, with a
        cursor for the next page (see :meth:`~lazarus.Queue.search_dead_letters`)."""
        flt, order = check_filter(filter), search.check_order(order)
        limit, budget = search.check_limit(limit), search.check_time_budget(time_budget)
        at = None if cursor is None else search.decode_cursor(cursor, order)
        names = await self.dead_letter_queues()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + budget
        taken: list[tuple[int, str, str]] = []
        while True:
            rows, frontier = await self._round(names, flt, order, at, limit - len(taken))
            taken += rows
            if rows:
                last = rows[-1]
                at = (Position(last[0], last[2]), last[1])
            if frontier is None or len(taken) >= limit or loop.time() >= deadline:
                break
            at = frontier
        jobs = []
        for _, name, dl_id in taken:
            job = await self._queue(name).get_job(dl_id)
            if job is not None:
                jobs.append(job)
        more = frontier is not None or len(taken) >= limit
        next_cursor = search.encode_cursor(order, at[0], at[1]) if more and at else None
        total = None
        counts = await asyncio.gather(*(_exact(self._queue(n), flt) for n in names))
        if all(c is not None for c in counts):
            total = sum(c for c in counts if c is not None)
        return DeadLetterPage(jobs, next_cursor, total)

    async def _round(
        self,
        names: list[str],
        flt: DeadLetterFilter,
        order: Order,
        at: tuple[Position, str] | None,
        limit: int,
    ) -> tuple[list[tuple[int, str, str]], tuple[Position, str] | None]:
        """One bounded step in every queue from ``at``: the matches that are safe to return
        in merged order (at most ``limit``), and the least advanced queue's position (the
        frontier) while any queue has more to walk."""
        desc = order == "newest"

        def key(score: int, name: str, dl_id: str) -> tuple[int, str, str]:
            return (-score, _neg(name), _neg(dl_id)) if desc else (score, name, dl_id)  # type: ignore[return-value]

        steps = await asyncio.gather(*(
            search.step(self._client, self._queue(n).keys, flt, order=order,
                        position=_local(at, n, desc), limit=limit, detail=True)
            for n in names
        ))  # fmt: skip
        rows: list[tuple[int, str, str]] = []
        frontier: tuple[Position, str] | None = None
        for name, result in zip(names, steps):
            rows += [(int(m[7]), name, m[0]) for m in result.matches]
            if not result.done and result.position is not None:
                here = (result.position, name)
                if frontier is None or key(here[0].score, name, here[0].id) < key(
                    frontier[0].score, frontier[1], frontier[0].id
                ):
                    frontier = here
        rows.sort(key=lambda r: key(*r))
        if frontier is not None:
            bound = key(frontier[0].score, frontier[1], frontier[0].id)
            rows = [r for r in rows if key(*r) <= bound]
        return rows[:limit], frontier

    async def close(self) -> None:
        """Close the connection pool, unless the caller passed its own client."""
        if self._owns_client:
            await self._client.aclose()

    async def __aenter__(self) -> DeadLetterView:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _local(at: tuple[Position, str] | None, name: str, desc: bool) -> Position | None:
    """Where queue ``name`` stands when the merged walk stands at ``at``: ties at the same
    time are ordered by queue name, then id."""
    if at is None:
        return None
    position, other = at
    if name == other:
        return position
    # Entries of a queue that sorts before `other` (in walk order) at this time were seen.
    seen_all = (name > other) if desc else (name < other)
    return (
        Position(position.score, "" if seen_all else _TOP)
        if desc
        else Position(position.score, _TOP if seen_all else "")
    )


def _neg(text: str) -> tuple[int, ...]:
    """A key that sorts byte strings in reverse (a longer string first at a common prefix)."""
    return (*(-b for b in text.encode()), 1)


async def _exact(queue: Queue, flt: DeadLetterFilter) -> int | None:
    from . import store

    return await store.exact_count(queue.client, queue.keys, flt)


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
