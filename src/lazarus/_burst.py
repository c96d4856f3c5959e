"""Workers that end on their own: ``burst`` (once their queues have nothing ready to run) and
``max_jobs`` (once they have started so many jobs).

A burst worker claims as usual. When a claim leaves slots free and none of its own jobs is
running, it reads its queues: it ends once each of them is paused, or has nothing waiting,
prioritized, nor delayed and due (nor, for a dead letter queue, a pending dead letter). Jobs
delayed to a later time (a ``delay``, a retry's backoff, a :class:`~lazarus.RateLimitError`)
are not waited for. Jobs that are ready but that a claim did not take — the queue's rate
limit or global concurrency held them — are: the worker waits as it always does (until the
rate limit's window ends, or a job leaves ``active``) and claims them.

While its own jobs run, a burst worker does not block on its queues' marker: it waits for a
slot to free, and claims again. (Its busy slots claim their own next jobs meanwhile.)

Both count the jobs the worker starts in a :class:`Budget`. A worker without either has no
budget, and its slots test one attribute per job.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ._connection import now_ms
from ._keys import QueueKeys

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


async def drained(client: Any, queues: Sequence[QueueKeys]) -> bool:
    """Whether each of ``queues`` is paused or has nothing ready to run: no job waiting or
    prioritized, no delayed job due, no pending dead letter. One round trip (every queue of
    a worker shares a hash tag on Redis Cluster)."""
    async with client.pipeline(transaction=False) as pipe:
        for keys in queues:
            pipe.hmget(keys.meta, "paused", "holes")
            pipe.llen(keys.wait)
            pipe.zcard(keys.prioritized)
            pipe.zcount(keys.delayed, "-inf", now_ms())
            pipe.zcard(keys.dl_index("s", "pending"))
        replies = await pipe.execute()
    for at in range(0, len(replies), 5):
        (paused, holes), wait, prioritized, due, pending = replies[at : at + 5]
        if paused:  # its jobs wait for a resume, which this worker does not wait for
            continue
        if int(wait) - int(holes or 0) > 0 or int(prioritized) + int(due) + int(pending) > 0:
            return False
    return True


async def next_step(worker: Worker) -> bool | None:
    """For a burst worker whose last claim left slots free: ``None`` once the burst is over,
    True to wait for work as any worker does (jobs are ready but were held back: a rate limit,
    a global concurrency), False to claim again at once (one of its slots has ended)."""
    if worker._tasks:  # its own jobs may retry, and their slots claim on: wait for one
        worker._slot_freed.clear()
        await worker._slot_freed.wait()
        return False
    if await drained(worker._client, [lane.keys for lane in worker._lanes]):
        return None
    return True
