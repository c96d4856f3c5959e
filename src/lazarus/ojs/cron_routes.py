"""The OJS cron routes (Level 2): list, register and unregister recurring jobs.

The HTTP binding's text and the OpenAPI document (which the public conformance suite
follows) name the same things differently: a registration may use either's fields, and
every answer carries both (``cron`` and ``cron_job``, ``crons`` and ``cron_jobs``; in each
cron job ``expression`` and ``cron``, ``job_template`` and ``type`` / ``args`` / ``options``).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from . import cron
from .errors import ojs_json
from .routes import _AUTH, OjsBackend, json_body

router = APIRouter()


@router.get("/v1/cron")
async def list_cron_jobs(
    backend: OjsBackend,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> Response:
    """The registered cron jobs, by name, a page at a time."""
    found, total = await cron.listing(backend, limit, offset)
    return ojs_json({
        "crons": found, "cron_jobs": found,
        "pagination": {"total": total, "limit": limit, "offset": offset,
                       "has_more": offset + len(found) < total},
    })  # fmt: skip


@router.post("/v1/cron", dependencies=_AUTH, status_code=201)
async def register_cron_job(request: Request, backend: OjsBackend) -> Response:
    """Register a cron job; 409 when its name is taken."""
    registration = cron.parse_registration(await json_body(request), backend.now())
    shown = await cron.register(backend, registration)
    return ojs_json({"cron": shown, "cron_job": shown}, 201)


@router.delete("/v1/cron/{name}", dependencies=_AUTH)
async def unregister_cron_job(name: str, backend: OjsBackend) -> Response:
    """Unregister a cron job: its jobs that have started run on."""
    shown = await cron.unregister(backend, name)
    return ojs_json({"deleted": True, "name": name, "cron": shown})
