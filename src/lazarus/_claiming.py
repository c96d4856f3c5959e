"""A worker's claim loop (one queue): claim as many jobs as there are free slots, and when the
queue is drained, block on its marker until a job may be ready, then claim in the same round
trip. A worker with several queues runs the loop of ``_lanes`` instead.
"""

from __future__ import annotations

import asyncio
import math
from typing import TYPE_CHECKING, Any

from . import _scripts
from ._burst import PAST_MAX_JOBS, next_step, room
from ._connection import now_ms
from ._execution import ClaimedJob, parse_claimed
from ._keys import new_id
from ._slot import SlotRunner
from ._supervision import pause

if TYPE_CHECKING:
    from .worker import Worker

CLOCK_CHECK_INTERVAL = 60.0  # seconds between measurements of the server's clock
BLOCK_READ_MARGIN = 10.0  # seconds a blocking claim's reply may lag its timeout


def _block_seconds(timeout: float) -> str:
    """A blocking command's timeout argument: whole milliseconds (at least 1) plus half of one.

    Redis turns fractional seconds into milliseconds by truncation, and 0 means "block
    forever": "0.001" can land just below 1 ms (Redis 6.2 does so) and never time out.
    """
    ms = max(math.ceil(timeout * 1000), 1)
    return f"{(ms + 0.5) / 1000:.4f}"


async def main_loop(worker: Worker) -> None:
    idle = False
    next_due = -1
    while not worker._closing:
        free = room(worker)
        if free <= 0:
            worker._slot_freed.clear()
            await worker._slot_freed.wait()
            continue
        try:
            if idle and worker.burst:
                step = await next_step(worker)
                if step is None:
                    return  # the burst is over
                if not step:  # a slot ended: claim at once, for as many as are free now
                    idle = False
                    continue
            if idle:
                claimed, next_due = await wait_and_claim(worker, free, next_due)
            else:
                claimed, next_due = await claim(worker, free)
            # Fewer jobs than free slots: the queue is drained for now. A job added from
            # here on sets the marker, so the next call may block at once.
            idle = len(claimed) < free
        except Exception as exc:  # whatever it is, the loop goes on (after a backoff)
            idle = False
            worker._report_error(exc, worker._claim_incident)
            await pause(worker._stopping, worker._claim_incident.backoff())
            continue
        if worker._claim_incident.failures:
            worker._claim_incident.succeeded()
        for job in claimed:  # started even when closing: they are claimed
            start(worker, job)
        if claimed and idle:
            await begin_before_blocking()


async def begin_before_blocking() -> None:
    """Let the jobs just started reach their processors before the loop sends its next
    blocking claim: they need no round trip, and writing the claim first would hold their
    start back by a socket write."""
    await asyncio.sleep(0)


def start(worker: Worker, claimed: ClaimedJob, slots: SlotRunner | None = None) -> None:
    """Run a claimed job in one of the worker's free slots (``slots``: a lane's), or hand it
    back unrun when the worker's ``max_jobs`` were started meanwhile."""
    runner = slots or worker._slots
    slot = worker._free_slots.pop()
    if worker._budget is None or worker._budget.take():
        work = runner.work(claimed, slot)
    else:  # max_jobs were started meanwhile (by slots claiming their next jobs)
        work = _put_back(runner, claimed)
    task = asyncio.create_task(work)
    worker._tasks.add(task)
    task.add_done_callback(lambda done: _task_done(worker, done, slot))


async def _put_back(runner: SlotRunner, claimed: ClaimedJob) -> None:
    await runner.hand_back(claimed, PAST_MAX_JOBS)


def _task_done(worker: Worker, task: asyncio.Task[None], slot: str) -> None:
    worker._tasks.discard(task)
    worker._free_slots.append(slot)
    worker._slot_freed.set()


def _claim_args(worker: Worker, count: int) -> list[Any]:
    return [now_ms(), worker.name, worker.lock_duration, count, worker._ctx.max_events,
            worker._claim_id]  # fmt: skip


async def claim(worker: Worker, count: int) -> tuple[list[ClaimedJob], int]:
    reply = await _scripts.load("claim_jobs")(
        worker._client, worker._claim_keys, _claim_args(worker, count)
    )
    return claimed_jobs(worker, reply)


def claimed_jobs(worker: Worker, reply: list[Any]) -> tuple[list[ClaimedJob], int]:
    # A claim sent again after its reply was lost returns the jobs its first run claimed;
    # once a reply is in, the next claim is a new call.
    worker._claim_id = new_id()
    jobs = [parse_claimed(item, worker.queue_name) for item in reply[1:]]
    return [j for j in jobs if j is not None], int(reply[0])


async def wait_and_claim(worker: Worker, count: int, next_due: int) -> tuple[list[ClaimedJob], int]:
    """Block until a job may be ready (the marker), the next delayed job is due, or
    close() (this worker's wake key), then claim: one round trip.

    The claim is sent behind the BZPOPMIN on the same connection, and Redis runs it as
    soon as the pop returns, so a woken worker has its jobs without asking again. It runs
    on the server's clock corrected to ours, since its send time is stale by then.
    """
    if asyncio.get_running_loop().time() >= worker._clock_checked + CLOCK_CHECK_INTERVAL:
        await check_clock(worker)
    timeout = worker.block_timeout
    if next_due >= 0:
        timeout = min(timeout, max((next_due - now_ms()) / 1000, 0.001))
    script = _scripts.load("claim_jobs")
    claim = script.command(
        worker._claim_keys,
        [*_claim_args(worker, count), worker._clock_offset],
        _scripts.functions_on(worker._client),
    )
    worker._blocking = True  # from here on, close() wakes this call instead of cancelling
    try:
        if worker._closing:
            return [], next_due
        _, reply = await _scripts.execute(
            worker._client,
            [("BZPOPMIN", worker.keys.marker, worker._wake_key, _block_seconds(timeout)), claim],
            timeout=timeout + BLOCK_READ_MARGIN,
            # Not sent again on a dropped connection, where a second BZPOPMIN could block
            # for long: the main loop claims instead, with the same call id.
            repeatable=False,
        )
    finally:
        worker._blocking = False
    if _scripts.unrun(reply) is not None:  # refused unrun: loaded, and sent again
        reply = await script(worker._client, worker._claim_keys, _claim_args(worker, count))
    elif isinstance(reply, Exception):
        raise reply
    return claimed_jobs(worker, reply)


async def check_clock(worker: Worker) -> None:
    """Measure this machine's clock against the server's (to the round trip's precision)."""
    before = now_ms()
    seconds, micros = await worker._client.time()
    after = now_ms()
    worker._clock_offset = (before + after) // 2 - (seconds * 1000 + micros // 1000)
    worker._clock_checked = asyncio.get_running_loop().time()
