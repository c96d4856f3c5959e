"""Changes to an OJS job already enqueued: ACTIVATE a pending job, cancel one that has not
ended (an active one under the lock token its worker holds)."""

from __future__ import annotations

import json
from typing import Any

from .. import _scripts
from ..errors import JobNotFoundError, JobStateError
from . import records
from .backend import MEMO_LOCK_MS, Backend, Loaded
from .errors import OjsError
from .jobs import STACK
from .states import TERMINAL, iso


async def activate(backend: Backend, job_id: str) -> dict[str, Any]:
    """ACTIVATE a pending job: it is available now (or scheduled, when it was pushed with a
    ``scheduled_at`` still to come); 409 ``conflict`` for a job that is not pending."""
    loaded = await backend.load(job_id)
    if loaded.state != "pending":
        raise OjsError(409, "conflict", f"job {job_id!r} is {loaded.state}; only a pending job "
                       "can be activated", details={"job_id": job_id,
                                                    "current_state": loaded.state})  # fmt: skip
    now = backend.now()
    queue = backend.queue(loaded.queue)
    due = int(loaded.record.get("due") or 0)
    try:
        if due > now:
            await queue.change_job_delay(job_id, due - now)
        else:
            await queue.promote_job(job_id)
    except (JobStateError, JobNotFoundError):  # activated, cancelled or removed meanwhile
        raise OjsError(409, "conflict", f"job {job_id!r} changed state; try again") from None
    await backend.records.update(loaded.queue, job_id, {"pending": None, "activated_at": now})
    view = (await backend.load_in(loaded.queue, job_id)).view()
    return {**view, "activated_at": iso(now), "previous_state": "pending"}


async def cancel(backend: Backend, job_id: str) -> dict[str, Any]:
    """Cancel a job that has not ended; 409 ``conflict`` for one that has."""
    return await cancel_loaded(backend, await backend.load(job_id))


async def cancel_loaded(backend: Backend, loaded: Loaded) -> dict[str, Any]:
    """Cancel ``loaded``, which OJS indexes, as :func:`cancel` does; its view after.

    The record is marked ``cancelling`` before the engine lets go of the job, and the cancel
    recorded after: a server killed in between leaves a job that shows ``cancelled``, and a
    cancel sent again finishes recording it."""
    job_id, record = loaded.id, loaded.record
    if loaded.state == "cancelled" and record.get("cancelling") and not record.get("state"):
        return await _cancelled(backend, loaded, int(record["cancelling"]))  # cut short
    if loaded.state in TERMINAL:
        raise OjsError(409, "conflict", f"job {job_id!r} is {loaded.state} and cannot be cancelled")
    now = backend.now()
    if loaded.engine_state == "unknown" and record.get("adding"):
        if not records.orphan(record["adding"], None, now):
            raise OjsError(409, "conflict", f"job {job_id!r} is being enqueued; try again")
        # An orphan: its job was never added. Recorded cancelled, the upkeep leaves it.
        return await _cancelled(backend, loaded, now)
    await backend.records.update(loaded.queue, job_id, {"cancelling": now})
    try:
        await _let_go(backend, loaded, now)
    except OjsError:
        await backend.records.update(loaded.queue, job_id, {"cancelling": None})
        raise
    return await _cancelled(backend, loaded, now)


async def _let_go(backend: Backend, loaded: Loaded, now: int) -> None:
    """Take the job from the engine: end an active one's attempt, remove any other; 409
    ``conflict`` when it changed state meanwhile."""
    if loaded.engine_state == "active":
        await _cancel_active(backend, loaded, now)
        return
    try:
        await backend.queue(loaded.queue).remove(loaded.id)
    except (JobStateError, JobNotFoundError):  # claimed, or ended, meanwhile
        raise OjsError(409, "conflict", f"job {loaded.id!r} changed state; try again") from None


async def _cancelled(backend: Backend, loaded: Loaded, at: int) -> dict[str, Any]:
    """Record that ``loaded`` was cancelled at ``at``, tell it, and answer its view."""
    await backend.finish_record(loaded, "cancelled", cancelled_at=at)
    await backend.emit("job.cancelled", loaded)
    return (await backend.load_in(loaded.queue, loaded.id)).view()


async def _cancel_active(backend: Backend, loaded: Loaded, now: int) -> None:
    """End an active job's attempt and remove it, under the lock token it runs with: its
    worker (remote or in-process) then finds its lock gone and drops its outcome."""
    keys = backend.keys(loaded.queue)
    token = await backend.client.hget(keys.job(loaded.id), "lockToken")
    token_text = token.decode() if isinstance(token, bytes) else str(token or "")
    base = backend.new_token_base()
    attempt = json.dumps({
        "attempt": loaded.job.attempts_started if loaded.job else 0, "startedAt": now,
        "finishedAt": now, "worker": base, "outcome": "failed", "error": "cancelled",
        "errorType": "cancelled",
    })  # fmt: skip
    memo = backend.memo(loaded.queue, base, loaded.id)
    reply = await _scripts.load("fail_job")(
        backend.client,
        [*keys.group, keys.job(loaded.id), keys.failed, memo],
        [loaded.id, token_text, now, "cancelled", "cancelled", STACK, attempt, -1, -1, 1,
         backend.max_events, 0, base, MEMO_LOCK_MS],
    )  # fmt: skip
    if int(reply[0]) != 0:
        raise OjsError(409, "conflict", f"job {loaded.id!r} changed state; try again")
