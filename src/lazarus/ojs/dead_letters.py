"""OJS dead letters, server-wide: every dead letter queue of the prefix through the store's
global view (:class:`~lazarus.DeadLetterView`), each dead letter found by the id its job had
(or by its own id), retried under OJS's rules (same id, attempts reset) or deleted."""

from __future__ import annotations

import contextlib
import json
from typing import Any

from ..dead_letter import DeadLetterFilter, DeadLetterView, replay
from ..errors import JobNotFoundError
from ..job import Job
from ..masking import masked
from .backend import Backend
from .errors import OjsError
from .states import iso
from .workflow_ends import job_not_resuming, job_resuming
from .workflows import job_ended


class DeadLetters:
    """The dead letters an OJS server shows."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.view = DeadLetterView(backend.client, prefix=backend.prefix)

    async def find(self, job_id: str) -> Job:
        """The dead letter of job ``job_id`` (or the dead letter with that id); 404 if none."""
        job = await self.view.find_by_original_id(job_id)
        if job is None:
            job = await self.view.get(job_id)
        if job is None or job.dead_letter is None:
            raise OjsError(404, "not_found", f"no dead letter of job {job_id!r}")
        return job

    async def page(self, limit: int, cursor: str | None) -> tuple[list[Job], str | None, int]:
        """A page of dead letters, newest first: the jobs, the next cursor, the total."""
        found = await self.view.search(None, limit=limit, cursor=cursor)
        total = found.total if found.total is not None else await self.view.count()
        return found.jobs, found.next_cursor, total

    async def to_ojs(self, dead: Job) -> dict[str, Any]:
        """A dead letter as an OJS job: the job it was, ``discarded``, with its history."""
        meta = dead.dead_letter
        assert meta is not None
        record = await self.backend.records.read(meta.source_queue, meta.original_job_id)
        env = json.loads(record.get("env") or "{}")
        errors = json.loads(record.get("errors") or "[]") or [
            {"code": "handler_error", "type": a.error_type or meta.error_type,
             "message": a.error or "", "attempt": a.attempt, "occurred_at": iso(a.finished_at)}
            for a in meta.attempts
        ]  # fmt: skip
        return {
            **env,
            "id": meta.original_job_id or dead.id,
            "type": dead.name,
            "queue": meta.source_queue,
            "args": masked(env.get("args", dead.original_data)),
            "meta": env.get("meta", {}),
            "state": "discarded",
            "attempt": meta.attempts_made,
            "errors": errors,
            "error": errors[-1] if errors else None,
            "created_at": iso(meta.original_timestamp),
            "discarded_at": iso(meta.dead_lettered_at),
            "completed_at": iso(meta.dead_lettered_at),
            "dead_letter": {"id": dead.id, "queue": dead.queue_name, "reason": meta.reason,
                            "status": meta.status, "replay_count": meta.replay_count},
        }  # fmt: skip

    async def retry(self, job_id: str) -> dict[str, Any]:
        """Put the job back in its queue under its own id, attempts reset; its view."""
        return await self.retry_letter(await self.find(job_id))

    async def retry_letter(self, dead: Job) -> dict[str, Any]:
        """:meth:`retry` of the dead letter ``dead``."""
        meta = dead.dead_letter
        assert meta is not None
        original = meta.original_job_id or dead.id
        dlq = self.backend.queue(dead.queue_name)
        mark = await job_resuming(self.backend, original)  # before the job is back: workflows
        ((_, result),) = await replay.replay(
            self.backend.client, dlq.keys, dlq.max_events, meta.source_queue,
            [(dead.id, replay.KEEP)], new_ids=[original],
        )  # fmt: skip
        if isinstance(result, int):
            await job_not_resuming(self.backend, mark)
            raise OjsError(409, "conflict", f"the dead letter of {original!r} changed; try again")
        records = self.backend.records
        if await records.queue_of(original) is None:  # a job no OJS client enqueued
            await records.create(
                meta.source_queue, original, {"created_at": meta.original_timestamp}
            )
        await self.backend.reopen_record(meta.source_queue, original)
        loaded = await self.backend.load_in(meta.source_queue, original)
        await self.backend.emit("job.retried", loaded)
        await job_ended(self.backend, original)  # its workflow, failed, goes on
        return loaded.view()

    async def delete(self, job_id: str) -> str:
        """Delete the dead letter of ``job_id`` for good; the original job's id."""
        return await self.delete_letter(await self.find(job_id))

    async def delete_letter(self, dead: Job) -> str:
        """:meth:`delete` of the dead letter ``dead``."""
        await self.backend.queue(dead.queue_name).purge_dead_letter(dead.id)
        meta = dead.dead_letter
        return meta.original_job_id if meta and meta.original_job_id else dead.id

    async def purge(self, before: int | None, limit: int) -> tuple[int, bool]:
        """Delete for good up to ``limit`` dead letters, oldest first, of those dead-lettered
        before ``before`` (ms; every one without): how many, and whether more are left."""
        flt = None if before is None else DeadLetterFilter(until=before - 1)
        page = await self.view.search(flt, limit=limit, order="oldest")
        deleted = 0
        for dead in page.jobs:
            with contextlib.suppress(JobNotFoundError):  # deleted meanwhile
                await self.delete_letter(dead)
                deleted += 1
        return deleted, page.next_cursor is not None

    async def stats(self) -> dict[str, Any]:
        """How many dead letters, by dead letter queue and by source queue."""
        stats = await self.view.stats()
        return {"total": stats.total, "by_queue": dict(stats.by_source_queue),
                "oldest_at": iso(stats.oldest), "newest_at": iso(stats.newest)}  # fmt: skip
