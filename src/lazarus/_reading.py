"""Reading jobs back: one job, its state, the jobs of a state by range, and the counts, as
methods of :class:`~lazarus.Queue`."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from . import _scripts
from ._codec import text as _text
from ._connection import reports_unavailable
from ._indexes import check_range
from ._keys import QueueKeys, validate_job_id
from .dead_letter.filters import LIVE_STATUSES
from .job import Job, JobState, fields_from_reply

if TYPE_CHECKING:
    from ._connection import Client
    from ._progress import JobHandle


class QueueReadingMixin:
    """The reading half of :class:`~lazarus.Queue`."""

    name: str
    keys: QueueKeys
    _client: Client
    _job_handle: JobHandle  # JobLogsMixin's

    @reports_unavailable
    async def get_job(self, job_id: str) -> Job | None:
        """The job with ``job_id``, or ``None``."""
        fields = await self._client.hgetall(self.keys.job(validate_job_id(job_id)))
        if not fields:
            return None
        job = Job.from_fields(job_id, fields_from_reply(fields), self.name)
        return job.bind(self._job_handle)

    async def _get_jobs(self, ids: list[str]) -> list[Job]:
        if not ids:
            return []
        # One write, packed in C, and one deadline for all the replies (a page reads 50).
        replies = await _scripts.send_all(
            self._client, [("HGETALL", self.keys.job(job_id)) for job_id in ids]
        )
        handle = self._job_handle
        return [
            Job.from_fields(_text(job_id), fields_from_reply(reply), self.name).bind(handle)
            for job_id, reply in zip(ids, replies)
            if reply
        ]

    @reports_unavailable
    async def get_job_state(self, job_id: str) -> JobState:
        """Where the job is now: ``waiting``, ``paused``, ``prioritized``, ``delayed``,
        ``active``, ``completed``, ``failed``, or ``unknown``."""
        validate_job_id(job_id)
        k = self.keys
        state = await _scripts.load("job_state")(
            self._client,
            [k.completed, k.failed, k.delayed, k.prioritized, k.leases, k.meta, k.job(job_id),
             k.dl],
            [job_id],
        )  # fmt: skip
        return cast(JobState, _text(state))

    async def _list_range(self, key: str, start: int, end: int) -> list[Job]:
        start, end = check_range(start, end)
        return await self._get_jobs([_text(i) for i in await self._client.lrange(key, start, end)])

    async def _zset_range(self, key: str, start: int, end: int, *, desc: bool) -> list[Job]:
        start, end = check_range(start, end)
        ids = await self._client.zrange(key, start, end, desc=desc)
        return await self._get_jobs([_text(i) for i in ids])

    @reports_unavailable
    async def get_waiting(self, start: int = 0, end: int = -1) -> list[Job]:
        """Waiting jobs, newest first (``start``/``end`` are inclusive indexes)."""
        return await self._list_range(self.keys.wait, start, end)

    @reports_unavailable
    async def get_active(self, start: int = 0, end: int = -1) -> list[Job]:
        """Active jobs, most recently started first."""
        return await self._list_range(self.keys.active, start, end)

    @reports_unavailable
    async def get_prioritized(self, start: int = 0, end: int = -1) -> list[Job]:
        """Prioritized jobs, next to run first."""
        return await self._zset_range(self.keys.prioritized, start, end, desc=False)

    @reports_unavailable
    async def get_delayed(self, start: int = 0, end: int = -1) -> list[Job]:
        """Delayed jobs, soonest due first."""
        return await self._zset_range(self.keys.delayed, start, end, desc=False)

    @reports_unavailable
    async def get_completed(self, start: int = 0, end: int = -1) -> list[Job]:
        """Completed jobs, most recently finished first."""
        return await self._zset_range(self.keys.completed, start, end, desc=True)

    @reports_unavailable
    async def get_failed(self, start: int = 0, end: int = -1) -> list[Job]:
        """Failed jobs, most recently failed first."""
        return await self._zset_range(self.keys.failed, start, end, desc=True)

    @reports_unavailable
    async def get_job_counts(self) -> dict[str, int]:
        """The number of jobs in each state, in one round trip."""
        k = self.keys
        async with self._client.pipeline(transaction=False) as pipe:
            pipe.llen(k.wait)
            pipe.zcard(k.prioritized)
            pipe.zcard(k.delayed)
            pipe.llen(k.active)
            pipe.zcard(k.completed)
            pipe.zcard(k.failed)
            pipe.hmget(k.meta, "paused", "holes")
            for status in LIVE_STATUSES:
                pipe.zcard(k.dl_index("s", status))
            wait, prio, delayed, active, completed, failed, meta, *live = await pipe.execute()
        dead = sum(int(n) for n in live)
        paused, holes = meta
        # Jobs removed from deep inside a long wait list leave holes there (remove_job.lua).
        wait = max(int(wait) - int(holes or 0), 0)
        ready = wait + int(prio)
        return {
            # Dead letters wait in the store, paused or not: a pause holds claims only.
            "waiting": (0 if paused else wait) + int(dead),
            "prioritized": 0 if paused else int(prio),
            "paused": ready if paused else 0,
            "delayed": int(delayed),
            "active": int(active),
            "completed": int(completed),
            "failed": int(failed),
        }

    async def get_waiting_count(self) -> int:
        """Jobs ready to run (waiting and prioritized), or held by a pause."""
        counts = await self.get_job_counts()
        return counts["waiting"] + counts["prioritized"] + counts["paused"]

    @reports_unavailable
    async def get_active_count(self) -> int:
        return int(await self._client.llen(self.keys.active))

    @reports_unavailable
    async def get_delayed_count(self) -> int:
        return int(await self._client.zcard(self.keys.delayed))

    @reports_unavailable
    async def get_prioritized_count(self) -> int:
        return int(await self._client.zcard(self.keys.prioritized))

    @reports_unavailable
    async def get_completed_count(self) -> int:
        return int(await self._client.zcard(self.keys.completed))

    @reports_unavailable
    async def get_failed_count(self) -> int:
        return int(await self._client.zcard(self.keys.failed))
