"""The OJS workflow routes (Level 3): ``POST /v1/workflows`` creates a chain, group or batch,
``GET`` reads it, ``DELETE`` cancels it."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request, Response

from ..http._deps import require_token
from . import workflows
from .errors import ojs_json
from .routes import OjsBackend, _job_id, json_body
from .workflow_defs import parse_workflow

router = APIRouter()
_AUTH = [Depends(require_token)]


@router.post("/v1/workflows", dependencies=_AUTH, status_code=201)
async def create_workflow(request: Request, backend: OjsBackend) -> Response:
    """Create and start a workflow: the whole definition is checked before anything is
    written."""
    definition = parse_workflow(await json_body(request))
    workflow = await workflows.create(backend, definition)
    response = ojs_json({"workflow": workflow}, 201)
    response.headers["Location"] = f"/ojs/v1/workflows/{workflow['id']}"
    return response


@router.get("/v1/workflows/{workflow_id}")
async def get_workflow(workflow_id: str, backend: OjsBackend) -> Response:
    """The workflow's state and progress, with each job's id and state."""
    return ojs_json({"workflow": await workflows.view(backend, _job_id(workflow_id, "id"))})


@router.delete("/v1/workflows/{workflow_id}", dependencies=_AUTH)
async def cancel_workflow(workflow_id: str, backend: OjsBackend) -> Response:
    """Cancel the workflow and its jobs that have not ended."""
    wf_id = _job_id(workflow_id, "id")
    return ojs_json({"workflow": await workflows.cancel_workflow(backend, wf_id)})
