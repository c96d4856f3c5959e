"""The admin API's writes over many jobs (ojs-admin-api 6.5, 7.4, 8): bulk retry, cancel and
delete by a filter of queue and state, and the purge of a queue's ended jobs, each behind
``"confirm": true``.

A request acts on at most :data:`BULK_LIMIT` jobs (the first of its selection, as the job list
walks them; for a retry or delete of ``discarded`` jobs, then the dead letters they became,
oldest first) and says whether more are left (``has_more``): a caller repeats it until none
are. Each job is acted on by lazarus's own operation (``Queue.retry_job``, the OJS CANCEL,
``Queue.remove``, ``Queue.clean``), so one that changed meanwhile is refused alone, named in
``errors``, and the others go on.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from redis.exceptions import WatchError

from .._codec import text
from ..dead_letter import DeadLetterFilter
from ..errors import JobNotFoundError, JobStateError
from ..queue import CleanState
from .admin_jobs import Source, select
from .backend import Backend
from .dead_letters import DeadLetters
from .envelope import invalid, parse_time, queue_name
from .errors import OjsError
from .job_actions import cancel_loaded
from .queue_routes import queue_names
from .workflow_ends import job_not_resuming, job_resuming
from .workflows import job_ended

BULK_LIMIT = 1000
"""The most jobs one bulk request or purge acts on."""
# action -> (the states it may select, those it selects without a filter.state)
ACTIONS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "retry": (("discarded",), ("discarded",)),
    "cancel": (("available", "scheduled", "retryable", "pending", "active"),) * 2,
    "delete": (("completed", "discarded", "cancelled"), ("completed", "discarded")),
}
PURGED: dict[str, CleanState | None] = {
    "completed": "completed", "discarded": "failed", "cancelled": None,
}  # fmt: skip
"""The OJS states a purge takes, and the lazarus state ``Queue.clean`` removes for each (a
cancelled job has left its queue already)."""


@dataclasses.dataclass(frozen=True)
class BulkFilter:
    """The jobs a bulk request acts on: of one queue (else of every one), in these states."""

    queue: str | None
    states: frozenset[str]


def confirmed(body: Any, fields: tuple[str, ...]) -> dict[str, Any]:
    """``body`` if it is an object of ``fields`` only, with ``"confirm": true``; else a 400
    naming the field."""
    if not isinstance(body, dict):
        raise invalid("the request body must be a JSON object", field=fields[0])
    for field in body:
        if field not in fields:
            raise invalid(f"{field}: unknown field; this request takes {', '.join(fields)}",
                          field=field)  # fmt: skip
    if body.get("confirm") is not True:
        raise invalid("confirm must be true: this request changes or deletes jobs for good",
                      field="confirm")  # fmt: skip
    return body


def parse_bulk(action: str, body: Any) -> BulkFilter:
    """The filter of a bulk request's body ``{"filter": {"queue", "state"}, "confirm": true}``."""
    allowed, default = ACTIONS[action]
    flt = confirmed(body, ("filter", "confirm")).get("filter")
    if not isinstance(flt, dict):
        raise invalid('filter must be an object: {"queue", "state"}', field="filter")
    for field in flt:
        if field not in ("queue", "state"):
            raise invalid(f"filter.{field}: lazarus selects jobs by queue and state only",
                          field=f"filter.{field}")  # fmt: skip
    queue = None if flt.get("queue") is None else queue_name(flt["queue"], "filter.queue")
    state = flt.get("state")
    if state is not None and state not in allowed:
        raise invalid(f"filter.state must be one of {', '.join(allowed)} for a bulk {action}, "
                      f"got {state!r}", field="filter.state")  # fmt: skip
    return BulkFilter(queue, frozenset(default if state is None else (state,)))


async def bulk(backend: Backend, dead: DeadLetters, action: str, flt: BulkFilter) -> dict[str, Any]:
    """Act on up to :data:`BULK_LIMIT` jobs the filter selects; the summary of it."""
    names = [flt.queue] if flt.queue else await queue_names(backend, dead.view)
    selection = await select(backend, names, flt.states)
    picked = await selection.pick(backend, 0, BULK_LIMIT)
    errors: list[dict[str, Any]] = []
    for source, job_id in picked:
        try:
            await _ACT[action](backend, source, job_id)
        except (OjsError, JobNotFoundError, JobStateError) as exc:
            message = exc.message if isinstance(exc, OjsError) else str(exc)
            errors.append({"job_id": job_id, "queue": source.queue, "error": message})
    matched, more = len(picked), selection.total > len(picked) or not selection.exact
    if action != "cancel" and "discarded" in flt.states:  # and the dead letters they became
        letters = DeadLetterFilter(source_queue=flt.queue)
        if matched < BULK_LIMIT:
            done, left = await _letters(dead, action, letters, BULK_LIMIT - matched, errors)
            matched, more = matched + done, more or left
        else:
            more = more or await dead.view.count(letters) > 0
    return {"action": action, "matched": matched, "succeeded": matched - len(errors),
            "failed": len(errors), "errors": errors, "has_more": more}  # fmt: skip


async def _letters(
    dead: DeadLetters, action: str, letters: DeadLetterFilter, limit: int,
    errors: list[dict[str, Any]],
) -> tuple[int, bool]:  # fmt: skip
    """Retry or delete up to ``limit`` dead letters, oldest first, adding what failed to
    ``errors``: how many were matched, and whether more are left."""
    page = await dead.view.search(letters, limit=limit, order="oldest")
    for letter in page.jobs:
        meta = letter.dead_letter
        job_id = meta.original_job_id if meta and meta.original_job_id else letter.id
        try:
            await (dead.retry_letter if action == "retry" else dead.delete_letter)(letter)
        except (OjsError, JobNotFoundError) as exc:
            message = exc.message if isinstance(exc, OjsError) else str(exc)
            queue = meta.source_queue if meta else letter.queue_name
            errors.append({"job_id": job_id, "queue": queue, "error": message})
    return len(page.jobs), page.next_cursor is not None


async def retry_failed(backend: Backend, queue: str, job_id: str) -> None:
    """Put a job that failed for good back in its queue, attempts reset
    (``Queue.retry_job``); its OJS state is the engine's again."""
    await _fresh_attempts(backend, queue, job_id)
    mark = await job_resuming(backend, job_id)  # before the job is back: see workflows
    try:
        await backend.queue(queue).retry_job(job_id)
    except (JobStateError, JobNotFoundError):  # refused: nothing was put back
        await job_not_resuming(backend, mark)
        raise
    if await backend.records.queue_of(job_id) == queue:
        await backend.reopen_record(queue, job_id)
        await backend.emit("job.retried", await backend.load_in(queue, job_id))
        await job_ended(backend, job_id)  # its workflow, failed, goes on


async def retry_one(backend: Backend, dead: DeadLetters, job_id: str) -> dict[str, Any]:
    """Retry a discarded job under its own id, attempts reset, whether it failed for good in
    its queue or became a dead letter; 409 for a job in another state. Its view after."""
    loaded = await backend.load(job_id)
    if loaded.engine_state == "failed":
        await retry_failed(backend, loaded.queue, job_id)
        return (await backend.load_in(loaded.queue, job_id)).view()
    if loaded.job is None and loaded.state == "discarded":
        return await dead.retry(job_id)
    message = f"job {job_id!r} is {loaded.state}; only a discarded job can be retried"
    raise OjsError(409, "conflict", message)


async def _fresh_attempts(backend: Backend, queue: str, job_id: str) -> None:
    """Forget how many attempts a job that failed for good started, while it is still in
    ``failed``, where nothing claims it (the transaction fails if the job changes meanwhile):
    ``Queue.retry_job`` gives it its attempts afresh but keeps that count, from which OJS
    numbers a job's attempts, and the spec resets the job's attempt counter."""
    keys = backend.keys(queue)
    async with backend.client.pipeline(transaction=True) as pipe:
        for _ in range(3):
            try:
                await pipe.watch(keys.job(job_id))
                if await pipe.zscore(keys.failed, job_id) is None:
                    return  # not failed (or gone): Queue.retry_job refuses it, saying why
                pipe.multi()  # type: ignore[no-untyped-call]
                pipe.hdel(keys.job(job_id), "ats")
                await pipe.execute()
                return
            except WatchError:
                continue
    raise OjsError(409, "conflict", f"job {job_id!r} keeps changing; try again")


async def cancel_in(backend: Backend, queue: str, job_id: str) -> None:
    """The OJS CANCEL of a job of ``queue``, indexing it first if lazarus added it: its OJS
    record keeps its view as ``cancelled``."""
    owner = await backend.records.queue_of(job_id)
    if owner is None:
        await backend.records.adopt(queue, job_id)
        owner = await backend.records.queue_of(job_id)
    if owner != queue:
        raise OjsError(409, "conflict", f"id {job_id!r} is that of an OJS job of {owner!r}")
    loaded = await backend.load_in(queue, job_id)
    if loaded.job is None:
        raise OjsError(404, "not_found", f"job {job_id!r} is gone")
    await cancel_loaded(backend, loaded)


async def _retry(backend: Backend, source: Source, job_id: str) -> None:
    await retry_failed(backend, source.queue, job_id)


async def _cancel(backend: Backend, source: Source, job_id: str) -> None:
    await cancel_in(backend, source.queue, job_id)


async def _delete(backend: Backend, source: Source, job_id: str) -> None:
    """Remove an ended job for good, and its OJS record."""
    queue = backend.queue(source.queue)
    if await queue.get_job_state(job_id) != source.engine_state:
        raise JobStateError(f"job {job_id!r} changed state meanwhile; it was not deleted")
    await queue.remove(job_id)
    await forget(backend, source.queue, [job_id])


_ACT = {"retry": _retry, "cancel": _cancel, "delete": _delete}


async def forget(backend: Backend, queue: str, ids: list[str]) -> None:
    """Delete the OJS records of jobs of ``queue`` that were removed for good, and their index
    entries, in two round trips (a job OJS never knew has none)."""
    if not ids:
        return
    owners = await backend.client.hmget(backend.records.index, ids)
    mine = [i for i, owner in zip(ids, owners, strict=True) if owner and text(owner) == queue]
    if mine:
        async with backend.client.pipeline(transaction=False) as pipe:
            for job_id in mine:
                pipe.delete(backend.records.key(queue, job_id))
            pipe.hdel(backend.records.index, *mine)
            await pipe.execute()


def parse_purge(body: Any, now: int) -> tuple[list[str], int]:
    """The states and the cutoff (ms) of a purge's body ``{"states", "older_than", "confirm"}``."""
    body = confirmed(body, ("states", "older_than", "confirm"))
    states = body.get("states")
    if (not isinstance(states, list) or not states
            or not all(isinstance(s, str) and s in PURGED for s in states)):  # fmt: skip
        raise invalid(f"states must be a non-empty array of {', '.join(PURGED)}: a purge "
                      "removes ended jobs (cancel the others first)", field="states")  # fmt: skip
    cutoff = now
    if body.get("older_than") is not None:
        cutoff = min(parse_time(body["older_than"], "older_than"), now)
    return list(dict.fromkeys(states)), cutoff


async def purge(backend: Backend, queue: str, states: list[str], cutoff: int) -> dict[str, Any]:
    """Remove up to :data:`BULK_LIMIT` of the queue's jobs that ended in ``states`` before
    ``cutoff`` (``Queue.clean``), with their OJS records."""
    engine = backend.queue(queue)
    purged: list[str] = []
    more = False
    for state in states:
        lazarus_state = PURGED[state]
        if lazarus_state is None:
            continue
        if len(purged) < BULK_LIMIT:
            removed = await engine.clean(
                max(backend.now() - cutoff, 0), BULK_LIMIT - len(purged), lazarus_state
            )
            await forget(backend, queue, removed)
            purged += removed
        ended = engine.keys.completed if lazarus_state == "completed" else engine.keys.failed
        more = more or await backend.client.zcount(ended, "-inf", cutoff) > 0
    return {"purged_count": len(purged), "states": states, "has_more": more}
