"""Waiting for a job's result: ``await job.wait_until_finished(timeout=...)``.

Driven by the queue's events stream (:class:`~lazarus.QueueEvents`), not by polling: the
waiter fixes its starting point in the stream, then reads the job once. A job finished before
that point is settled by what is stored (its hash, or when the job was removed by retention
or dead-lettered, its terminal event still in the stream); any later outcome arrives as an
event.
"""

from __future__ import annotations

import asyncio
from typing import Any

from . import _codec
from ._codec import text as _text
from ._progress import JobHandle
from .errors import JobFailedError, JobNotFoundError
from .events import QueueEvents

HISTORY_PAGE = 1000  # events read per round trip when looking back for a removed job's end

Outcome = tuple[str, dict[str, str]]  # the terminal event's name and fields


async def wait_until_finished(
    handle: JobHandle, job_id: str, events: QueueEvents | None, timeout: float | None
) -> Any:
    """The job's return value once it completes; raises :class:`JobFailedError` once it fails
    for good (or is dead-lettered), ``asyncio.TimeoutError`` after ``timeout`` seconds, and
    :class:`JobNotFoundError` for a job that is neither stored nor ended in the stream."""
    own = events is None
    reader = events or QueueEvents(handle.keys.queue, connection=handle.client,
                                   prefix=handle.keys.prefix)  # fmt: skip
    done: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()

    def on_event(args: dict[str, str], _event_id: str) -> None:
        if args.get("jobId") == job_id and not done.done():
            outcome = _terminal(args)
            if outcome is not None:
                done.set_result(outcome)

    # Ready first: a reader started by on() would fix its own starting point meanwhile.
    await reader.wait_until_ready()
    reader.on("*", on_event)
    try:
        settled = await _stored_outcome(handle, job_id)
        if settled is None:
            settled = await asyncio.wait_for(done, timeout)
    finally:
        reader.off("*", on_event)
        if own:
            await reader.close()
    return _result(job_id, settled)


def _terminal(args: dict[str, str]) -> Outcome | None:
    """The outcome an event ends a job with, or ``None``. A dead-lettered job's ``failed`` is
    followed by ``deadLettered``, which names where it went."""
    name = args.get("event", "")
    if name == "completed" or name == "deadLettered":
        return name, args
    if name == "failed" and args.get("deadLettered") != "1":
        return name, args
    return None


async def _stored_outcome(handle: JobHandle, job_id: str) -> Outcome | None:
    """How the job ended as stored now, or ``None`` while it has not."""
    keys, client = handle.keys, handle.client
    async with client.pipeline(transaction=False) as pipe:
        pipe.hmget(keys.job(job_id), ["returnvalue", "failedReason"])
        pipe.zscore(keys.completed, job_id)
        pipe.zscore(keys.failed, job_id)
        pipe.exists(keys.job(job_id))
        (returnvalue, reason), completed, failed, exists = await pipe.execute()
    if completed is not None:
        return "completed", {"returnvalue": _text(returnvalue or "null")}
    if failed is not None:
        return "failed", {"failedReason": _text(reason or "")}
    if exists:
        return None
    return await _ended_in_history(handle, job_id)


async def _ended_in_history(handle: JobHandle, job_id: str) -> Outcome:
    """The terminal event of a job whose hash is gone, newest first through the stream."""
    newest = "+"
    while True:
        page: Any = await handle.client.xrevrange(
            handle.keys.events, newest, "-", count=HISTORY_PAGE
        )
        for _, fields in page:
            args = {_text(k): _text(v) for k, v in fields.items()}
            if args.get("jobId") == job_id:
                outcome = _terminal(args)
                if outcome is not None:
                    return outcome
        if len(page) < HISTORY_PAGE:
            raise JobNotFoundError(f"no job {job_id!r} in {handle.keys.queue!r}")
        newest = "(" + _text(page[-1][0])


def _result(job_id: str, outcome: Outcome) -> Any:
    name, args = outcome
    if name == "completed":
        return _codec.decode(args.get("returnvalue") or "null")
    raise JobFailedError(
        job_id,
        args.get("failedReason", ""),
        dead_letter_queue=args.get("deadLetterQueue"),
        dead_letter_id=args.get("deadLetterId"),
    )
