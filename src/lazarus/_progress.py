"""Progress and logs of a job: ``job.update_progress(value)``, ``job.log(line)``,
``queue.get_job_logs(job_id)``.

Progress is a number or a JSON object kept in the job's hash (``progress``) and announced by a
``progress`` event. Logs are a list of lines beside the hash (``<prefix>:{<queue>}:logs:<id>``),
the newest ``keep_last`` kept; both follow the job into its dead letter, and the logs follow
a dead letter into its replay.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING, Any

from . import _codec, _scripts
from ._checks import at_least
from ._connection import Client, reports_unavailable
from ._failure import cap_text
from ._indexes import check_range
from ._keys import QueueKeys, validate_job_id
from .errors import error_for_code

if TYPE_CHECKING:
    from .schema import PayloadSchema

DEFAULT_KEEP_LOGS = 1000
MAX_LOG_LINE_BYTES = 8 * 1024  # longer lines are cut, with a marker: logs stay readable


@dataclasses.dataclass(frozen=True)
class JobLogs:
    """A page of a job's log lines and how many the job keeps in all."""

    logs: list[str]
    count: int


@dataclasses.dataclass(frozen=True)
class JobHandle:
    """What a :class:`~lazarus.Job` snapshot needs to write to its job in Redis."""

    client: Client
    keys: QueueKeys
    max_events: int
    max_payload_bytes: int = _codec.DEFAULT_MAX_PAYLOAD_BYTES
    schema: PayloadSchema | None = None  # update_data checks a new payload with it

    async def update_progress(self, job_id: str, progress: Any) -> str:
        """Store ``progress`` and record a ``progress`` event; returns its JSON text."""
        if isinstance(progress, bool) or not isinstance(progress, (int, float, dict)):
            raise TypeError(f"progress must be a number or a dict, not {type(progress).__name__}")
        text = _codec.encode(progress, field="progress")
        code = await _scripts.load("update_progress")(
            self.client, [self.keys.job(job_id), self.keys.events],
            [job_id, text, self.max_events],
        )  # fmt: skip
        if int(code) != 1:
            raise error_for_code(int(code), f"update the progress of job {job_id!r}")
        return text

    async def add_log(self, job_id: str, line: str, keep_last: int = DEFAULT_KEEP_LOGS) -> int:
        """Append ``line`` to the job's logs, keeping the newest ``keep_last``; returns how
        many lines the job keeps."""
        if not isinstance(line, str):
            raise TypeError(f"log line must be a str, not {type(line).__name__}")
        at_least(keep_last, "keep_last")
        _codec.encode(line, field="log line")  # a lone surrogate cannot reach Redis
        code = await _scripts.load("add_log")(
            self.client, [self.keys.job(job_id), self.keys.logs(job_id)],
            [cap_text(line, MAX_LOG_LINE_BYTES), keep_last],
        )  # fmt: skip
        if int(code) < 0:
            raise error_for_code(int(code), f"add a log line to job {job_id!r}")
        return int(code)


class JobLogsMixin:
    """The progress-and-logs half of :class:`~lazarus.Queue`."""

    keys: QueueKeys
    max_events: int
    max_payload_bytes: int
    schema: PayloadSchema | None
    _client: Client

    @functools.cached_property
    def _job_handle(self) -> JobHandle:
        """Made once: what it holds is fixed when the queue is made."""
        return JobHandle(
            self._client, self.keys, self.max_events, self.max_payload_bytes, self.schema
        )

    @reports_unavailable
    async def get_job_logs(
        self, job_id: str, start: int = 0, end: int = -1, *, asc: bool = True
    ) -> JobLogs:
        """The log lines of job (or dead letter) ``job_id`` from ``start`` to ``end``
        (inclusive indexes; ``asc=False`` counts from the newest), and how many it keeps."""
        key = self.keys.logs(validate_job_id(job_id))
        start, end = check_range(start, end)
        async with self._client.pipeline(transaction=False) as pipe:
            if asc:
                pipe.lrange(key, start, end)
            else:
                pipe.lrange(key, -(end + 1) if end >= 0 else 0, -(start + 1))
            pipe.llen(key)
            lines, count = await pipe.execute()
        text = [v.decode() if isinstance(v, bytes) else str(v) for v in lines]
        return JobLogs(text if asc else text[::-1], int(count))

    @reports_unavailable
    async def update_job_progress(self, job_id: str, progress: Any) -> None:
        """Set the progress of job ``job_id`` (a number or a dict); records ``progress``."""
        await self._job_handle.update_progress(validate_job_id(job_id), progress)

    @reports_unavailable
    async def add_job_log(self, job_id: str, line: str, keep_last: int = DEFAULT_KEEP_LOGS) -> int:
        """Append ``line`` to the logs of job ``job_id``; returns how many lines it keeps."""
        return await self._job_handle.add_log(validate_job_id(job_id), line, keep_last)
