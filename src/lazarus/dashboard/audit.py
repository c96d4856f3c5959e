"""The audit page (admins only): every request that asked to change something, newest first."""

from __future__ import annotations

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from ..audit import AuditTrail
from .render import render
from .routing import AdminRoute

router = APIRouter(prefix="/dashboard", route_class=AdminRoute, include_in_schema=False)
PAGE = 100


@router.get("/audit")
async def audit(request: Request) -> Response:
    """One page of the audit trail; ``?before=`` pages to older entries."""
    trail: AuditTrail = request.app.state.audit
    before = request.query_params.get("before") or None
    try:
        entries = await trail.read(limit=PAGE, before=before)
    except ValueError as exc:
        return render(request, "error.html", {"title": "Bad request", "message": str(exc),
                                              "status_code": 400}, status_code=400)  # fmt: skip
    older = entries[-1].id if len(entries) == PAGE else None
    return render(request, "audit.html", {"entries": entries, "older": older})
