"""What a bound job can do to itself in Redis: report progress, write logs, wait for its end.

:class:`~lazarus.Job` is a snapshot; the jobs :class:`~lazarus.Queue` and
:class:`~lazarus.Worker` hand out are bound to their queue (a :class:`JobHandle`), so that
these methods can write. A copy sent to another process (a worker's process pool) is not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from . import _codec
from ._changing import change_job, data_value, priority_value
from ._progress import DEFAULT_KEEP_LOGS, JobHandle
from .job_options import Delay, delay_ms

if TYPE_CHECKING:
    from .events import QueueEvents
    from .job import JobState

_J = TypeVar("_J", bound="JobActions")


class JobActions:
    """The methods of :class:`~lazarus.Job` that talk to Redis."""

    id: str
    _handle: JobHandle | None

    def __getstate__(self) -> dict[str, Any]:
        # A copy sent to another process (a worker's process pool) has no connection.
        return {**self.__dict__, "_handle": None}

    def bind(self: _J, handle: JobHandle) -> _J:
        """Let this snapshot write to its job (what Queue and Worker hand out is bound)."""
        object.__setattr__(self, "_handle", handle)
        return self

    def _bound(self) -> JobHandle:
        if self._handle is None:
            raise RuntimeError(
                f"job {self.id!r} is not bound to a queue: use a job from Queue or a Worker"
            )
        return self._handle

    async def update_progress(self, progress: Any) -> None:
        """Set the job's progress (a number or a dict) and record a ``progress`` event; this
        snapshot's ``progress`` follows. Raises ``JobNotFoundError`` when the job is gone."""
        text = await self._bound().update_progress(self.id, progress)
        object.__setattr__(self, "progress", _codec.decode(text))

    async def update_data(self, data: Any) -> None:
        """Replace the job's data (``queue.update_job_data``); this snapshot's ``data``
        follows. A processor may keep a checkpoint there: the job's next attempt reads it."""
        handle = self._bound()
        text = data_value(data, handle.max_payload_bytes, handle.schema)
        await change_job(handle, self.id, data=text)
        object.__setattr__(self, "original_data", _codec.decode(text))
        object.__setattr__(self, "raw_data", text)

    async def change_priority(self, priority: int) -> JobState:
        """Give the job a new priority (``queue.change_job_priority``); returns its state."""
        return await change_job(self._bound(), self.id, priority=priority_value(priority))

    async def change_delay(self, delay: Delay) -> None:
        """Make the delayed job due ``delay`` ms (or a ``timedelta``) from now
        (``queue.change_job_delay``)."""
        await change_job(self._bound(), self.id, delay=delay_ms(delay))

    async def wait_until_finished(
        self, queue_events: QueueEvents | None = None, *, timeout: float | None = None
    ) -> Any:
        """Wait for the job to finish: its return value once it completes, or
        :class:`~lazarus.JobFailedError` once it fails for good or is dead-lettered (naming
        the dead letter). Driven by the queue's events, not by polling: pass a running
        :class:`~lazarus.QueueEvents` of the job's queue to share one reader between many
        waiters, else one is opened for this wait. Raises ``asyncio.TimeoutError`` after
        ``timeout`` seconds."""
        from ._results import wait_until_finished

        return await wait_until_finished(self._bound(), self.id, queue_events, timeout)

    async def log(self, line: str, *, keep_last: int = DEFAULT_KEEP_LOGS) -> int:
        """Append ``line`` to the job's logs (``queue.get_job_logs``), keeping the newest
        ``keep_last`` lines; returns how many it keeps. A line over 8 KiB is cut."""
        return await self._bound().add_log(self.id, line, keep_last)
