"""Remote workers in lazarus's workers registry, and the directives the admin sends them.

An OJS worker that FETCHes or BEATs under a ``worker_id`` is registered as a worker of each
queue it fetches from or holds a job of, in the registry lazarus's own workers use
(:mod:`lazarus.workers`): so ``list_workers``, the CLI, the dashboard and the admin API's
``/admin/workers`` list it beside them. Its details say ``"remote": true``, its ``host`` is the
``hostname`` it sends (if any), ``concurrency`` the most jobs it asked for in one fetch, and
``running`` the active jobs named in its last heartbeat (their ids kept too, at most
:data:`MAX_JOBS_KEPT`). A registration lasts ``HEARTBEAT_TTL`` (15 s) and is renewed at most
every ``HEARTBEAT_INTERVAL`` (5 s) per worker and queue, or at once when its heartbeat names
other jobs: a remote worker that neither fetches nor beats for 15 s drops out of the list. A
fetch without a ``worker_id`` is no worker's and is not registered.

``POST /admin/workers/{id}/quiet`` (ojs-admin-api 9.3) keeps the directive ``quiet`` for the
worker (``<prefix>:ojs:directive:<id>``, :data:`DIRECTIVE_KEEP_MS`): its heartbeats answer
``quiet``, and its fetches get no jobs, while it finishes those it holds.

``DELETE /admin/workers/{id}`` (9.4) deregisters a worker that missed its heartbeat deadline
(:func:`release`): the jobs it still holds go back to their queues at once, as if their
leases had lapsed (each a stall, swept by the server's upkeep within 250 ms), instead of
waiting out visibility timeouts that may last a day.
"""

from __future__ import annotations

import time
import weakref
from typing import Any

from .. import _scripts
from .. import workers as registry
from .._codec import text as _text
from .._connection import now_ms
from .backend import Backend

MAX_JOBS_KEPT = 100  # active job ids kept in a remote worker's details
ACTIVE_PAGE = 1_000  # active job ids a deregistration reads from a queue at a time
DIRECTIVE_KEEP_MS = 24 * 3600 * 1000  # how long a quiet directive waits for its worker
_FORGET_AFTER = 60.0  # seconds: what this process remembers of a worker gone quiet as long


class _Seen:
    """What this process knows of the remote workers it serves, to renew their
    registrations no more often than needed."""

    def __init__(self) -> None:
        self.renewed: dict[tuple[str, str], tuple[float, int]] = {}  # (worker, queue) -> at, jobs
        self.started: dict[str, int] = {}
        self.concurrency: dict[str, int] = {}
        self.jobs: dict[str, list[str]] = {}

    def forget_old(self, now: float) -> None:
        if len(self.renewed) < 10_000:
            return
        for key, (at, _) in list(self.renewed.items()):
            if now - at > _FORGET_AFTER:
                del self.renewed[key]
        live = {worker for worker, _ in self.renewed}
        for table in (self.started, self.concurrency, self.jobs):
            for worker in set(table) - live:
                del table[worker]


_SEEN: weakref.WeakKeyDictionary[Backend, _Seen] = weakref.WeakKeyDictionary()


async def seen(
    backend: Backend,
    worker_id: str,
    queues: list[str],
    *,
    asked: int | None = None,
    jobs: list[str] | None = None,
    hostname: str | None = None,
) -> None:
    """Register remote worker ``worker_id`` in each of ``queues``: at a fetch (``asked``: how
    many jobs it asked for) or a heartbeat (``jobs``: the active jobs it named)."""
    state = _SEEN.setdefault(backend, _Seen())
    clock = time.monotonic()
    state.forget_old(clock)
    state.started.setdefault(worker_id, now_ms())
    if asked is not None:
        state.concurrency[worker_id] = max(asked, state.concurrency.get(worker_id, 0))
    if jobs is not None:
        state.jobs[worker_id] = jobs[:MAX_JOBS_KEPT]
    held = state.jobs.get(worker_id, [])
    signature = hash(tuple(held))
    for queue in queues:
        at, before = state.renewed.get((worker_id, queue), (-1e9, 0))
        if clock - at < registry.HEARTBEAT_INTERVAL and before == signature:
            continue
        details = {
            "host": hostname or "", "pid": 0, "started_at": state.started[worker_id],
            "concurrency": state.concurrency.get(worker_id, 0), "running": len(held),
            "last_seen": now_ms(), "remote": True, "jobs": held,
        }  # fmt: skip
        await registry.register(backend.client, backend.keys(queue), worker_id, details)
        state.renewed[(worker_id, queue)] = (clock, signature)


def directive_key(backend: Backend, worker_id: str) -> str:
    return f"{backend.prefix}:ojs:directive:{worker_id}"


async def quiet(backend: Backend, worker_id: str) -> None:
    """Tell remote worker ``worker_id``, at its next heartbeat, to fetch no more jobs."""
    await backend.client.set(directive_key(backend, worker_id), "quiet", px=DIRECTIVE_KEEP_MS)


async def directive(backend: Backend, worker_id: str) -> str | None:
    """The directive the admin left for ``worker_id`` (``quiet``), if any."""
    value: Any = await backend.client.get(directive_key(backend, worker_id))
    return "quiet" if value == "quiet" else None


async def release(backend: Backend, queues: list[str], worker_id: str) -> tuple[bool, list[str]]:
    """Deregister worker ``worker_id`` from ``queues`` and expire the leases of the jobs it
    still holds in them (their OJS records name it, under the token the engine still has):
    whether any queue had registered it (live or lapsed), and the ids of the jobs let go.

    Each queue's active jobs are read :data:`ACTIVE_PAGE` at a time from the oldest claim
    on, which claims made meanwhile (at the list's other end) do not shift. A job that a page
    misses while other jobs leave the list stays the worker's until its lease lapses, as it
    would have without the deregistration."""
    known, released = False, []
    for name in queues:
        keys = backend.keys(name)
        async with backend.client.pipeline(transaction=True) as pipe:  # one slot: the queue's
            pipe.zrem(keys.workers, worker_id)
            pipe.hdel(keys.workers_info, worker_id)
            pipe.lrange(keys.active, -ACTIVE_PAGE, -1)
            left, forgotten, page = await pipe.execute()
        known = known or bool(left or forgotten)
        seen: set[str] = set()
        read = 0
        while page:
            fresh = [job_id for job_id in map(_text, page) if job_id not in seen]
            seen.update(fresh)
            released += await _let_go(backend, name, worker_id, fresh)
            if len(page) < ACTIVE_PAGE:
                break
            read += ACTIVE_PAGE
            page = await backend.client.lrange(keys.active, -read - ACTIVE_PAGE, -read - 1)
    await backend.client.delete(directive_key(backend, worker_id))
    return known, released


async def _let_go(backend: Backend, queue: str, worker_id: str, active: list[str]) -> list[str]:
    """Expire the leases of those of ``active`` (job ids of ``queue``) that ``worker_id``
    holds: the ids of the jobs let go."""
    if not active:
        return []
    async with backend.client.pipeline(transaction=False) as pipe:
        for job_id in active:
            pipe.hmget(backend.records.key(queue, job_id), ["worker_id", "token"])
        held = await pipe.execute()
    pairs: list[str] = []
    for job_id, (holder, token) in zip(active, held, strict=True):
        # A lease that moved on meanwhile is not the worker's any more: left alone.
        if holder is not None and _text(holder) == worker_id and token is not None:
            pairs += [job_id, _text(token)]
    if not pairs:
        return []
    keys = backend.keys(queue)
    lost, _, _ = await _scripts.load("extend_locks")(
        backend.client, [keys.leases, keys.job_prefix], [backend.now() - 1, *pairs]
    )
    gone = {_text(i) for i in lost}
    return [j for j in pairs[::2] if j not in gone]
