"""The OJS layer's handle on the engine: queues, OJS records, and a job loaded with both.

Every state change goes through the engine's scripts (claim, complete, retry, fail, dead
letter, release, extend, sweep), so a job fetched over HTTP holds a lease exactly like one an
in-process :class:`~lazarus.Worker` runs, and both can share a queue.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from typing import Any

from .._connection import Client
from .._keys import QueueKeys
from ..job import Job, JobState
from ..queue import DEFAULT_MAX_EVENTS, Queue
from .errors import OjsError
from .records import Records, now_ms
from .schemas import Schemas
from .states import envelope, ojs_state

DEFAULT_DEAD_LETTER_QUEUE = "ojs-dead-letter"
MEMO_LOCK_MS = 30_000  # an outcome's reply memo lives twice this long
# How long a fetch's claim memo lives at most (it lives twice the fetch's visibility timeout
# when that is shorter). Only the server's own Redis client ever reads it back: it re-sends a
# claim whose reply a dropped connection lost (a few tries, each within the connection's read
# timeout: seconds, well under a minute by default). An OJS client that fetches again makes a
# new call under a new identity, which never reads this memo. Every fetch that claims leaves
# one: kept for its visibility timeout (up to a day), they would pile up for nothing.
FETCH_MEMO_MS = 300_000
MAX_CACHED_QUEUES = 1000


@dataclasses.dataclass
class Loaded:
    """A job as OJS sees it: its queue, engine job and state, and OJS record."""

    queue: str
    id: str
    job: Job | None
    engine_state: JobState
    record: dict[str, str]

    @property
    def state(self) -> str:
        """The job's OJS state."""
        return ojs_state(self.engine_state, self.job, self.record)

    def view(self) -> dict[str, Any]:
        """The OJS envelope of the job."""
        return envelope(self.queue, self.id, self.engine_state, self.job, self.record)

    @property
    def env(self) -> dict[str, Any]:
        """The envelope the client sent (empty for a job lazarus added)."""
        value: dict[str, Any] = json.loads(self.record.get("env") or "{}")
        return value

    @property
    def policy(self) -> dict[str, Any]:
        """The job's retry policy as stored (empty: the defaults)."""
        value: dict[str, Any] = json.loads(self.record.get("policy") or "{}")
        return value


class Backend:
    """Shared by the OJS routes: one Redis client, one key prefix, one default DLQ."""

    def __init__(
        self,
        client: Client,
        prefix: str,
        *,
        dead_letter_queue: str = DEFAULT_DEAD_LETTER_QUEUE,
        test_hooks: bool = False,
        max_events: int = DEFAULT_MAX_EVENTS,
    ) -> None:
        self.client = client
        self.prefix = prefix
        self.records = Records(client, prefix)
        self.schemas = Schemas(client, prefix)
        self.dead_letter_queue = dead_letter_queue
        self.test_hooks = test_hooks
        self.max_events = max_events
        self._queues: dict[str, Queue] = {}

    def queue(self, name: str) -> Queue:
        """The engine queue ``name`` (cached)."""
        queue = self._queues.get(name)
        if queue is None:
            queue = Queue(name, connection=self.client, prefix=self.prefix)
            if len(self._queues) < MAX_CACHED_QUEUES:  # names come from clients: bounded
                self._queues[name] = queue
        return queue

    def keys(self, name: str) -> QueueKeys:
        """The engine keys of queue ``name``."""
        return self.queue(name).keys

    async def load(self, job_id: str) -> Loaded:
        """Job ``job_id``; a 404 when OJS does not know it."""
        queue_name = await self.records.queue_of(job_id)
        if queue_name is None:
            raise OjsError(404, "not_found", f"job {job_id!r} not found")
        return await self.load_in(queue_name, job_id)

    async def load_in(self, queue_name: str, job_id: str) -> Loaded:
        """Job ``job_id`` of ``queue_name``, whether or not the engine still has it."""
        queue = self.queue(queue_name)
        job = await queue.get_job(job_id)
        state: JobState = await queue.get_job_state(job_id) if job is not None else "unknown"
        record = await self.records.read(queue_name, job_id)
        return Loaded(queue_name, job_id, job, state, record)

    def memo(self, queue_name: str, token_base: str, job_id: str) -> str:
        """The reply memo of an outcome call: one per remote lease and job, so no two calls
        ever share one."""
        return self.keys(queue_name).reply(token_base, job_id)

    @staticmethod
    def new_token_base() -> str:
        """A worker identity for one remote fetch: lock tokens are '<it>:<attempt>'."""
        return f"ojs-{uuid.uuid4().hex}"

    async def finish_record(self, loaded: Loaded, state: str, **snapshot: Any) -> None:
        """Record that the engine let go of the job in terminal ``state``."""
        job = loaded.job
        snap = {
            "attempt": job.attempts_started if job else 0,
            "started_at": job.processed_on if job else None,
            **snapshot,
        }
        await self.records.update(loaded.queue, loaded.id, {
            "state": state, "snapshot": snap, "token": None, "token_base": None,
            "adding": None, "cancelling": None,
        })  # fmt: skip
        await self.records.client.zrem(self.records.timeouts, *self._timeout_members(loaded))

    async def reopen_record(self, queue_name: str, job_id: str) -> None:
        """Record that the engine holds the job again (retried after it was discarded): its
        OJS state is the engine's once more, and no earlier lease or backoff is kept."""
        await self.records.update(queue_name, job_id, {
            "state": None, "snapshot": None, "token": None, "token_base": None,
            "retry_delay_ms": None, "next_attempt_at": None,
        })  # fmt: skip

    def _timeout_members(self, loaded: Loaded) -> list[str]:
        return [f"{loaded.queue} {loaded.id} {loaded.record.get('token', '')}"]

    async def emit(self, kind: str, loaded: Loaded, **data: Any) -> None:
        """An OJS event about ``loaded``."""
        await self.emit_all(kind, [loaded], **data)

    async def emit_all(
        self, kind: str, jobs: list[Loaded], *, each: list[dict[str, Any]] | None = None,
        **data: Any,
    ) -> None:  # fmt: skip
        """An OJS event about each of ``jobs``, in one round trip; ``each`` holds the data of
        each job's own, beside ``data``."""
        extra = each or [{} for _ in jobs]
        await self.records.emit_all(kind, [{
            "job_id": loaded.id, "job_type": loaded.env.get("type", ""), "queue": loaded.queue,
            **data, **own,
        } for loaded, own in zip(jobs, extra, strict=True)])  # fmt: skip

    def now(self) -> int:
        """Wall-clock milliseconds, as the engine's scripts take them."""
        return now_ms()
