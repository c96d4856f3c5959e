"""Which jobs an admin request reads or acts on (ojs-admin-api 7.1, 8): the lists lazarus keeps
a queue's jobs in, chosen by the OJS state of their jobs and walked by rank (``LRANGE``,
``ZRANGE``), so a page costs a count of each list and the reads of its own jobs, whatever the
queues hold.

=============  ==================================================================
OJS state      lazarus's list, in the order a listing walks them
=============  ==================================================================
available      ``waiting`` (a list), then ``prioritized`` (next to run first)
active         ``active``
scheduled      ``delayed`` (soonest due first), the jobs that never ran
retryable      ``delayed``, the jobs that ran before
pending        ``delayed``, the jobs pushed with ``options.pending``, not activated
completed      ``completed``, most recently finished first
discarded      ``failed``, most recently failed first (dead letters: their own routes)
cancelled      none: a cancelled job leaves its queue (its OJS record is found by id)
=============  ==================================================================

Telling ``scheduled``, ``retryable`` and ``pending`` apart reads a field of each delayed job
and of its OJS record: a request reads at most
:data:`~lazarus.ojs.queue_routes.SPLIT_LIMIT` of them, soonest due first, and a selection
that needed more is not :attr:`Selection.exact`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .._codec import text
from .._connection import Client
from ..job import Job, JobState, fields_from_reply
from .admin import pagination
from .backend import Backend, Loaded
from .queue_routes import DELAYED_STATES, SPLIT_LIMIT, split_delayed

STATES = ("scheduled", "available", "pending", "active", "retryable", "completed",
          "cancelled", "discarded")  # fmt: skip
_DELAYED = frozenset(DELAYED_STATES)


@dataclasses.dataclass(frozen=True)
class Source:
    """One list of one queue: its jobs' engine state, and how to read it by rank; ``ids``
    stand for the list when only some of its jobs were chosen (delayed jobs by OJS state)."""

    queue: str
    engine_state: JobState
    key: str
    size: int
    ranked: bool = False  # a sorted set, not a list
    newest_first: bool = False
    ids: tuple[str, ...] | None = None

    async def read(self, client: Client, start: int, count: int) -> list[str]:
        """The ids of up to ``count`` jobs from rank ``start``."""
        if self.ids is not None:
            return list(self.ids[start : start + count])
        end = start + count - 1
        if self.ranked:
            found = await client.zrange(self.key, start, end, desc=self.newest_first)
        else:
            found = await client.lrange(self.key, start, end)
        return [job_id for job_id in map(text, found) if job_id]  # '' is a removed job's hole


@dataclasses.dataclass(frozen=True)
class Selection:
    """The lists that hold the jobs asked for, in walking order."""

    sources: list[Source]
    exact: bool  # False: more delayed jobs than a request reads, some not looked at

    @property
    def total(self) -> int:
        return sum(source.size for source in self.sources)

    async def pick(self, backend: Backend, offset: int, count: int) -> list[tuple[Source, str]]:
        """The jobs from ``offset`` to ``offset + count`` of the selection, by list."""
        picked: list[tuple[Source, str]] = []
        for source in self.sources:
            if len(picked) >= count:
                break
            if offset >= source.size:
                offset -= source.size
                continue
            ids = await source.read(backend.client, offset, count - len(picked))
            picked += [(source, job_id) for job_id in ids]
            offset = 0
        return picked


async def select(backend: Backend, queues: list[str], states: frozenset[str]) -> Selection:
    """The lists of ``queues`` that hold jobs in ``states``, with their sizes."""
    sources: list[Source] = []
    exact, budget = True, SPLIT_LIMIT
    for name in queues:
        keys = backend.keys(name)
        lists: list[tuple[str, JobState, str, bool, bool]] = [
            ("available", "waiting", keys.wait, False, False),
            ("available", "prioritized", keys.prioritized, True, False),
            ("active", "active", keys.active, False, False),
            ("delayed", "delayed", keys.delayed, True, False),
            ("completed", "completed", keys.completed, True, True),
            ("discarded", "failed", keys.failed, True, True),
        ]
        for group, engine_state, key, ranked, newest_first in lists:
            wanted = states & (_DELAYED if group == "delayed" else {group})
            if not wanted:
                continue
            if group == "delayed" and wanted != _DELAYED:  # some of them: split them
                delayed = await backend.client.zcard(key)
                split = await split_delayed(backend, backend.queue(name), budget)
                read = sum(len(found) for found in split.values())
                budget -= read
                exact = exact and read >= delayed
                ids = tuple(i for state in DELAYED_STATES if state in wanted for i in split[state])
                sources.append(Source(name, engine_state, key, len(ids), ids=ids))
            else:
                sources.append(Source(name, engine_state, key, 0, ranked, newest_first))
    return Selection(await _sized(backend, sources), exact)


async def _sized(backend: Backend, sources: list[Source]) -> list[Source]:
    """``sources`` with the sizes of their lists, read in one round trip."""
    unsized = [i for i, source in enumerate(sources) if source.ids is None]
    async with backend.client.pipeline(transaction=False) as pipe:
        for i in unsized:
            (pipe.zcard if sources[i].ranked else pipe.llen)(sources[i].key)
        sizes = await pipe.execute()
    sized = list(sources)
    for i, size in zip(unsized, sizes, strict=True):
        sized[i] = dataclasses.replace(sources[i], size=int(size))
    return sized


async def load_all(backend: Backend, picked: list[tuple[Source, str]]) -> list[Loaded]:
    """The picked jobs with their OJS records, in two round trips; a job gone meanwhile is
    left out. Each has the engine state of the list it was read from."""
    async with backend.client.pipeline(transaction=False) as pipe:
        for source, job_id in picked:
            pipe.hgetall(backend.keys(source.queue).job(job_id))
            pipe.hgetall(backend.records.key(source.queue, job_id))
        replies = await pipe.execute()
    loaded = []
    for (source, job_id), fields, record in zip(picked, replies[::2], replies[1::2], strict=True):
        if fields:
            job = Job.from_fields(job_id, fields_from_reply(fields), source.queue)
            loaded.append(Loaded(source.queue, job_id, job, source.engine_state,
                                 fields_from_reply(record)))  # fmt: skip
    return loaded


async def job_page(
    backend: Backend, queues: list[str], state: str | None, page: int, per_page: int
) -> dict[str, Any]:
    """A page of the jobs of ``queues`` (in ``state``), each as OJS shows it."""
    states = frozenset(STATES if state is None else (state,))
    selection = await select(backend, queues, states)
    offset = (page - 1) * per_page
    picked = await selection.pick(backend, offset, per_page)
    items = [one.view() for one in await load_all(backend, picked)]
    paging: dict[str, Any] = pagination(selection.total, page, per_page)
    if not selection.exact:
        paging["exact"] = False  # more delayed jobs than a request reads: total is a floor
    return {"items": items, "pagination": paging}
