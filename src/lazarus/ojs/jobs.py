"""PUSH (one job or a batch), INFO and CANCEL: jobs enter lazarus queues, are read back as
OJS sees them, or are cancelled (removed from the engine, their last view kept in the OJS
record)."""

from __future__ import annotations

import contextlib
import json
import logging
from datetime import datetime, timezone
from typing import Any

from ..job import Job
from ..job_options import MAX_DURATION_MS
from .backend import Backend, Loaded
from .envelope import Submission, invalid, parse_submission
from .errors import OjsError
from .records import orphan, stored
from .states import iso

log = logging.getLogger("lazarus.ojs")

MAX_BATCH = 1000
"""The most jobs one batch PUSH takes (the spec asks for at least 1,000): the batch is checked
and written in one request, so its size bounds that request's work."""
# An expiry closer than this to the job's due time is left to the fetch: the engine refuses
# one that comes before the job is due by its own clock, a few milliseconds on.
ENGINE_EXPIRY_MARGIN = 1_000
# The attempt's "stack trace" (a JSON string): a cancel has none but its reason.
STACK = json.dumps("cancelled over OJS")


def engine_priority(ojs_priority: int) -> int:
    """lazarus's priority for OJS's: every OJS job is prioritized (1 is lazarus's highest),
    so OJS 100 -> 1, 0 -> 101, -100 -> 201, first in first out within one priority."""
    return 101 - ojs_priority


async def enqueue(backend: Backend, sub: Submission) -> tuple[dict[str, Any], bool]:
    """PUSH: add one job, and say whether it was added. A 409 ``duplicate`` when its id is
    taken, or its unique key held (``on_conflict`` ``reject``, or ``replace`` of a holder that
    is not replaceable); with ``use_existing`` the holder's view instead, not added."""
    replaced = None
    if sub.unique is not None:
        holder = await _holder(backend, sub)
        if holder is not None and sub.unique.on_conflict != "replace":
            return await _conflict(backend, sub, holder), False
        if holder is not None:  # the engine replaces it if it never ran and is delayed
            replaced = await backend.load_in(sub.queue, holder)
            if replaced.state not in ("scheduled", "pending"):
                replaced = None
    try:
        (view,) = await enqueue_all(backend, [sub])
    except OjsError as exc:  # taken since the look above: the engine's check is the one that
        taken_by = (exc.details or {}).get("existing_job_id")  # holds
        if sub.unique is None or exc.code != "duplicate" or taken_by in (None, sub.id):
            raise
        return await _conflict(backend, sub, str(taken_by)), False
    if replaced is not None and await backend.queue(sub.queue).get_job(replaced.id) is None:
        await backend.finish_record(replaced, "cancelled", cancelled_at=backend.now())
        await backend.emit("job.cancelled", replaced, replaced_by=sub.id)
    return view, True


async def _holder(backend: Backend, sub: Submission) -> str | None:
    """The id of the job that holds ``sub``'s unique key in its queue, if any."""
    key = sub.unique_key
    assert key is not None
    return await backend.queue(sub.queue).get_deduplication_job_id(key)


async def _conflict(backend: Backend, sub: Submission, holder: str) -> dict[str, Any]:
    """The holder's view (``use_existing``), else the 409 ``duplicate`` naming it."""
    loaded = await backend.load_in(sub.queue, holder)
    assert sub.unique is not None
    if sub.unique.on_conflict == "use_existing":
        return loaded.view()
    raise _held(sub, holder, loaded.state, None)


def _held(sub: Submission, holder: str, state: str | None, index: int | None) -> OjsError:
    """409 ``duplicate``: ``sub``'s unique key is held by job ``holder``."""
    details = {"existing_job_id": holder, "unique_key": sub.unique_key}
    if state is not None:
        details["existing_state"] = state
    error = OjsError(409, "duplicate", f"job {holder!r} holds the unique key of this job "
                     f"({sub.unique_key}) in queue {sub.queue!r}", details=details)  # fmt: skip
    return error if index is None else at_index(error, index)


def parse_batch(body: Any) -> list[Submission]:
    """Validate a batch PUSH body: ``jobs``, at most :data:`MAX_BATCH` of them, each checked by
    the parser of a single PUSH. The first bad job's error names its index and field."""
    if not isinstance(body, dict):
        raise invalid("the request body must be a JSON object with a 'jobs' array", field="jobs")
    jobs = body.get("jobs")
    if not isinstance(jobs, list) or not jobs:
        raise invalid("jobs must be a non-empty array of jobs", field="jobs")
    if len(jobs) > MAX_BATCH:
        raise invalid(f"jobs holds {len(jobs)} jobs, over the limit of {MAX_BATCH} per batch",
                      field="jobs")  # fmt: skip
    subs: list[Submission] = []
    seen: dict[str, int] = {}
    for index, job in enumerate(jobs):
        if not isinstance(job, dict):
            raise at_index(invalid("a job must be a JSON object"), index)
        try:
            sub = parse_submission(job)
        except OjsError as exc:
            raise at_index(exc, index) from None
        if sub.id in seen:
            raise at_index(invalid(f"id {sub.id!r} is that of jobs[{seen[sub.id]}] too",
                                   field="id"), index)  # fmt: skip
        seen[sub.id] = index
        subs.append(sub)
    return subs


def at_index(error: OjsError, index: int) -> OjsError:
    """``error`` about the job at ``index`` of a batch: its message and details say which."""
    details = {**(error.details or {}), "index": index}
    return OjsError(error.status, error.code, f"jobs[{index}]: {error.message}",
                    retryable=error.retryable, details=details)  # fmt: skip


async def enqueue_all(
    backend: Backend, subs: list[Submission], *, batch: bool = False, existing_ok: bool = False
) -> list[dict[str, Any]]:
    """Add the jobs, all or none: a taken id is a 409 ``duplicate`` before anything is written
    (naming the job's index in a ``batch``). Each job's OJS record is written first, which
    claims its id; if a claim or an add fails, what was written is taken back.

    With ``existing_ok`` (a workflow's jobs, whose ids are chosen ahead) a job whose id is
    taken is left out instead, so that enqueueing it again adds nothing; the answer holds the
    jobs added."""
    # Each job's args against its schema; a workflow's jobs were checked when it was created.
    failed = None if existing_ok else await backend.schemas.first_failure(subs)
    if failed is not None:
        raise at_index(failed[1], failed[0]) if batch else failed[1]
    now = backend.now()
    if existing_ok:
        taken_ids = set(await _taken(backend, subs))
        subs = [sub for index, sub in enumerate(subs) if index not in taken_ids]
        if not subs:
            return []
    else:
        await _check_free(backend, subs, batch)
    records = backend.records
    fields = [_record(sub, now) for sub in subs]
    taken = await records.create_all(
        [(s.queue, s.id, f) for s, f in zip(subs, fields)], adding=True
    )
    if taken and existing_ok:  # claimed by another enqueue of the same jobs: theirs to add
        subs = [sub for index, sub in enumerate(subs) if index not in taken]
        fields = [f for index, f in enumerate(fields) if index not in taken]
        if not subs:
            return []
    elif taken:  # by another enqueue, since the check
        for index in sorted(set(range(len(subs))).difference(taken)):
            await records.forget(subs[index].queue, subs[index].id)
        raise _duplicate(subs[taken[0]], taken[0] if batch else None)
    added = await _add_or_take_back(backend, subs, now, batch=batch, unique=not existing_ok)
    # Each job as it was written (the engine's job as add_bulk answers it, the record as
    # written): its state at enqueue, even if a worker has claimed it since.
    loaded = [
        Loaded(sub.queue, sub.id, job, "delayed" if job.opts.delay else "waiting", stored(f))
        for sub, job, f in zip(subs, added, fields, strict=True)
    ]
    unique = [{} if s.unique_key is None else {"unique_key": s.unique_key} for s in subs]
    await backend.emit_all("job.enqueued", loaded, each=unique)
    for sub, one in zip(subs, loaded, strict=True):
        if one.state == "scheduled" and sub.delay_until_ms is not None:
            await backend.emit("job.scheduled", one, scheduled_at=iso(sub.delay_until_ms))
    return [one.view() for one in loaded]


async def finish_orphans(backend: Backend, orphans: list[tuple[str, str]]) -> None:
    """Add the job of each orphan record ``(queue, id)`` (its server died between writing it
    and adding the job) as its PUSH sent it, under its id, with the checks of a PUSH; one
    that is no orphan any more (added meanwhile) is left as it is. A job that cannot be added
    (its unique key held by another, say) is logged, and its record expires with time."""
    for queue, job_id in orphans:
        record = await backend.records.read(queue, job_id)
        if not orphan(record.get("adding"), record.get("state"), backend.now()):
            continue  # added meanwhile, or its record gone
        try:
            sub = parse_submission({**json.loads(record.get("env") or "{}"), "id": job_id})
            await enqueue_all(backend, [sub])
        except OjsError as exc:
            log.warning("the job %s of an orphan record was not added: %s", job_id, exc.message)


def _record(sub: Submission, now: int) -> dict[str, Any]:
    fields = {
        "env": sub.envelope, "policy": sub.policy.to_json(), "created_at": now,
        "enqueued_at": now,
    }  # fmt: skip
    if sub.visibility_ms is not None:
        fields["vis"] = sub.visibility_ms
    if sub.timeout_ms is not None:
        fields["timeout"] = sub.timeout_ms
    if sub.expires_at_ms is not None:
        fields["exp"] = sub.expires_at_ms
    if sub.pending:  # held in the engine as delayed "for ever" until ACTIVATE
        fields["pending"] = 1
        if sub.delay_until_ms is not None:
            fields["due"] = sub.delay_until_ms
    return fields


def _duplicate(sub: Submission, index: int | None) -> OjsError:
    error = OjsError(409, "duplicate", f"a job with id {sub.id!r} exists already",
                     details={"existing_job_id": sub.id})  # fmt: skip
    return error if index is None else at_index(error, index)


async def _check_free(backend: Backend, subs: list[Submission], batch: bool) -> None:
    """409 ``duplicate`` for the first job whose id OJS knows, or its queue holds (a job
    lazarus itself added), in one round trip."""
    taken = await _taken(backend, subs)
    if taken:
        raise _duplicate(subs[taken[0]], taken[0] if batch else None)
    if batch:
        await _check_unique(backend, subs)


async def _add_or_take_back(
    backend: Backend, subs: list[Submission], now: int, *, batch: bool, unique: bool
) -> list[Job]:
    """:func:`_add`, all or none: when an add fails, or the engine finds a job's unique key
    held (the add answered the holder, and added nothing for it), the jobs added are taken
    back, and the error raised (409 ``duplicate`` naming the holder)."""
    try:
        added = await _add(backend, subs, now, batch=batch, unique=unique)
    except BaseException:
        await _take_back(backend, subs)
        raise
    for index, (sub, job) in enumerate(zip(subs, added, strict=True)):
        if job.id != sub.id:
            await _take_back(backend, subs)
            raise _held(sub, job.id, None, index if batch else None)
    return added


async def _check_unique(backend: Backend, subs: list[Submission]) -> None:
    """409 ``duplicate`` for the first job of a batch whose unique key is held, by a job of its
    queue or by a job before it in the batch, whatever its ``on_conflict``: a batch is added
    whole or not at all. One round trip; the engine checks again as it adds."""
    unique = [(index, sub) for index, sub in enumerate(subs) if sub.unique_key is not None]
    seen: dict[tuple[str, str | None], int] = {}
    for index, sub in unique:
        first = seen.setdefault((sub.queue, sub.unique_key), index)
        if first != index:
            raise at_index(OjsError(409, "duplicate", f"its unique key ({sub.unique_key}) is "
                                    f"that of jobs[{first}] in queue {sub.queue!r} too",
                                    details={"unique_key": sub.unique_key,
                                             "conflicting_index": first}), index)  # fmt: skip
    if not unique:
        return
    async with backend.client.pipeline(transaction=False) as pipe:
        for _, sub in unique:
            pipe.get(backend.keys(sub.queue).dedup(str(sub.unique_key)))
        holders = await pipe.execute()
    for (index, sub), holder in zip(unique, holders, strict=True):
        if holder is not None:
            holder_id = holder.decode() if isinstance(holder, bytes) else str(holder)
            raise _held(sub, holder_id, None, index)


async def _taken(backend: Backend, subs: list[Submission]) -> list[int]:
    """The positions of the jobs whose id OJS knows, or their queue holds, in one round trip
    (two when OJS knows an id its queue does not hold: an orphan record holds no id,
    :func:`.records.orphan`)."""
    records = backend.records
    async with backend.client.pipeline(transaction=False) as pipe:
        for sub in subs:
            pipe.hexists(records.index, sub.id)
            pipe.exists(backend.keys(sub.queue).job(sub.id))
        found = await pipe.execute()
    taken = [index for index in range(len(subs)) if found[2 * index] or found[2 * index + 1]]
    unheld = [index for index in taken if not found[2 * index + 1]]
    if not unheld:
        return taken
    async with backend.client.pipeline(transaction=False) as pipe:
        for index in unheld:
            pipe.hmget(records.key(subs[index].queue, subs[index].id), ["adding", "state"])
        marks = await pipe.execute()
    now = backend.now()
    orphans = {
        i for i, (adding, state) in zip(unheld, marks, strict=True) if orphan(adding, state, now)
    }
    return [index for index in taken if index not in orphans]


async def _add(
    backend: Backend, subs: list[Submission], now: int, *, batch: bool = False,
    unique: bool = True,
) -> list[Job]:  # fmt: skip
    """Add the jobs to their queues with ``Queue.add_bulk``, one call per queue; the jobs as
    written, in the order of ``subs`` (where a unique key was held, the holder). Each job's
    add clears its record's ``adding`` mark in the same script call: a record whose job was
    added is never taken for an orphan, even once the job has run and been deleted."""
    by_queue: dict[str, list[int]] = {}
    specs: list[dict[str, Any]] = []
    for index, sub in enumerate(subs):
        policy = sub.policy
        delay = 0 if sub.delay_until_ms is None else max(sub.delay_until_ms - now, 0)
        if sub.pending:
            delay = MAX_DURATION_MS
        # The engine's expiry too (in-process workers honour it, and it shows as the job's),
        # when the job can start a while before it; a fetch checks the record's either way.
        expires_at = None
        if sub.expires_at_ms is not None and sub.expires_at_ms - now > delay + ENGINE_EXPIRY_MARGIN:
            expires_at = datetime.fromtimestamp(sub.expires_at_ms / 1000, timezone.utc)
        specs.append({
            "name": sub.type, "data": sub.args, "job_id": sub.id,
            "attempts": max(policy.max_attempts, 1),
            "backoff": {"type": "exponential", "delay": policy.initial_interval_ms},
            "delay": delay, "priority": engine_priority(sub.priority), "timeout": sub.timeout_ms,
            "expires_at": expires_at,
        })  # fmt: skip
        if sub.unique is not None and unique:
            specs[-1]["deduplication"] = sub.unique.deduplication(sub.type, sub.args, batch=batch)
        by_queue.setdefault(sub.queue, []).append(index)
    added: dict[int, Job] = {}
    for name, indexes in by_queue.items():
        marks = [backend.records.key(name, subs[i].id) for i in indexes]
        jobs = await backend.queue(name)._add_bulk_unmarking(
            [specs[i] for i in indexes], "adding", marks
        )
        added.update(zip(indexes, jobs, strict=True))
    return [added[i] for i in range(len(subs))]


async def _take_back(backend: Backend, subs: list[Submission]) -> None:
    """Undo the writes of an enqueue that failed partway, as far as Redis lets: remove the
    jobs that went in, and forget the records of those it does not hold. A job a worker
    claimed meanwhile stays, with its record, and so does whatever Redis did not let us
    reach."""
    for sub in subs:
        queue = backend.queue(sub.queue)
        with contextlib.suppress(Exception):  # JobNotFoundError: never added; JobStateError:
            await queue.remove(sub.id)  # claimed meanwhile, it runs
        with contextlib.suppress(Exception):
            if await queue.get_job(sub.id) is None:
                await backend.records.forget(sub.queue, sub.id)
