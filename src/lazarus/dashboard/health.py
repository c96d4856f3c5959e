"""The dashboard's health page of a dead letter queue: its health measures, server-rendered
SVG bar charts (arrivals per minute, dead letters by status and by error type; no script, as
the dashboard's CSP requires), its retention policy and its alert rules."""

from __future__ import annotations

import asyncio
import dataclasses

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from ..redrive import DEFAULT_ALERTS
from .render import rate_chart, render
from .routing import SignedInRoute, find_queue, no_such
from .security import operators

RATE_MINUTES = 60
BAR_WIDTH = 300  # px of the longest bar of a breakdown
TOP_ERROR_TYPES = 10

router = APIRouter(prefix="/dashboard", route_class=SignedInRoute, include_in_schema=False)


@dataclasses.dataclass(frozen=True)
class Row:
    """One bar of a breakdown: its label, count and length."""

    label: str
    count: int
    width: float


def breakdown(counts: dict[str, int], limit: int | None = None) -> list[Row]:
    """Horizontal bars of ``counts``, largest first, scaled to the largest."""
    items = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
    peak = max((c for _, c in items), default=0)
    return [Row(label or "(none)", c, round(BAR_WIDTH * c / peak, 1) if peak else 0.0)
            for label, c in items]  # fmt: skip


@router.get("/queues/{name}/health")
async def health_page(request: Request, name: str) -> Response:
    """Ingestion, backlog, resolution and replay success, time in the DLQ, with charts."""
    queue = find_queue(request, name)
    if queue is None or name not in await operators(request).queue_names():
        return no_such(request, f"There is no queue called {name!r}.")
    health, rate, policy = await asyncio.gather(
        queue.get_dead_letter_health(), queue.get_dead_letter_rate(RATE_MINUTES),
        queue.get_retention_policy(),
    )  # fmt: skip
    alerts = [(rule, *rule.fires(health)) for rule in DEFAULT_ALERTS]
    context = {
        "name": name, "health": health, "chart": rate_chart(rate), "minutes": RATE_MINUTES,
        "statuses": breakdown(health.by_status),
        "errors": breakdown(health.error_types, TOP_ERROR_TYPES), "policy": policy,
        "alerts": alerts, "bar_width": BAR_WIDTH,
    }  # fmt: skip
    return render(request, "dead_letter_health.html", context)
