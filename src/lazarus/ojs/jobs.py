"""PUSH, INFO and CANCEL: a job enters a lazarus queue, is read back as OJS sees it, or is
cancelled (removed from the engine, its last view kept in the OJS record)."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

from .. import _scripts
from ..errors import JobStateError
from .backend import MEMO_LOCK_MS, Backend, Loaded
from .envelope import Submission
from .errors import OjsError
from .states import TERMINAL

# An expiry closer than this to the job's due time is left to the fetch: the engine refuses
# one that comes before the job is due by its own clock, a few milliseconds on.
ENGINE_EXPIRY_MARGIN = 1_000
# The attempt's "stack trace" (a JSON string): a cancel has none but its reason.
STACK = json.dumps("cancelled over OJS")


def engine_priority(ojs_priority: int) -> int:
    """lazarus's priority for OJS's: every OJS job is prioritized (1 is lazarus's highest),
    so OJS 100 -> 1, 0 -> 101, -100 -> 201, first in first out within one priority."""
    return 101 - ojs_priority


async def enqueue(backend: Backend, sub: Submission) -> dict[str, Any]:
    """Add the job; 409 ``duplicate`` when its id is taken."""
    now = backend.now()
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
    duplicate = OjsError(409, "duplicate", f"a job with id {sub.id!r} exists already")
    if await backend.queue(sub.queue).get_job(sub.id) is not None:  # added by lazarus itself
        raise duplicate
    if not await backend.records.create(sub.queue, sub.id, fields):
        raise duplicate
    delay = 0 if sub.delay_until_ms is None else max(sub.delay_until_ms - now, 0)
    # The engine's expiry too (in-process workers honour it, and it shows as the job's), when
    # the job can start a while before it; a fetch checks the record's either way.
    expires_at = None
    if sub.expires_at_ms is not None and sub.expires_at_ms - now > delay + ENGINE_EXPIRY_MARGIN:
        expires_at = datetime.fromtimestamp(sub.expires_at_ms / 1000, timezone.utc)
    policy = sub.policy
    try:
        await backend.queue(sub.queue).add(
            sub.type, sub.args, job_id=sub.id, attempts=max(policy.max_attempts, 1),
            backoff={"type": "exponential", "delay": policy.initial_interval_ms},
            delay=delay, priority=engine_priority(sub.priority), timeout=sub.timeout_ms,
            expires_at=expires_at,
        )  # fmt: skip
    except BaseException:
        await backend.records.forget(sub.queue, sub.id)
        raise
    loaded = await backend.load_in(sub.queue, sub.id)
    await backend.emit("job.enqueued", loaded)
    return loaded.view()


async def cancel(backend: Backend, job_id: str) -> dict[str, Any]:
    """Cancel a job that has not ended; 409 ``conflict`` for one that has."""
    loaded = await backend.load(job_id)
    if loaded.state in TERMINAL:
        raise OjsError(409, "conflict", f"job {job_id!r} is {loaded.state} and cannot be cancelled")
    now = backend.now()
    if loaded.engine_state == "active":
        await _cancel_active(backend, loaded, now)
    else:
        try:
            await backend.queue(loaded.queue).remove(job_id)
        except JobStateError:  # claimed meanwhile
            raise OjsError(409, "conflict", f"job {job_id!r} changed state; try again") from None
    await backend.finish_record(loaded, "cancelled", cancelled_at=now)
    await backend.emit("job.cancelled", loaded)
    return (await backend.load_in(loaded.queue, job_id)).view()


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
