"""What the guard records in the audit trail (:mod:`lazarus.audit`) for each unsafe request,
and ``GET /api/audit``, which reads it (admins only)."""

from __future__ import annotations

import json
import time
from typing import Annotated, Any
from urllib.parse import parse_qsl

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel
from starlette.types import Scope

from ..audit import AuditEntry, AuditTrail
from .auth import Principal

SECRET_FIELDS = frozenset({"token", "csrf", "password", "secret", "authorization"})
COUNT_FIELDS = ("count", "replayed", "purged", "deleted", "matched", "processed", "pruned")
MAX_DETAIL = 1024

router = APIRouter(tags=["audit"])


def _redacted(fields: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if k.lower() not in SECRET_FIELDS}


def _detail(body: bytes) -> str:
    text = body.decode("utf-8", "replace").strip()
    if not text:
        return ""
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = dict(parse_qsl(text, keep_blank_values=True)) if "=" in text else None
    if isinstance(parsed, dict):
        text = json.dumps(_redacted(parsed), ensure_ascii=False, sort_keys=True)
    elif parsed is None:
        text = "(not JSON or a form)"
    return text[:MAX_DETAIL]


def _count(reply: bytes) -> int | None:
    try:
        parsed = json.loads(reply)
    except ValueError:
        return None
    if not isinstance(parsed, dict):
        return None
    for name in COUNT_FIELDS:
        value = parsed.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def summarize(
    scope: Scope, principal: Principal | None, status: int, body: bytes, reply: bytes
) -> AuditEntry:
    """The entry for one request: ``body`` is the start of the request body, ``reply`` the
    start of a JSON response body."""
    query = scope.get("query_string", b"").decode("latin-1")
    query = "&".join(f"{k}={v}" for k, v in parse_qsl(query) if k.lower() not in SECRET_FIELDS)
    outcome = "ok" if status < 400 else "refused" if status < 500 else "error"
    return AuditEntry(
        at=int(time.time() * 1000),
        actor=principal.name if principal else "unauthenticated",
        role=str(principal.role) if principal else "",
        method=scope["method"],
        path=scope["path"][:MAX_DETAIL],
        query=query[:MAX_DETAIL],
        detail=_detail(body),
        status=status,
        outcome=outcome,
        count=_count(reply),
    )


class AuditPage(BaseModel):
    """The newest entries first; ``next`` is the ``before`` of the next page."""

    entries: list[AuditEntry]
    next: str | None


@router.get("/api/audit", summary="The audit trail, newest first (admins only)")
async def read_audit(
    request: Request,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
    before: Annotated[str | None, Query(pattern=r"^[0-9]{1,20}-[0-9]{1,20}$")] = None,
) -> AuditPage:
    """Every request that asked to change something, who asked, and what came of it."""
    trail: AuditTrail = request.app.state.audit
    entries = await trail.read(limit=limit, before=before)
    last = entries[-1].id if len(entries) == limit else None
    return AuditPage(entries=entries, next=last)
