"""The dashboard's webhook page: the delivery log of every dead letter queue, newest first,
one row per attempt with its HTTP status and outcome (docs/webhooks.md)."""

from __future__ import annotations

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from .render import render
from .routing import AdminRoute
from .security import operators

LIMIT = 200

router = APIRouter(prefix="/dashboard", route_class=AdminRoute, include_in_schema=False)


@router.get("/webhooks")
async def webhook_deliveries(request: Request) -> Response:
    """The newest webhook delivery attempts, optionally of one dead letter (``?id=``)."""
    from ..webhooks.log import deliveries

    ops = operators(request)
    wanted = request.query_params.get("id", "").strip()[:200] or None
    queues = await ops.view.dead_letter_queues()
    found = await deliveries(ops.client, ops.prefix, queues, limit=LIMIT, dead_letter_id=wanted)
    return render(request, "webhooks.html", {"deliveries": found, "wanted": wanted or ""})
