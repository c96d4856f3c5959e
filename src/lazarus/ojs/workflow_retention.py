"""Retention of failed OJS workflows: when a failed workflow is over for good.

A failed workflow may resume: a retry of one of its failed (discarded or cancelled) jobs
puts the job back, and the workflow moves on. That retry needs the job still held: a dead
letter the server's dead letter queue keeps (whatever its status), or a job the engine keeps
(one that failed for good in its queue, or an active one that was cancelled). That is the
rule by which the job's OJS record is kept (:meth:`~lazarus.ojs.records.Records.prune`), so
the record of a closed workflow expires about when the last of its failed jobs' records do.

A failed workflow is **closed** (:func:`retire`) once none of its jobs runs, none of its
failed jobs is held, and no retry of one is under way (its mark in the open set): it leaves
the upkeep's open set, its ``workflow-of`` entries go, its record gets ``closed_at`` and
expires in :data:`~lazarus.ojs.records.RECORD_KEEP_MS`, and no event is told (it told
``workflow.failed`` already). Two moments ask: an advance that takes the workflow out of
the open set (:func:`~lazarus.ojs.workflows.advance`), and the records' upkeep when it lets
go of the record of a job of a workflow, or finds it gone (:func:`retire_owners`, a bounded
step of it). Nothing else scans for them.

The decision is one transaction on the record (WATCH, then the reads, then the writes), and
its reads are ordered so that a retry racing it is never lost: the jobs' states, then whether
they are held (a retried dead letter stays in the store, ``processing``, while its job is
back), then the retries' marks (a retry marks the workflow before the job is back, and the
advance that sees the job back drops the mark only after it wrote to the record). So a
retry is seen (held, marked, or the record changed and the transaction fails: the workflow
is kept), or it finds neither the dead letter nor the failed job, and is refused.
"""

from __future__ import annotations

import logging

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.exceptions import WatchError

from .._codec import text as _text
from .backend import Backend
from .errors import OjsError
from .records import RECORD_KEEP_MS
from .states import TERMINAL
from .workflow_ends import close
from .workflow_records import CLOSED, FAILED, Keys, Workflow, load, states_of

log = logging.getLogger("lazarus.ojs")

RETIRE_TRIES = 3  # reads of a record that changed meanwhile before the decision waits


async def retire_owners(backend: Backend, job_ids: list[str]) -> int:
    """:func:`retire` each workflow the jobs ``job_ids`` belong to (the records' upkeep let
    go of their records): how many were closed. A workflow that cannot be read is passed
    over."""
    if not job_ids:
        return 0
    owners = await backend.client.hmget(Keys(backend.prefix).of, job_ids)
    closed = 0
    for workflow_id in dict.fromkeys(_text(o) for o in owners if o is not None):
        try:
            closed += await retire(backend, workflow_id)
        except OjsError:  # its record is gone: nothing to close
            continue
        except (RedisConnectionError, RedisTimeoutError):
            raise  # Redis away: the upkeep says so once, and tries again
        except Exception as exc:
            log.warning("workflow %s not looked at for retention: %s", workflow_id, exc)
    return closed


async def retire(backend: Backend, workflow_id: str) -> bool:
    """Close the workflow if it failed and is over for good (see the module): whether this
    call closed it."""
    record = Keys(backend.prefix).record(workflow_id)
    async with backend.client.pipeline(transaction=True) as pipe:
        for _ in range(RETIRE_TRIES):
            try:
                await pipe.watch(record)
                wf = await load(backend, workflow_id)
                if CLOSED in wf.fields:  # closed already: finish a close cut short
                    await close(backend, wf)
                    return False
                if wf.state != "failed" or not await _over(backend, wf):
                    return False
                pipe.multi()  # type: ignore[no-untyped-call]
                pipe.hset(record, CLOSED, str(backend.now()))
                pipe.pexpire(record, RECORD_KEEP_MS)
                await pipe.execute()
            except WatchError:  # the record changed (it moves on): read it again
                continue
            await close(backend, wf)
            return True
    return False  # it keeps changing: a later visit decides


async def _over(backend: Backend, wf: Workflow) -> bool:
    """Whether none of the workflow's jobs runs, it has a failed job, and none of its failed
    jobs is held nor being retried."""
    loaded = await states_of(backend, wf)
    states = {j["id"]: loaded[j["id"]].state if j["id"] in loaded else "pending" for j in wf.jobs}
    if any(s not in TERMINAL and s != "pending" for s in states.values()):
        return False
    failed = [(i, loaded[i].queue) for i, s in states.items() if s in FAILED]
    if not failed:
        return False  # its jobs are back: an advance takes its failure back
    keys, letters = Keys(backend.prefix), backend.keys(backend.dead_letter_queue).dl_origins
    async with backend.client.pipeline(transaction=False) as pipe:
        for job_id, queue in failed:
            pipe.hexists(letters, job_id)
            pipe.exists(backend.keys(queue).job(job_id))
        held = await pipe.execute()
        if any(held):
            return False
        for job_id, _ in failed:  # then the marks: an advance drops one after its writes
            pipe.sismember(keys.open, keys.resuming(wf.id, job_id))
        return not any(await pipe.execute())
