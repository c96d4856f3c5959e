"""Workers that end on their own: ``burst`` (once their queues have nothing ready to run) and
``max_jobs`` (once they have started so many jobs).

A burst worker claims as usual. When a claim leaves slots free and none of its own jobs is
running, it reads its queues: it ends once each of them is paused, or has nothing waiting,
prioritized, nor delayed and due (nor, for a dead letter queue, a pending dead letter). Jobs
delayed to a later time (a ``delay``, a retry's backoff, a :class:`~lazarus.RateLimitError`)
are not waited for — unless ``burst_waits_for_delayed``: then a queue with delayed jobs is not
done, and the worker blocks on its marker until the next one is due, as any worker does, and
runs it. Schedules' pending occurrences do not count (a queue with a schedule always has
one): per queue, the delayed jobs are counted, less those whose ids are the occurrences the
schedules' next due times name — a read of each schedule, never of the delayed set.

Jobs that are ready but that a claim did not take — the queue's rate limit or global
concurrency held them — are waited for: the worker waits as it always does (until the rate
limit's window ends, or a job leaves ``active``) and claims them.

While its own jobs run, a burst worker does not block on its queues' marker: it waits for a
slot to free, and claims again. (Its busy slots claim their own next jobs meanwhile.)

Both count the jobs the worker starts in a :class:`Budget`. A worker without either has no
budget, and its slots test one attribute per job.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ._codec import text
from ._connection import now_ms
from ._keys import QueueKeys
from ._schedule import occurrence_id

if TYPE_CHECKING:
    from .worker import Worker

PAST_MAX_JOBS = "was claimed after the worker's max_jobs were started"


class Budget:
    """The jobs a worker has started, and how many it may (``limit``; ``None``: no limit).
    ``spent`` is called once, when the last job it allows starts."""

    def __init__(self, limit: int | None, spent: Callable[[], None]) -> None:
        self.limit = limit
        self.started = 0
        self._spent = spent

    def take(self) -> bool:
        """Count one more job started; False (and nothing counted) once the limit is reached."""
        if self.limit is not None and self.started >= self.limit:
            return False
        self.started += 1
        if self.started == self.limit:
            self._spent()
        return True

    def left(self, wanted: int) -> int:
        """``wanted``, or fewer when the limit allows fewer more jobs."""
        return wanted if self.limit is None else min(wanted, self.limit - self.started)


def room(worker: Worker) -> int:
    """How many jobs a claim loop may claim now: the worker's free slots, or fewer when its
    ``max_jobs`` allow fewer more."""
    free = worker.concurrency - len(worker._tasks)
    return free if worker._budget is None else worker._budget.left(free)


async def drained(client: Any, queues: Sequence[QueueKeys], *, delayed_too: bool = False) -> bool:
    """Whether each of ``queues`` is paused or has nothing ready to run: no job waiting or
    prioritized, no delayed job due, no pending dead letter; with ``delayed_too``, no delayed
    job at all but schedules' pending occurrences. One round trip (every queue of a worker
    shares a hash tag on Redis Cluster), and a second for queues with delayed jobs and
    schedules."""
    width = 6 if delayed_too else 5
    async with client.pipeline(transaction=False) as pipe:
        for keys in queues:
            pipe.hmget(keys.meta, "paused", "holes")
            pipe.llen(keys.wait)
            pipe.zcard(keys.prioritized)
            pipe.zcount(keys.delayed, "-inf", "+inf" if delayed_too else now_ms())
            pipe.zcard(keys.dl_index("s", "pending"))
            if delayed_too:
                pipe.zrange(keys.repeat_index, 0, -1, withscores=True)
        replies = await pipe.execute()
    delayed: list[tuple[QueueKeys, int, list[Any]]] = []
    for keys, at in zip(queues, range(0, len(replies), width)):
        (paused, holes), wait, prioritized, due, pending, *schedules = replies[at : at + width]
        if paused:  # its jobs wait for a resume, which this worker does not wait for
            continue
        if int(wait) - int(holes or 0) > 0 or int(prioritized) + int(pending) > 0:
            return False
        if int(due) > 0:
            if not delayed_too or not schedules[0]:
                return False
            delayed.append((keys, int(due), schedules[0]))
    return not delayed or not await _beyond_schedules(client, delayed)


async def _beyond_schedules(client: Any, queues: Sequence[tuple[QueueKeys, int, Any]]) -> bool:
    """Whether any of ``queues`` (each with its count of delayed jobs, and its schedules'
    keys and next due times) holds a delayed job other than its schedules' pending
    occurrences. Three reads per schedule, in one round trip."""
    async with client.pipeline(transaction=False) as pipe:
        for keys, _, schedules in queues:
            for key, due in schedules:
                key, due = text(key), int(due)
                pipe.hget(keys.repeat(key), "jobIds")
                pipe.zscore(keys.delayed, occurrence_id(key, due))
                pipe.zscore(keys.delayed, occurrence_id(key, due, "uuid7"))
        replies = iter(await pipe.execute())
    for _, count, schedules in queues:
        for _ in schedules:
            job_ids, named, uuid7 = next(replies), next(replies), next(replies)
            count -= (uuid7 if job_ids and text(job_ids) == "uuid7" else named) is not None
        if count > 0:
            return True
    return False


async def next_step(worker: Worker) -> bool | None:
    """For a burst worker whose last claim left slots free: ``None`` once the burst is over,
    True to wait for work as any worker does (jobs are ready but were held back: a rate limit,
    a global concurrency), False to claim again at once (one of its slots has ended)."""
    if worker._tasks:  # its own jobs may retry, and their slots claim on: wait for one
        worker._slot_freed.clear()
        await worker._slot_freed.wait()
        return False
    queues = [lane.keys for lane in worker._lanes]
    if await drained(worker._client, queues, delayed_too=worker.burst_waits_for_delayed):
        return None
    return True
