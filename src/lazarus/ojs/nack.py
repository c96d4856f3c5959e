"""NACK: a failed attempt, decided by the job's OJS retry policy in Python and carried out by
one engine script: ``retry_job`` (after the computed delay), ``fail_job`` (discard) or
``dead_letter_job`` (into the server's dead letter queue; on Redis Cluster, with the dead
letter queue in another slot, a move in steps, :func:`lazarus._moves.dead_letter`), or
``release_job`` for a worker that hands a job back unrun (``requeue``)."""

from __future__ import annotations

import contextlib
import json
from typing import Any

from .. import _moves, _scripts
from .._keys import new_dead_letter_id
from .backend import MEMO_LOCK_MS, Backend, Loaded
from .errors import OjsError
from .retry import Decision, decide, parse_policy
from .states import iso
from .workers import held, refused
from .workflows import job_ended

# Seconds a dead letter's move into another cluster slot may take before the NACK answers;
# past them the server's upkeep finishes it (_moves.sweep).
MOVE_WITHIN = 5.0


def error_entry(error: Any, attempt: int, now: int) -> dict[str, Any]:
    """The error history entry of a NACK's ``error`` object."""
    if not isinstance(error, dict):
        error = {"message": str(error) if error is not None else "failed"}
    details = error.get("details")
    error_class = details.get("error_class") if isinstance(details, dict) else None
    code = str(error.get("code") or "handler_error")
    entry: dict[str, Any] = {
        "code": code,
        "type": str(error.get("type") or error_class or code),
        "message": str(error.get("message") or "failed"),
        "retryable": error.get("retryable", True) is not False,
        "attempt": attempt,
        "occurred_at": iso(now),
    }
    if isinstance(details, dict):
        entry["details"] = details
    return entry


async def nack(
    backend: Backend, job_id: str, error: Any, requeue: bool, worker_id: object = None
) -> dict[str, Any]:
    """Fail the job's attempt (or hand it back with ``requeue``)."""
    loaded, token, base = await held(backend, job_id, worker_id)
    if requeue:
        keys = backend.keys(loaded.queue)
        code = await _scripts.load("release_job")(
            backend.client, list(keys.group), [job_id, token, backend.max_events]
        )
        refused([code], job_id)
        await backend.records.update(loaded.queue, job_id, {"token": None, "token_base": None})
        return {"id": job_id, "state": "available", "attempt": _attempt(loaded)}
    return await fail_attempt(backend, loaded, token, base, error)


def _attempt(loaded: Loaded) -> int:
    return loaded.job.attempts_started if loaded.job else 0


async def fail_attempt(
    backend: Backend, loaded: Loaded, token: str, base: str, error: Any,
    reason: str | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Record a failed attempt and act on the retry policy's decision; a discarded job's dead
    letter gets ``reason``, else the reason the decision implies."""
    now, attempt = backend.now(), _attempt(loaded)
    entry = error_entry(error, attempt, now)
    policy = parse_policy(loaded.policy or None)
    decision = decide(policy, attempt, entry["type"], entry["retryable"])
    await backend.records.add_error(loaded.queue, loaded.id, entry)
    failure = _failure(loaded, entry, base, now)
    if decision.kind == "retry":
        await _retry(backend, loaded, token, base, failure, decision, now)
        await backend.emit("job.retrying", loaded, attempt=attempt, delay_ms=decision.delay_ms)
        state = "retryable"
    else:
        if reason is None:
            reason = "attempts_exhausted" if attempt >= policy.max_attempts else "unrecoverable"
        await _end(backend, loaded, token, base, failure, decision, now, reason)
        await backend.emit("job.discarded", loaded, attempt=attempt,
                           dead_lettered=decision.kind == "dead_letter")  # fmt: skip
        await job_ended(backend, loaded.id)  # its workflow fails, a batch's callbacks fire
        state = "discarded"
    view = (await backend.load_in(loaded.queue, loaded.id)).view()
    reply = {"id": loaded.id, "state": state, "attempt": attempt,
             "max_attempts": policy.max_attempts, "job": view}  # fmt: skip
    if decision.kind == "retry":
        reply["retry_delay_ms"] = decision.delay_ms
        reply["next_attempt_at"] = iso(now + decision.delay_ms)
    else:
        reply["discarded_at"] = reply["completed_at"] = iso(now)
    return reply


def _failure(loaded: Loaded, entry: dict[str, Any], base: str, now: int) -> list[Any]:
    started = loaded.job.processed_on if loaded.job and loaded.job.processed_on else now
    attempt = json.dumps({
        "attempt": entry["attempt"], "startedAt": started, "finishedAt": now, "worker": base,
        "outcome": "failed", "error": entry["message"], "errorType": entry["type"],
    })  # fmt: skip
    # A remote worker sends no stack trace: the attempt's trace is its error line (a JSON
    # string, as the failure scripts expect).
    stack = json.dumps(f"{entry['type']}: {entry['message']}")
    return [entry["message"], entry["type"], stack, attempt]


async def _retry(
    backend: Backend, loaded: Loaded, token: str, base: str, failure: list[Any],
    decision: Decision, now: int,
) -> None:  # fmt: skip
    keys = backend.keys(loaded.queue)
    reply = await _scripts.load("retry_job")(
        backend.client,
        [*keys.group, keys.job(loaded.id), backend.memo(loaded.queue, base, loaded.id)],
        [loaded.id, token, now, decision.delay_ms, *failure, backend.max_events, 0, base,
         MEMO_LOCK_MS],
    )  # fmt: skip
    refused(reply, loaded.id)
    await backend.records.update(loaded.queue, loaded.id, {
        "token": None, "token_base": None, "retry_delay_ms": decision.delay_ms,
        "next_attempt_at": now + decision.delay_ms,
    })  # fmt: skip
    await backend.client.zrem(backend.records.timeouts, f"{loaded.queue} {loaded.id} {token}")


async def _end(
    backend: Backend, loaded: Loaded, token: str, base: str, failure: list[Any],
    decision: Decision, now: int, reason: str,
) -> None:  # fmt: skip
    keys = backend.keys(loaded.queue)
    memo = backend.memo(loaded.queue, base, loaded.id)
    job_keys = [*keys.group, keys.job(loaded.id)]
    tail = [backend.max_events, 0, base, MEMO_LOCK_MS]
    extra: dict[str, Any] = {}
    if decision.kind == "dead_letter":
        dlq = backend.keys(backend.dead_letter_queue)
        await backend.client.sadd(dlq.dead_letter_registry, backend.dead_letter_queue)
        dl_id = new_dead_letter_id()
        args = [loaded.id, token, now, *failure, reason, loaded.queue,
                backend.dead_letter_queue, dl_id, *tail]  # fmt: skip
        if _moves.crosses(backend.client, keys, dlq):  # another cluster slot: in steps
            reply = await _moves.dead_letter(
                backend.client, keys, dlq, job_keys, memo, args, backend.max_events, MOVE_WITHIN
            )
        else:
            reply = await _scripts.load("dead_letter_job")(
                backend.client, [*job_keys, *dlq.dead_letter_group, dlq.job(dl_id), memo], args
            )
        extra = {"dead_letter_queue": backend.dead_letter_queue, "dead_letter_id": dl_id}
    else:
        keep = loaded.job.opts.keep_failed.args() if loaded.job else [-1, -1, 0]
        reply = await _scripts.load("fail_job")(
            backend.client, [*job_keys, keys.failed, memo],
            [loaded.id, token, now, *failure, *keep, *tail],
        )  # fmt: skip
    refused(reply, loaded.id)
    await backend.finish_record(loaded, "discarded", completed_at=now)
    if extra:
        await backend.records.update(loaded.queue, loaded.id, extra)


async def expire(backend: Backend, queue: str, job_id: str, token: str) -> None:
    """Fail an attempt that outran its ``timeout_ms`` (the server's reaper calls this)."""
    loaded = await backend.load_in(queue, job_id)
    if loaded.record.get("token") != token or loaded.state != "active":
        return  # finished, or handed out again, meanwhile
    base = loaded.record.get("token_base") or ""
    error = {
        "code": "timeout",
        "type": "timeout",
        "retryable": True,
        "message": f"the attempt exceeded its timeout of {loaded.record.get('timeout')} ms",
    }
    with contextlib.suppress(OjsError):  # the lease moved on meanwhile: someone else's now
        await fail_attempt(backend, loaded, token, base, error)
