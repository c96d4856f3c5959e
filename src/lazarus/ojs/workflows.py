"""OJS workflows (chain, group, batch) over lazarus jobs: a workflow record lists every job with
the id it was given at creation, and :func:`advance` moves the workflow on from what Redis
holds: it enqueues what is due (idempotently: a job whose id is taken is not added again),
fires a batch's callbacks, and records the workflow's state. ACK calls it at once; the
server's upkeep (:func:`repair_step`) calls it for every open workflow, which puts right a
crash between an ACK and the next enqueue, and moves on workflows whose jobs in-process
lazarus workers ran.

A failed workflow none of whose jobs runs any more leaves the open set: only a retry of one
of its discarded jobs can move it on. That retry marks the workflow first
(:func:`job_resuming`, before the job is back), and the first advance that sees the job back
keeps the workflow open and drops the mark: a server that dies in between leaves the mark,
and the upkeep moves the workflow on.

Keys (under the OJS records' ``<prefix>:ojs:``):

- ``<prefix>:ojs:workflow:<id>``  HASH  ``type``, ``name``, ``created_at``, ``key`` (``steps``
                                        or ``jobs``), ``jobs`` and ``callbacks`` (JSON: id,
                                        queue and envelope of each), ``enq:<job id>`` (the job
                                        was enqueued), ``failed_at``, ``completed_at``,
                                        ``cancelled_at``; kept :data:`RECORD_KEEP_MS` once
                                        completed or cancelled (a failed one is kept)
- ``<prefix>:ojs:workflows``      SET   swept by the upkeep: ``<id>`` of each open workflow
                                        (active, or failed while a job of it runs), and
                                        ``<id> <job id>`` while job ``<job id>`` of failed
                                        workflow ``<id>`` is being retried
- ``<prefix>:ojs:workflow-of``    HASH  job id -> workflow id, until the workflow completes
                                        or is cancelled (a failed one may resume)
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.exceptions import WatchError

from .._codec import text as _text
from .backend import Backend, Loaded
from .envelope import new_id, parse_submission
from .errors import OjsError
from .jobs import cancel, enqueue_all
from .records import RECORD_KEEP_MS
from .states import TERMINAL
from .workflow_defs import WorkflowDef, check_schemas

log = logging.getLogger("lazarus.ojs")

READS_AT_ONCE = 16  # jobs of a workflow read at once
REPAIR_BATCH = 10  # open workflows advanced per step of the upkeep, about
FAILED = ("discarded", "cancelled")  # a job that ended so fails its workflow
ENDS = ("completed_at", "cancelled_at")  # the markers of a workflow's end: one is ever set
END_TRIES = 50  # reads of a record that keeps changing before the decision gives up
Due = tuple[dict[str, Any], "list[dict[str, Any]] | None"]  # a job to enqueue, and its parents


@dataclasses.dataclass
class Workflow:
    """A workflow record as read."""

    id: str
    fields: dict[str, str]

    @property
    def type(self) -> str:
        """``chain``, ``group`` or ``batch``."""
        return self.fields["type"]

    @property
    def jobs(self) -> list[dict[str, Any]]:
        """Its jobs in order: ``name``, ``id``, ``queue`` and ``env`` (the envelope) each."""
        value: list[dict[str, Any]] = json.loads(self.fields["jobs"])
        return value

    @property
    def callbacks(self) -> dict[str, dict[str, Any]]:
        """A batch's callback jobs by trigger: ``id``, ``queue`` and ``env`` each."""
        value: dict[str, dict[str, Any]] = json.loads(self.fields.get("callbacks") or "{}")
        return value

    @property
    def state(self) -> str:
        """``cancelled``, ``completed``, ``failed`` or ``active``, from its markers."""
        for state, marker in (("cancelled", "cancelled_at"), ("completed", "completed_at"),
                              ("failed", "failed_at")):  # fmt: skip
            if marker in self.fields:
                return state
        return "active"

    def all_ids(self) -> list[str]:
        """The ids of its jobs and of its callbacks."""
        return [j["id"] for j in self.jobs] + [c["id"] for c in self.callbacks.values()]


class Keys:
    """The workflow keys of a prefix."""

    def __init__(self, prefix: str) -> None:
        self.open = f"{prefix}:ojs:workflows"
        self.of = f"{prefix}:ojs:workflow-of"
        self._base = f"{prefix}:ojs:workflow:"

    def record(self, workflow_id: str) -> str:
        """The key of workflow ``workflow_id``'s record."""
        return self._base + workflow_id

    @staticmethod
    def resuming(workflow_id: str, job_id: str) -> str:
        """The member of the open set that marks job ``job_id`` of a failed workflow retried."""
        return f"{workflow_id} {job_id}"


async def create(backend: Backend, definition: WorkflowDef) -> str:
    """Write the workflow record, then enqueue its first jobs; the workflow's id."""
    await check_schemas(backend.schemas, definition)  # before anything is written
    keys, workflow_id, now = Keys(backend.prefix), new_id(), backend.now()
    jobs: list[dict[str, Any]] = [
        {"name": name, "id": sub.id, "queue": sub.queue, "env": sub.envelope}
        for sub, name in zip(definition.jobs, definition.names, strict=True)
    ]
    callbacks: dict[str, dict[str, Any]] = {
        trigger: {"id": sub.id, "queue": sub.queue, "env": sub.envelope}
        for trigger, sub in definition.callbacks.items()
    }
    fields: dict[str, str] = {
        "type": definition.type, "key": definition.key, "created_at": str(now),
        "jobs": json.dumps(jobs), "callbacks": json.dumps(callbacks),
    }  # fmt: skip
    if definition.name is not None:
        fields["name"] = definition.name
    ids: list[str] = [j["id"] for j in jobs] + [c["id"] for c in callbacks.values()]
    record: dict[Any, Any] = fields  # redis-py's mapping type takes bytes keys too
    owners: dict[Any, Any] = dict.fromkeys(ids, workflow_id)
    async with backend.client.pipeline(transaction=False) as pipe:
        pipe.hset(keys.record(workflow_id), mapping=record)
        pipe.hset(keys.of, mapping=owners)
        pipe.sadd(keys.open, workflow_id)
        await pipe.execute()
    await _emit(backend, "workflow.started", Workflow(workflow_id, fields))
    await advance(backend, workflow_id)
    return workflow_id


async def load(backend: Backend, workflow_id: str) -> Workflow:
    """The workflow; 404 if there is none."""
    raw = await backend.client.hgetall(Keys(backend.prefix).record(workflow_id))
    if not raw:
        raise OjsError(404, "not_found", f"workflow {workflow_id!r} not found")
    return Workflow(workflow_id, {_text(k): _text(v) for k, v in raw.items()})


async def states_of(backend: Backend, wf: Workflow) -> dict[str, Loaded]:
    """Each enqueued job of the workflow (its callbacks too), by id: what the others are
    is that they are not enqueued yet."""
    ids = wf.all_ids()
    async with backend.client.pipeline(transaction=False) as pipe:
        for job_id in ids:
            pipe.hexists(backend.records.index, job_id)
        indexed = await pipe.execute()
    queues = {j["id"]: j["queue"] for j in [*wf.jobs, *wf.callbacks.values()]}
    found = [i for i, known in zip(ids, indexed, strict=True) if known or f"enq:{i}" in wf.fields]
    # Read a few at once (each read is a few round trips; every ACK of a job reads them all),
    # but not all: each read in flight holds a connection of the pool.
    loaded: list[Loaded] = []
    for start in range(0, len(found), READS_AT_ONCE):
        chunk = found[start : start + READS_AT_ONCE]
        loaded += await asyncio.gather(*(backend.load_in(queues[i], i) for i in chunk))
    return dict(zip(found, loaded, strict=True))


async def advance(backend: Backend, workflow_id: str) -> None:
    """Move the workflow on from its jobs' states: enqueue what is due, fire a batch's
    callbacks, record its state. Safe to run twice, or at once in two servers: a job is
    only ever added under the id the workflow gave it."""
    wf = await load(backend, workflow_id)
    if wf.state in ("cancelled", "completed"):
        await _close(backend, wf)  # again: the call that ended it may have died before
        return
    loaded = await states_of(backend, wf)
    due = _due(wf, loaded)
    if due:
        await _enqueue(backend, wf, due)
        loaded = await states_of(backend, await load(backend, workflow_id))
    states = [loaded[j["id"]].state if j["id"] in loaded else "pending" for j in wf.jobs]
    if wf.type == "batch":
        await _fire_callbacks(backend, wf, states, loaded)
    await _settle(backend, wf, states)
    back = [i for i, one in loaded.items() if one.state not in FAILED]
    await _keep_open(backend, wf, states, back)


def _due(wf: Workflow, loaded: dict[str, Loaded]) -> list[Due]:
    """The jobs to enqueue now, each with the completed step before it in a chain."""
    if wf.type != "chain":
        return [(j, None) for j in wf.jobs if j["id"] not in loaded]
    for index, step in enumerate(wf.jobs):
        if step["id"] in loaded:
            continue
        if index == 0:
            return [(step, None)]
        previous = loaded.get(wf.jobs[index - 1]["id"])
        if previous is not None and previous.state == "completed":
            return [(step, [wf.jobs[index - 1]])]
        return []
    return []


def result_of(loaded: Loaded) -> Any:
    """The result a completed job returned (unmasked: it is handed on, not shown)."""
    if loaded.job is not None:
        return loaded.job.return_value
    return json.loads(loaded.record.get("snapshot") or "{}").get("result")


async def _enqueue(backend: Backend, wf: Workflow, due: list[Due]) -> None:
    """Enqueue the ``due`` jobs (a job whose id is taken is left as it is) and mark them; a
    cancel that came meanwhile cancels them again."""
    subs = []
    for job, parents in due:
        extra = {}
        if parents is not None:
            extra["parent_results"] = await _results(backend, parents)
        subs.append(parse_submission({**job["env"], **extra}))
    await enqueue_all(backend, subs, existing_ok=True)
    record = Keys(backend.prefix).record(wf.id)
    await backend.client.hset(record, mapping={f"enq:{sub.id}": "1" for sub in subs})
    # A cancel writes its marker, then cancels what it finds enqueued; an enqueue adds its
    # job, then looks for the marker: one of the two sees the other.
    if await backend.client.hexists(record, "cancelled_at"):
        for sub in subs:
            with contextlib.suppress(OjsError):
                await cancel(backend, sub.id)


async def _results(backend: Backend, parents: list[dict[str, Any]]) -> list[Any]:
    """The result of each of ``parents``, in order (``None`` for one that did not complete),
    read again: the job read with its state may predate its completion."""
    done: list[Loaded] = []
    for start in range(0, len(parents), READS_AT_ONCE):
        chunk = parents[start : start + READS_AT_ONCE]
        done += await asyncio.gather(*(backend.load_in(p["queue"], p["id"]) for p in chunk))
    return [result_of(d) if d.state == "completed" else None for d in done]


async def _fire_callbacks(
    backend: Backend, wf: Workflow, states: list[str], loaded: dict[str, Loaded]
) -> None:
    """Enqueue each of a batch's callbacks whose condition holds, once, with the results of
    the batch's jobs as its ``parent_results``."""
    terminal = all(s in TERMINAL for s in states)
    holds = {"on_complete": terminal, "on_success": all(s == "completed" for s in states),
             "on_failure": any(s in FAILED for s in states)}  # fmt: skip
    due: list[Due] = [
        (cb, wf.jobs) for trigger, cb in wf.callbacks.items()
        if holds[trigger] and cb["id"] not in loaded
    ]  # fmt: skip
    if due:
        await _enqueue(backend, wf, due)


async def _settle(backend: Backend, wf: Workflow, states: list[str]) -> None:
    """Record the workflow's state from its jobs': ``completed`` when all completed,
    ``failed`` while one ended without completing (a dead letter retried and completed
    takes that back), else ``active``. Each change is made by one caller, which emits its
    event."""
    keys, now = Keys(backend.prefix), backend.now()
    record = keys.record(wf.id)
    if all(s == "completed" for s in states):
        await complete_workflow(backend, wf)
    elif any(s in FAILED for s in states):
        if await backend.client.hsetnx(record, "failed_at", str(now)):
            await _emit(backend, "workflow.failed", wf)
    elif "failed_at" in wf.fields:
        await backend.client.hdel(record, "failed_at")


async def _keep_open(backend: Backend, wf: Workflow, states: list[str], back: list[str]) -> None:
    """Keep the workflow in the open set unless it completed, or failed with none of its jobs
    running (then only a retry moves it on, and that marks it again), and drop the marks of
    the retried jobs ``back`` (seen not discarded: their retry is done). One transaction on
    one key: the workflow is never out of the set while a mark it needs is dropped."""
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


async def complete_workflow(backend: Backend, wf: Workflow) -> bool:
    """End the workflow read as ``wf`` ``completed`` (its jobs all are), unless it ended
    already, a cancel first: whether this call ended it, and then it tells
    ``workflow.completed``."""
    if not await _end(backend, wf.id, "completed_at"):
        return False
    await _close(backend, wf)
    await _emit(backend, "workflow.completed", wf)
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


async def _close(backend: Backend, wf: Workflow) -> None:
    """The workflow is over (completed or cancelled): no longer swept, its record kept as
    long as its jobs' records are."""
    keys = Keys(backend.prefix)
    ids = wf.all_ids()
    async with backend.client.pipeline(transaction=False) as pipe:
        pipe.srem(keys.open, wf.id, *(keys.resuming(wf.id, i) for i in ids))
        pipe.hdel(keys.of, *ids)
        pipe.pexpire(keys.record(wf.id), RECORD_KEEP_MS)
        await pipe.execute()


async def _emit(backend: Backend, kind: str, wf: Workflow) -> None:
    data = {"workflow_id": wf.id, "workflow_type": wf.type, "name": wf.fields.get("name"),
            "job_ids": [j["id"] for j in wf.jobs]}  # fmt: skip
    await backend.records.emit(kind, data)


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
    await _close(backend, wf)
    await _emit(backend, "workflow.cancelled", wf)
    return cancelled


async def job_resuming(backend: Backend, job_id: str) -> None:
    """Mark the workflow job ``job_id`` belongs to, if any, before the job, discarded, is put
    back (a dead letter retried): the upkeep then visits the workflow, failed or not, until an
    advance sees the job back. Call :func:`job_ended` once the job is back."""
    keys = Keys(backend.prefix)
    workflow_id = await backend.client.hget(keys.of, job_id)
    if workflow_id is not None:
        await backend.client.sadd(keys.open, keys.resuming(_text(workflow_id), job_id))


async def job_ended(backend: Backend, job_id: str) -> None:
    """Advance the workflow job ``job_id`` belongs to, if any (the job ended, or is back from
    a retry); a failure is logged, not raised: the server's upkeep advances the workflow
    later."""
    try:
        workflow_id = await backend.client.hget(Keys(backend.prefix).of, job_id)
        if workflow_id is not None:
            await advance(backend, _text(workflow_id))
    except Exception as exc:
        log.warning("workflow of job %s not advanced (the upkeep will): %s", job_id, exc)


async def repair_step(backend: Backend, cursor: int) -> int:
    """Advance about :data:`REPAIR_BATCH` open workflows from ``cursor``; the next cursor
    (0: the walk starts over). A workflow that cannot be advanced is logged and passed over,
    so that it does not hold up the others."""
    keys = Keys(backend.prefix)
    reply: Any = await backend.client.sscan(keys.open, cursor, count=REPAIR_BATCH)
    members: dict[str, list[str]] = {}  # workflow id -> its members seen (itself, its marks)
    for member in map(_text, reply[1]):
        members.setdefault(member.partition(" ")[0], []).append(member)
    for workflow_id, seen in members.items():
        try:
            await advance(backend, workflow_id)
        except OjsError as exc:
            if exc.status == 404:  # its record is gone: nothing to advance any more
                await backend.client.srem(keys.open, *seen)
        except (RedisConnectionError, RedisTimeoutError):
            raise  # Redis away: the upkeep says so once, and tries again
        except Exception as exc:
            log.warning("workflow %s not advanced: %s", workflow_id, exc)
    return int(reply[0])
