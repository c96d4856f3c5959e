"""The OJS workflow routes (Level 3): ``POST /v1/workflows`` creates a chain, group or batch,
``GET`` reads it, ``DELETE`` cancels it; each answers with the workflow as OJS's OpenAPI
``Workflow`` has it, with each job's id and state (:func:`view`)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request, Response

from ..http._deps import require_token
from . import workflow_ends, workflow_records, workflows
from .backend import Backend, Loaded
from .errors import ojs_json
from .routes import OjsBackend, _job_id, json_body
from .states import iso
from .workflow_defs import parse_workflow

router = APIRouter()
_AUTH = [Depends(require_token)]


@router.post("/v1/workflows", dependencies=_AUTH, status_code=201)
async def create_workflow(request: Request, backend: OjsBackend) -> Response:
    """Create and start a workflow: the whole definition is checked before anything is
    written."""
    definition = parse_workflow(await json_body(request))
    workflow_id = await workflows.create(backend, definition)
    response = ojs_json({"workflow": await view(backend, workflow_id)}, 201)
    response.headers["Location"] = f"/ojs/v1/workflows/{workflow_id}"
    return response


@router.get("/v1/workflows/{workflow_id}")
async def get_workflow(workflow_id: str, backend: OjsBackend) -> Response:
    """The workflow's state and progress, with each job's id and state."""
    return ojs_json({"workflow": await view(backend, _job_id(workflow_id, "id"))})


@router.delete("/v1/workflows/{workflow_id}", dependencies=_AUTH)
async def cancel_workflow(workflow_id: str, backend: OjsBackend) -> Response:
    """Cancel the workflow and its jobs that have not ended."""
    wf_id = _job_id(workflow_id, "id")
    cancelled = await workflow_ends.cancel_workflow(backend, wf_id)
    return ojs_json({"workflow": {**await view(backend, wf_id), "jobs_cancelled": cancelled}})


async def view(backend: Backend, workflow_id: str) -> dict[str, Any]:
    """The workflow as OJS's OpenAPI ``Workflow`` has it, with each job's id and state."""
    wf = await workflow_records.load(backend, workflow_id)
    loaded = await workflow_records.states_of(backend, wf)
    key = wf.fields.get("key", "jobs")
    items = [_item(job, loaded.get(job["id"])) for job in wf.jobs]
    done = sum(item["state"] == "completed" for item in items)
    counts = "steps" if wf.type == "chain" else "jobs"
    out: dict[str, Any] = {
        "id": wf.id, "type": wf.type, "name": wf.fields.get("name"), "state": wf.state,
        f"{counts}_total": len(items), f"{counts}_completed": done, key: items,
        "created_at": iso(int(wf.fields["created_at"])),
    }  # fmt: skip
    if wf.callbacks:
        out["callbacks"] = {t: _item(cb, loaded.get(cb["id"])) for t, cb in wf.callbacks.items()}
    for marker in ("completed_at", "failed_at", "cancelled_at"):
        if marker in wf.fields:
            out[marker] = iso(int(wf.fields[marker]))
    return {k: v for k, v in out.items() if v is not None}


def _item(job: dict[str, Any], loaded: Loaded | None) -> dict[str, Any]:
    """A job of the workflow: ``pending`` until it is enqueued."""
    state = "pending" if loaded is None else loaded.state
    item = {"name": job.get("name"), "job_id": job["id"], "type": job["env"].get("type"),
            "queue": job["queue"], "state": state}  # fmt: skip
    if loaded is not None and item["state"] == "completed":
        item["result"] = loaded.view().get("result")
    return {k: v for k, v in item.items() if v is not None}
