"""Validation of an OJS workflow request (``POST /ojs/v1/workflows``): the whole definition is
checked, each job by the parser of a single PUSH, before anything is written.

The shape accepted is that of OJS's OpenAPI document and conformance suite::

    {"type": "chain", "name": "etl", "steps": [{"type": "a.b", "args": [1]}, ...]}
    {"type": "group" | "batch", "jobs": [...],
     "callbacks": {"on_success": {...}, "on_failure": {...}, "on_complete": {...}}}

A chain may list its steps under ``jobs`` too (the conformance suite's L3-001 does); callbacks
belong to a batch only. The server gives every job its id: a job that names one is refused.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .envelope import MAX_NAME, Submission, invalid, parse_submission
from .errors import OjsError
from .schemas import Schemas

MAX_WORKFLOW_JOBS = 100
"""The most jobs one workflow lists (its callbacks aside): the definition is checked and
written in one request, and every advance of the workflow reads each of its jobs' state."""
TYPES = ("chain", "group", "batch")
CALLBACKS = ("on_success", "on_failure", "on_complete")


@dataclasses.dataclass(frozen=True)
class WorkflowDef:
    """A validated workflow request."""

    type: str
    name: str | None
    key: str  # "steps" or "jobs": where the request listed its jobs, and where answers do
    jobs: list[Submission]
    names: list[str | None]  # each job's ``name`` in the workflow, if it has one
    callbacks: dict[str, Submission]  # a batch's, by trigger


def at_path(error: OjsError, path: str) -> OjsError:
    """``error`` about a job at ``path`` of the request (``steps[2]``): its message and its
    ``details.field`` say where (``steps[2].type``)."""
    field = (error.details or {}).get("field")
    full = f"{path}.{field}" if field else path
    return OjsError(error.status, error.code, f"{path}: {error.message}",
                    retryable=error.retryable, details={**(error.details or {}),
                                                        "field": full})  # fmt: skip


def parse_workflow(body: Any) -> WorkflowDef:
    """Validate a workflow request; the first error names its field (``jobs[2].type``)."""
    if not isinstance(body, dict):
        raise OjsError(400, "invalid_payload", "the request body must be a JSON object")
    kind = body.get("type")
    if kind not in TYPES:
        raise invalid(f"type must be one of {', '.join(TYPES)}, got {kind!r}", field="type")
    name = body.get("name")
    if name is not None and (not isinstance(name, str) or not 0 < len(name) <= MAX_NAME):
        raise invalid(f"name must be a string of 1 to {MAX_NAME} characters", field="name")
    key = _list_key(body, kind)
    items = body[key]
    if not isinstance(items, list) or not items:
        raise invalid(f"{key} must be a non-empty array of jobs", field=key)
    if len(items) > MAX_WORKFLOW_JOBS:
        raise invalid(f"{key} holds {len(items)} jobs, over the limit of {MAX_WORKFLOW_JOBS} "
                      "per workflow (MAX_WORKFLOW_JOBS)", field=key)  # fmt: skip
    jobs, names = [], []
    for index, item in enumerate(items):
        path = f"{key}[{index}]"
        jobs.append(_job(item, path))
        step_name = item.get("name")
        if step_name is not None and (not isinstance(step_name, str) or len(step_name) > MAX_NAME):
            raise invalid(f"{path}.name must be a string of at most {MAX_NAME} characters",
                          field=f"{path}.name")  # fmt: skip
        names.append(step_name)
    callbacks = _callbacks(body.get("callbacks"), kind)
    return WorkflowDef(kind, name, key, jobs, names, callbacks)


def _list_key(body: dict[str, Any], kind: str) -> str:
    """Where the request lists its jobs: ``steps`` (or ``jobs``) for a chain, ``jobs`` else."""
    if kind == "chain":
        if "steps" in body and "jobs" in body:
            raise invalid("a chain lists its jobs in steps or in jobs, not both", field="steps")
        if "steps" in body or "jobs" not in body:
            if "steps" not in body:
                raise invalid("steps is required for a chain", field="steps")
            return "steps"
        return "jobs"
    if "jobs" not in body:
        raise invalid(f"jobs is required for a {kind}", field="jobs")
    return "jobs"


def _job(item: Any, path: str, *, default_args: bool = False) -> Submission:
    if not isinstance(item, dict):
        raise invalid(f"{path} must be a JSON object", field=path)
    if "id" in item:
        raise invalid(f"{path}.id: the server gives each job of a workflow its id",
                      field=f"{path}.id")  # fmt: skip
    if default_args and "args" not in item:
        item = {**item, "args": []}
    try:
        sub = parse_submission(item)
    except OjsError as exc:
        raise at_path(exc, path) from None
    if sub.unique is not None:  # a step refused as a duplicate would halt the workflow
        raise invalid(f"{path}.options.unique: a workflow's jobs are not unique jobs",
                      field=f"{path}.options.unique")  # fmt: skip
    return sub


def _callbacks(value: Any, kind: str) -> dict[str, Submission]:
    if value is None:
        return {}
    if kind != "batch":
        raise invalid(f"callbacks belong to a batch, not a {kind}", field="callbacks")
    if not isinstance(value, dict):
        raise invalid("callbacks must be a JSON object", field="callbacks")
    unknown = sorted(set(value) - set(CALLBACKS))
    if unknown:
        raise invalid(f"callbacks.{unknown[0]} is not one of {', '.join(CALLBACKS)}",
                      field=f"callbacks.{unknown[0]}")  # fmt: skip
    return {
        trigger: _job(job, f"callbacks.{trigger}", default_args=True)
        for trigger, job in value.items()
        if job is not None
    }


async def check_schemas(schemas: Schemas, definition: WorkflowDef) -> None:
    """Every job's args against the schema it names (a 400 naming ``steps[1].args[0]``): a job
    the workflow enqueues later is not checked again, so that a schema replaced or removed
    since does not stop the workflow."""
    paths = [f"{definition.key}[{i}]" for i in range(len(definition.jobs))]
    paths += [f"callbacks.{trigger}" for trigger in definition.callbacks]
    failed = await schemas.first_failure([*definition.jobs, *definition.callbacks.values()])
    if failed is not None:
        raise at_path(failed[1], paths[failed[0]])
