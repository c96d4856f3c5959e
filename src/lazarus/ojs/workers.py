"""FETCH, ACK, NACK and BEAT for remote workers, over the engine's lease scripts.

A fetch claims with ``claim_jobs`` under a fresh worker identity, then sets each job's lease
to its own visibility timeout (``extend_locks``); the lock token is kept in the OJS record,
and ACK / NACK / BEAT present it to the outcome scripts, which refuse a job whose lease moved
on (expired and swept, or claimed by someone else).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from .. import _codec, _scripts
from .._execution import parse_claimed
from ..errors import JobExpiredError
from . import cron_jobs, remote_workers
from .backend import FETCH_MEMO_MS, MEMO_LOCK_MS, Backend, Loaded
from .envelope import DEFAULT_VISIBILITY_MS
from .errors import OjsError
from .states import iso
from .workflows import job_ended

DIRECTIVES = ("running", "quiet", "terminate")
ANONYMOUS = "anonymous"  # the worker id of a fetch that gave none


# Leases a job handed out here may let expire before it fails for good (dead-lettered), whoever
# sweeps it: the server's upkeep, or the stall sweep of a lazarus Worker of the queue, whose own
# max_stalled_count (1 by default) is for the jobs it claims itself. Remote workers' leases are
# short and lapse when this server restarts under them.
MAX_STALLED = 5

# Claims of one fetch, at most: jobs discarded at the fetch (expired, cancelled) make it
# claim again, up to this many times.
FETCH_ROUNDS = 8


async def fetch(
    backend: Backend, queues: list[str], count: int, worker_id: str, visibility_ms: int,
    hostname: str | None = None,
) -> list[dict[str, Any]]:  # fmt: skip
    """Claim up to ``count`` jobs, from the first queue listed that has any. A claimed job that
    must not run (past its ``expires_at``, or cancelled by ``Queue.cancel_job``) is discarded
    at once, as a failed attempt that is not retried, and not handed out. A named worker is
    registered in each queue listed (:mod:`.remote_workers`); one told to be quiet gets no
    jobs."""
    if worker_id != ANONYMOUS:
        await remote_workers.seen(backend, worker_id, queues, asked=count, hostname=hostname)
        if await remote_workers.directive(backend, worker_id) == "quiet":
            return []
    fetched: list[dict[str, Any]] = []
    for name in queues:
        for _ in range(FETCH_ROUNDS):
            if len(fetched) >= count:
                return fetched
            claimed = await _claim(backend, name, count - len(fetched), visibility_ms)
            if not claimed:
                break
            for job_id, token, base, cancelled in claimed:
                view = await _leased(backend, name, job_id, token, base, worker_id,
                                     visibility_ms, cancelled)  # fmt: skip
                if view is not None:
                    fetched.append(view)
    return fetched


async def _claim(
    backend: Backend, name: str, count: int, visibility_ms: int
) -> list[tuple[str, str, str, str | None]]:
    """Claim up to ``count`` jobs of queue ``name``: (job id, token, token base, the reason of
    a cancel request or ``None``) each."""
    keys = backend.keys(name)
    base = backend.new_token_base()
    # No clock offset (''); the memo kept only as long as a re-send needs it.
    reply = await _scripts.load("claim_jobs")(
        backend.client, [*keys.group, keys.reply(base, "fetch")],
        [backend.now(), base, visibility_ms, count, backend.max_events, uuid.uuid4().hex, "",
         min(2 * visibility_ms, FETCH_MEMO_MS), MAX_STALLED],
    )  # fmt: skip
    claimed = [c for c in (parse_claimed(item, name) for item in reply[1:]) if c is not None]
    # A repeatable job's schedule goes on (or skips it: not handed out) as with an in-process
    # worker
    return [(c.job.id, c.token, base, c.cancelled) for c in claimed
            if await cron_jobs.started(backend, name, c)]  # fmt: skip


async def _leased(
    backend: Backend, queue: str, job_id: str, token: str, base: str, worker_id: str,
    default_ms: int, cancelled: str | None,
) -> dict[str, Any] | None:  # fmt: skip
    """Give a claimed job its own visibility timeout and execution deadline; or discard one
    that must not run, and answer ``None``."""
    record = await backend.records.read(queue, job_id)
    if not record:
        await backend.records.adopt(queue, job_id)
    now = backend.now()
    visibility = int(record.get("vis") or default_ms)
    refusal = _refusal(record, cancelled, now)
    if visibility != default_ms and refusal is None:  # a refused job is failed at once
        keys = backend.keys(queue)
        await _scripts.load("extend_locks")(
            backend.client, [keys.leases, keys.job_prefix], [now + visibility, job_id, token]
        )
    await backend.records.update(queue, job_id, {
        "token": token, "token_base": base, "worker_id": worker_id, "lease_ms": visibility,
        "adding": None,  # claimed: its add happened
    })  # fmt: skip
    if refusal is not None:
        from .nack import fail_attempt  # nack builds on this module

        loaded = await backend.load_in(queue, job_id)
        await fail_attempt(backend, loaded, token, base, refusal[0], reason=refusal[1])
        if refusal[1] == "expired":
            created = int(record.get("created_at") or now)
            ttl = int(record["exp"]) - created
            await backend.emit("job.expired", loaded, created_at=iso(created),
                               expired_at=iso(now), ttl_ms=ttl)  # fmt: skip
        return None
    if record.get("timeout"):
        deadline = now + int(record["timeout"])
        await backend.client.zadd(backend.records.timeouts, {f"{queue} {job_id} {token}": deadline})
    loaded = await backend.load_in(queue, job_id)
    await backend.emit("job.started", loaded, attempt=loaded.view()["attempt"], worker_id=worker_id)
    return loaded.view()


def _refusal(
    record: dict[str, str], cancelled: str | None, now: int
) -> tuple[dict[str, Any], str] | None:
    """The error of a claimed job that must not run, and its dead letter reason; else
    ``None``."""
    if cancelled is not None:
        error = {"code": "cancelled", "type": "JobCancelledError", "message": cancelled,
                 "retryable": False}  # fmt: skip
        return error, "cancelled"
    expires = record.get("exp")
    if expires is not None and now >= int(expires):
        message = str(JobExpiredError.claimed_late(int(expires), now))
        error = {"code": "expired", "type": "JobExpiredError", "message": message,
                 "retryable": False}  # fmt: skip
        return error, "expired"
    return None


async def held(backend: Backend, job_id: str, worker_id: object = None) -> tuple[Loaded, str, str]:
    """The job, and the lock token and worker identity of its remote lease; 409 unless the
    job is active under a lease a fetch handed out (to ``worker_id``, when both name one:
    a worker whose lease expired and went to another cannot report on the job)."""
    loaded = await backend.load(job_id)
    token, base = loaded.record.get("token"), loaded.record.get("token_base")
    if loaded.state != "active" or not token or not base:
        raise OjsError(409, "conflict", f"job {job_id!r} is {loaded.state}, not active")
    holder = loaded.record.get("worker_id")
    if worker_id and holder and holder != ANONYMOUS and worker_id != holder:
        raise OjsError(409, "conflict", f"job {job_id!r} is held by another worker now")
    return loaded, token, base


def refused(reply: list[Any], job_id: str) -> None:
    """409 when an outcome script refused the call (the job left the lease meanwhile)."""
    if int(reply[0]) != 0:
        raise OjsError(409, "conflict", f"job {job_id!r} is no longer held by this lease")


async def ack(
    backend: Backend, job_id: str, result: Any, worker_id: object = None
) -> dict[str, Any]:
    """Complete the job with ``result``."""
    loaded, token, base = await held(backend, job_id, worker_id)
    keys, now = backend.keys(loaded.queue), backend.now()
    value = _codec.encode(result, field="result")
    policy = loaded.job.opts.keep_completed.args() if loaded.job else [-1, -1, 0]
    reply = await _scripts.load("complete_job")(
        backend.client,
        [*keys.group, keys.job(job_id), keys.completed, backend.memo(loaded.queue, base, job_id)],
        [job_id, token, now, value, *policy, backend.max_events, 0, base, MEMO_LOCK_MS],
    )  # fmt: skip
    refused(reply, job_id)
    attempt = loaded.job.attempts_started if loaded.job else 0
    started = loaded.job.processed_on if loaded.job and loaded.job.processed_on else now
    await backend.finish_record(loaded, "completed", completed_at=now, result=result)
    await backend.emit("job.completed", loaded, attempt=attempt, duration_ms=now - started)
    await job_ended(backend, job_id)  # the next step of its workflow, if any
    return {"acknowledged": True, "id": job_id, "state": "completed",
            "completed_at": iso(now), "attempt": attempt,
            "job": (await backend.load_in(loaded.queue, job_id)).view()}  # fmt: skip


async def heartbeat(
    backend: Backend, worker_id: str, job_ids: list[str], visibility_ms: int | None,
    hostname: str | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Extend the leases of the worker's active jobs; answer with the worker's directive:
    ``quiet`` when the admin said so, or one of them belongs to a paused queue, else
    ``running``. A named worker is registered in the queues of its jobs."""
    directive, extended, queues = "running", [], []
    for job_id in job_ids:
        queue = await backend.records.queue_of(job_id)
        if queue is None:
            continue
        if queue not in queues:
            queues.append(queue)
        record = await backend.records.read(queue, job_id)
        token = record.get("token")
        if token:
            keys = backend.keys(queue)
            lease = visibility_ms or int(record.get("lease_ms") or DEFAULT_VISIBILITY_MS)
            lost, *_ = await _scripts.load("extend_locks")(
                backend.client, [keys.leases, keys.job_prefix],
                [backend.now() + lease, job_id, token],
            )  # fmt: skip
            if not lost:
                extended.append(job_id)
        if await backend.queue(queue).is_paused():
            directive = _stronger(directive, "quiet")  # finish the job, fetch no more here
        directive = _stronger(directive, _test_directive(backend, record))
    if worker_id != ANONYMOUS:
        await remote_workers.seen(backend, worker_id, queues, jobs=job_ids, hostname=hostname)
        told = await remote_workers.directive(backend, worker_id)
        directive = _stronger(directive, told or "running")
    return {"state": directive, "directive": directive, "jobs_extended": extended,
            "server_time": iso(backend.now())}  # fmt: skip


def _test_directive(backend: Backend, record: dict[str, str]) -> str:
    """The directive a job asks for in ``options.metadata.test_directive``: only with the
    server's test hooks on, for conformance tests of the worker protocol."""
    if not backend.test_hooks:
        return "running"
    options = json.loads(record.get("env") or "{}").get("options") or {}
    metadata = options.get("metadata") if isinstance(options, dict) else None
    value = metadata.get("test_directive") if isinstance(metadata, dict) else None
    return value if value in DIRECTIVES else "running"


def _stronger(a: str, b: str) -> str:
    return a if DIRECTIVES.index(a) >= DIRECTIVES.index(b) else b
