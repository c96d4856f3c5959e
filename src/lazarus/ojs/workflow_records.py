"""OJS workflow records: what a workflow is as stored, its keys, and the reads of it and
of its jobs that moving it on (:mod:`.workflows`) and ending it (:mod:`.workflow_ends`) share.

Keys (under the OJS records' ``<prefix>:ojs:``):

- ``<prefix>:ojs:workflow:<id>``  HASH  ``type``, ``name``, ``created_at``, ``key`` (``steps``
                                        or ``jobs``), ``jobs`` and ``callbacks`` (JSON: id,
                                        queue and envelope of each), ``enq:<job id>`` (the job
                                        was enqueued), ``failed_at``, ``completed_at``,
                                        ``cancelled_at``, ``closed_at`` (failed for good);
                                        kept :data:`RECORD_KEEP_MS` once completed,
                                        cancelled or closed; a failed one is kept while one
                                        of its failed jobs may be retried
                                        (:mod:`.workflow_retention`)
- ``<prefix>:ojs:workflows``      SET   swept by the upkeep: ``<id>`` of each open workflow
                                        (active, or failed while a job of it runs), and
                                        ``<id> <job id>`` while job ``<job id>`` of failed
                                        workflow ``<id>`` is being retried
- ``<prefix>:ojs:workflow-of``    HASH  job id -> workflow id, until the workflow completes,
                                        is cancelled or is closed (a failed one may resume)
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

from .._codec import text as _text
from .backend import Backend, Loaded
from .errors import OjsError

READS_AT_ONCE = 16  # jobs of a workflow read at once
FAILED = ("discarded", "cancelled")  # a job that ended so fails its workflow
CLOSED = "closed_at"  # the marker of a failed workflow over for good (.workflow_retention)


@dataclasses.dataclass
class Workflow:
    """A workflow record as read."""

    id: str
    fields: dict[str, str]

    @property
    def type(self) -> str:
        """``chain``, ``group`` or ``batch``."""
        return self.fields["type"]

    @property
    def jobs(self) -> list[dict[str, Any]]:
        """Its jobs in order: ``name``, ``id``, ``queue`` and ``env`` (the envelope) each."""
        value: list[dict[str, Any]] = json.loads(self.fields["jobs"])
        return value

    @property
    def callbacks(self) -> dict[str, dict[str, Any]]:
        """A batch's callback jobs by trigger: ``id``, ``queue`` and ``env`` each."""
        value: dict[str, dict[str, Any]] = json.loads(self.fields.get("callbacks") or "{}")
        return value

    @property
    def state(self) -> str:
        """``cancelled``, ``completed``, ``failed`` or ``active``, from its markers."""
        for state, marker in (("cancelled", "cancelled_at"), ("completed", "completed_at"),
                              ("failed", "failed_at")):  # fmt: skip
            if marker in self.fields:
                return state
        return "active"

    def all_ids(self) -> list[str]:
        """The ids of its jobs and of its callbacks."""
        return [j["id"] for j in self.jobs] + [c["id"] for c in self.callbacks.values()]


class Keys:
    """The workflow keys of a prefix."""

    def __init__(self, prefix: str) -> None:
        self.open = f"{prefix}:ojs:workflows"
        self.of = f"{prefix}:ojs:workflow-of"
        self._base = f"{prefix}:ojs:workflow:"

    def record(self, workflow_id: str) -> str:
        """The key of workflow ``workflow_id``'s record."""
        return self._base + workflow_id

    @staticmethod
    def resuming(workflow_id: str, job_id: str) -> str:
        """The member of the open set that marks job ``job_id`` of a failed workflow retried."""
        return f"{workflow_id} {job_id}"


async def load(backend: Backend, workflow_id: str) -> Workflow:
    """The workflow; 404 if there is none."""
    raw = await backend.client.hgetall(Keys(backend.prefix).record(workflow_id))
    if not raw:
        raise OjsError(404, "not_found", f"workflow {workflow_id!r} not found")
    return Workflow(workflow_id, {_text(k): _text(v) for k, v in raw.items()})


async def states_of(backend: Backend, wf: Workflow) -> dict[str, Loaded]:
    """Each enqueued job of the workflow (its callbacks too), by id: the others are not
    enqueued yet (or were never added: an orphan record, replaced when enqueued again)."""
    ids = wf.all_ids()
    async with backend.client.pipeline(transaction=False) as pipe:
        for job_id in ids:
            pipe.hexists(backend.records.index, job_id)
        indexed = await pipe.execute()
    queues = {j["id"]: j["queue"] for j in [*wf.jobs, *wf.callbacks.values()]}
    found = [i for i, known in zip(ids, indexed, strict=True) if known or f"enq:{i}" in wf.fields]
    # Read a few at once (each read is a few round trips; every ACK of a job reads them all),
    # but not all: each read in flight holds a connection of the pool.
    loaded: list[Loaded] = []
    for start in range(0, len(found), READS_AT_ONCE):
        chunk = found[start : start + READS_AT_ONCE]
        loaded += await asyncio.gather(*(backend.load_in(queues[i], i) for i in chunk))
    # A record still marked ``adding`` whose job the engine does not hold is a job not
    # enqueued yet: its enqueue is under way, or never ended (the server died before the add:
    # enqueued again, it replaces that orphan record). A job the engine holds proves its add.
    held = [(one.queue, one.id) for one in loaded if one.job is not None and "adding" in one.record]
    if held:
        await backend.records.added(held)
    return {
        job_id: one for job_id, one in zip(found, loaded, strict=True)
        if one.job is not None or "adding" not in one.record
    }  # fmt: skip


def result_of(loaded: Loaded) -> Any:
    """The result a completed job returned (unmasked: it is handed on, not shown)."""
    if loaded.job is not None:
        return loaded.job.return_value
    return json.loads(loaded.record.get("snapshot") or "{}").get("result")


async def emit(backend: Backend, kind: str, wf: Workflow) -> None:
    """Tell the workflow event ``kind`` (``workflow.started``, ``.completed``, ...)."""
    data = {"workflow_id": wf.id, "workflow_type": wf.type, "name": wf.fields.get("name"),
            "job_ids": [j["id"] for j in wf.jobs]}  # fmt: skip
    await backend.records.emit(kind, data)
