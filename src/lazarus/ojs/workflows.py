"""OJS workflows (chain, group, batch) over lazarus jobs: a workflow record lists every job with
the id it was given at creation, and :func:`advance` moves the workflow on from what Redis
holds: it enqueues what is due (idempotently: a job whose id is taken is not added again),
fires a batch's callbacks, and records the workflow's state. ACK calls it at once; the
server's upkeep (:func:`repair_step`) calls it for every open workflow, which puts right a
crash between an ACK and the next enqueue, and moves on workflows whose jobs in-process
lazarus workers ran.

The records and their keys are in :mod:`.workflow_records`; how a workflow ends, and
when the upkeep stops visiting it, in :mod:`.workflow_ends`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from .._codec import text as _text
from .backend import Backend, Loaded
from .envelope import new_id, parse_submission
from .errors import OjsError
from .job_actions import cancel
from .jobs import enqueue_all
from .states import TERMINAL
from .workflow_defs import WorkflowDef, check_schemas
from .workflow_ends import close, complete_workflow, keep_open
from .workflow_records import (
    CLOSED,
    FAILED,
    READS_AT_ONCE,
    Keys,
    Workflow,
    emit,
    load,
    result_of,
    states_of,
)
from .workflow_retention import retire

log = logging.getLogger("lazarus.ojs")

REPAIR_BATCH = 10  # open workflows advanced per step of the upkeep, about
Due = tuple[dict[str, Any], "list[dict[str, Any]] | None"]  # a job to enqueue, and its parents


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
    await emit(backend, "workflow.started", Workflow(workflow_id, fields))
    await advance(backend, workflow_id)
    return workflow_id


async def advance(backend: Backend, workflow_id: str) -> None:
    """Move the workflow on from its jobs' states: enqueue what is due, fire a batch's
    callbacks, record its state. Safe to run twice, or at once in two servers: a job is
    only ever added under the id the workflow gave it."""
    wf = await load(backend, workflow_id)
    if wf.state in ("cancelled", "completed") or CLOSED in wf.fields:
        await close(backend, wf)  # again: the call that ended it may have died before
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
    if await keep_open(backend, wf, states, back):
        await retire(backend, workflow_id)  # over for good, unless a failed job can come back


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
            await emit(backend, "workflow.failed", wf)
    elif "failed_at" in wf.fields:
        await backend.client.hdel(record, "failed_at")


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
