"""Changing a job where it is: its data, its priority or its delay (``change_job.lua``).

``queue.update_job_data(id, data)`` replaces a job's payload in any state but a dead letter's
(a processor may keep a checkpoint there: a retry reads the new one).
``queue.change_job_priority(id, priority)`` places a ready job again by its new priority
(between ``waiting`` and ``prioritized``); a job in another state keeps the new priority for
when it is next ready. ``queue.change_job_delay(id, delay)`` makes a delayed job due ``delay``
ms from now. ``queue.change_job(id, data=, priority=, delay=)`` changes any of them at once.
A bound :class:`~lazarus.Job` has the same three as ``update_data``, ``change_priority`` and
``change_delay``.

Each is one script call, checked before it is sent (bad input writes nothing), and records a
``changed`` event naming the fields. A priority change of a job deep inside a long wait list
finds it as ``queue.remove`` does (``_scripts/wait_search.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from . import _codec, _scripts
from ._checks import check_int
from ._codec import text
from ._connection import now_ms, reports_unavailable
from ._keys import QueueKeys, validate_job_id
from ._scripts.wait_search import call_searching_wait
from .errors import ErrorCode, JobStateError, error_for_code
from .job_options import MAX_PRIORITY, Delay, delay_ms

if TYPE_CHECKING:
    from ._progress import JobHandle
    from .job import JobState
    from .schema import PayloadSchema

KEEP: Any = object()
"""What :meth:`JobChangesMixin.change_job` takes for data to keep (``None`` is JSON null)."""


def data_value(data: Any, max_bytes: int, schema: PayloadSchema | None) -> str:
    """The JSON text ``data`` is stored as, checked as ``add`` checks a payload."""
    if schema is not None:
        data = schema.stored(data)
    return _codec.encode(data, field="data", max_bytes=max_bytes)


def priority_value(priority: object) -> int:
    return check_int(priority, "priority", minimum=0, maximum=MAX_PRIORITY)


async def change_job(
    handle: JobHandle,
    job_id: str,
    data: str | None = None,
    priority: int | None = None,
    delay: int | None = None,
) -> JobState:
    """Set the data (JSON text), priority and delay given (checked already) of job
    ``job_id`` at once; returns the job's state after the change. Raises
    :class:`~lazarus.JobNotFoundError` when there is no such job and
    :class:`~lazarus.JobStateError` for a dead letter or, with a delay, a job that is not
    delayed (nothing is written). Not sent again after a dropped connection."""
    k = handle.keys
    changes = [("" if v is None else v) for v in (data, priority, delay)]
    reply = await call_searching_wait(
        _scripts.load("change_job"),
        handle.client,
        k.wait,
        [*k.group, k.completed, k.failed, k.job(job_id)],
        [job_id, now_ms(), handle.max_events, *changes],
    )
    if isinstance(reply, int):
        what = f"change job {job_id!r} of {k.queue!r}"
        if reply == ErrorCode.JOB_STATE:  # which rule refused it: one more read, on refusal only
            if await handle.client.hexists(k.job(job_id), "dlq:sourceQueue"):
                raise JobStateError(f"{what}: a dead letter changes only by a replay (data=)")
            raise JobStateError(f"{what}: only a delayed job's delay changes; it is not delayed")
        raise error_for_code(reply, what)
    return cast("JobState", text(reply))


class JobChangesMixin:
    """The job-changing half of :class:`~lazarus.Queue`."""

    keys: QueueKeys
    max_payload_bytes: int
    schema: PayloadSchema | None

    if TYPE_CHECKING:  # JobLogsMixin's

        @property
        def _job_handle(self) -> JobHandle: ...

    @reports_unavailable
    async def change_job(
        self,
        job_id: str,
        *,
        data: Any = KEEP,
        priority: int | None = None,
        delay: Delay | None = None,
    ) -> JobState:
        """Change any of the data, priority and delay of job ``job_id`` at once, all or
        none; returns its state after. Each as :meth:`update_job_data`,
        :meth:`change_job_priority` and :meth:`change_job_delay` (a delay only for a delayed
        job). Records one ``changed`` event naming the fields (``fields``)."""
        validate_job_id(job_id)
        if data is KEEP and priority is None and delay is None:
            raise ValueError("nothing to change: give data, priority or delay")
        text = None if data is KEEP else data_value(data, self.max_payload_bytes, self.schema)
        return await change_job(
            self._job_handle,
            job_id,
            text,
            None if priority is None else priority_value(priority),
            None if delay is None else delay_ms(delay),
        )

    async def update_job_data(self, job_id: str, data: Any) -> None:
        """Replace the data of job ``job_id`` (any JSON value, checked by the queue's schema
        and size limit as an add's); the job stays where it is. A running job's processor
        keeps the data it was given; the job's next attempt reads the new data. Raises
        ``JobNotFoundError``, or ``JobStateError`` for a dead letter (replay it with
        ``data=`` instead). Records ``changed`` (``fields`` = ``data``)."""
        await self.change_job(job_id, data=data)

    async def change_job_priority(self, job_id: str, priority: int) -> JobState:
        """Give job ``job_id`` a new ``priority`` (1 the highest, 0 none); returns its state.

        A ready job is placed again: into ``prioritized`` (after the jobs of its new
        priority), or with 0 into ``waiting`` as a newly added job. A delayed, running or
        finished job keeps it for when it is next ready (its delay ends; it is retried).
        Raises ``JobNotFoundError``, or ``JobStateError`` for a dead letter. Records
        ``changed`` (``fields`` = ``priority``)."""
        return await self.change_job(job_id, priority=priority_value(priority))

    async def change_job_delay(self, job_id: str, delay: Delay) -> None:
        """Make delayed job ``job_id`` due ``delay`` ms (or a ``timedelta``) from now (0: due
        now, for the next worker to take). Raises ``JobNotFoundError``, or ``JobStateError``
        when the job is not delayed. Records ``changed`` (``fields`` = ``delay``), then
        ``delayed`` with the new due time."""
        await self.change_job(job_id, delay=delay_ms(delay))
