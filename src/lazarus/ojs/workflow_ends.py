"""How an OJS workflow ends, and whether the upkeep still visits it.

A workflow ends once: completed or cancelled, never both (:func:`_end` decides, in one
transaction on the record). A failed workflow none of whose jobs runs any more leaves the
open set (:func:`keep_open`): only a retry of one of its discarded jobs can move it on. That
retry marks the workflow first (:func:`job_resuming`, before the job is back), and the first
advance that sees the job back keeps the workflow open and drops the mark: a server that dies
in between leaves the mark, and the upkeep moves the workflow on. A failed workflow none of
whose failed jobs can come back any more is closed too (:mod:`.workflow_retention`).
"""

from __future__ import annotations

import contextlib

from redis.exceptions import WatchError

from .._codec import text as _text
from .backend import Backend
from .errors import OjsError
from .job_actions import cancel
from .records import RECORD_KEEP_MS
from .states import TERMINAL
from .workflow_records import FAILED, Keys, Workflow, emit, load, states_of

ENDS = ("completed_at", "cancelled_at")  # the markers of a workflow's end: one is ever set
END_TRIES = 50  # reads of a record that keeps changing before the decision gives up


async def keep_open(backend: Backend, wf: Workflow, states: list[str], back: list[str]) -> bool:
    """Keep the workflow in the open set unless it completed, or failed with none of its jobs
    running (then only a retry moves it on, and that marks it again), and drop the marks of
    the retried jobs ``back`` (seen not discarded: their retry is done). One transaction on
    one key: the workflow is never out of the set while a mark it needs is dropped. Whether
    it failed with none of its jobs running (it may be over for good)."""
    failed, over = any(s in FAILED for s in states), all(s == "completed" for s in states)
    running = any(s not in TERMINAL and s != "pending" for s in states)
    keys = Keys(backend.prefix)
    async with backend.client.pipeline(transaction=True) as pipe:
        if over:
            pass  # closed by its end
        elif failed and not running:
            pipe.srem(keys.open, wf.id)
        else:
            pipe.sadd(keys.open, wf.id)
        if back:
            pipe.srem(keys.open, *(keys.resuming(wf.id, i) for i in back))
        await pipe.execute()
    return failed and not running


async def complete_workflow(backend: Backend, wf: Workflow) -> bool:
    """End the workflow read as ``wf`` ``completed`` (its jobs all are), unless it ended
    already, a cancel first: whether this call ended it, and then it tells
    ``workflow.completed``."""
    if not await _end(backend, wf.id, "completed_at"):
        return False
    await close(backend, wf)
    await emit(backend, "workflow.completed", wf)
    return True


async def _end(backend: Backend, workflow_id: str, marker: str) -> bool:
    """Set ``marker`` (one of :data:`ENDS`) unless the workflow has one: whether this call
    set it. The check and the set are one transaction on the record, so of a completion and
    a cancel that race, exactly one ends the workflow, and only its event is told."""
    record = Keys(backend.prefix).record(workflow_id)
    async with backend.client.pipeline(transaction=True) as pipe:
        for _ in range(END_TRIES):
            try:
                await pipe.watch(record)
                if any(v is not None for v in await pipe.hmget(record, list(ENDS))):
                    return False
                pipe.multi()  # type: ignore[no-untyped-call]
                pipe.hset(record, marker, str(backend.now()))
                await pipe.execute()
                return True
            except WatchError:  # the record changed (a job marked enqueued): read it again
                continue
    raise OjsError(409, "conflict", f"workflow {workflow_id!r} keeps changing; try again")


async def close(backend: Backend, wf: Workflow) -> None:
    """The workflow is over (completed, cancelled, or failed for good): no longer swept, its
    record kept as long as its jobs' records are."""
    keys = Keys(backend.prefix)
    ids = wf.all_ids()
    async with backend.client.pipeline(transaction=False) as pipe:
        pipe.srem(keys.open, wf.id, *(keys.resuming(wf.id, i) for i in ids))
        pipe.hdel(keys.of, *ids)
        pipe.pexpire(keys.record(wf.id), RECORD_KEEP_MS)
        await pipe.execute()


async def cancel_workflow(backend: Backend, workflow_id: str) -> int:
    """Cancel the workflow: no job of it is enqueued from now on, and those not ended are
    cancelled (their number is returned); 409 for a workflow that is over."""
    return await cancel_read(backend, await load(backend, workflow_id))


async def cancel_read(backend: Backend, wf: Workflow) -> int:
    """:func:`cancel_workflow` of the workflow read as ``wf``: 409 when it ended since, a
    completion first (then only ``workflow.completed`` is told)."""
    if wf.state in ("completed", "cancelled") or not await _end(backend, wf.id, "cancelled_at"):
        state = (await load(backend, wf.id)).state
        raise OjsError(409, "conflict", f"workflow {wf.id!r} is {state} already",
                       details={"workflow_id": wf.id})  # fmt: skip
    wf = await load(backend, wf.id)  # what was enqueued before the marker, all of it
    cancelled = 0
    for job_id, loaded in (await states_of(backend, wf)).items():
        if loaded.state not in TERMINAL:
            with contextlib.suppress(OjsError):  # ended meanwhile
                await cancel(backend, job_id)
                cancelled += 1
    await close(backend, wf)
    await emit(backend, "workflow.cancelled", wf)
    return cancelled


async def job_resuming(backend: Backend, job_id: str) -> str | None:
    """Mark the workflow job ``job_id`` belongs to, if any, before the job, discarded, is put
    back (a dead letter retried): the upkeep then visits the workflow, failed or not, until an
    advance sees the job back. Call :func:`job_ended` once the job is back, or
    :func:`job_not_resuming` with the mark returned when the retry was refused."""
    keys = Keys(backend.prefix)
    workflow_id = await backend.client.hget(keys.of, job_id)
    if workflow_id is None:
        return None
    mark = keys.resuming(_text(workflow_id), job_id)
    await backend.client.sadd(keys.open, mark)
    return mark


async def job_not_resuming(backend: Backend, mark: str | None) -> None:
    """Take back the ``mark`` of :func:`job_resuming` of a retry that was refused (it put
    nothing back), so that it neither keeps the upkeep visiting the workflow nor keeps a
    failed workflow from being closed. Only for a refusal: a retry whose outcome is unknown
    (a dropped connection) keeps its mark."""
    if mark is not None:
        await backend.client.srem(Keys(backend.prefix).open, mark)
