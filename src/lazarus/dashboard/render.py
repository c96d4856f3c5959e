"""Rendering: the Jinja2 environment (autoescaped), its filters, and the dead-letter rate chart.

The environment is built once per process; it holds templates and filters only, no state of
any app, so several apps in one process share it safely.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import json
import time
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote, urlencode

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse

from .security import CSRF_FIELD, csrf_token, current_session, flash_of
from .sessions import settings_of

MAX_FLASH = 300


def when(ms: int | None) -> str:
    """A time in ms since the epoch as ``YYYY-MM-DD HH:MM:SS UTC``."""
    if not ms:
        return "—"
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def age(ms: int | None, now_ms: int | None = None) -> str:
    """How long ago ``ms`` was, coarsely: ``42s``, ``7m``, ``3h 5m``, ``2d 4h``."""
    if not ms:
        return "—"
    now = int(time.time() * 1000) if now_ms is None else now_ms
    seconds = max(0, (now - ms) // 1000)
    if seconds < 60:
        return f"{seconds}s"
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86400
    if minutes < 60:
        return f"{minutes}m"
    if hours < 24:
        return f"{hours}h {minutes % 60}m"
    return f"{days}d {hours % 24}h"


def pretty(value: Any) -> str:
    """``value`` as indented JSON text (escaped by the template like any other text)."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)


def segment(value: str) -> str:
    """``value`` quoted as one URL path segment."""
    return quote(value, safe="")


def query(params: Mapping[str, Any], **changes: Any) -> str:
    """``params`` with ``changes`` applied (``None`` drops a key), as a query string."""
    merged = {**params, **changes}
    return urlencode({k: v for k, v in merged.items() if v is not None and v != ""})


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """The dashboard's templates, with autoescaping on for every file."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("lazarus.dashboard", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(when=when, age=age, pretty=pretty, seg=segment)
    env.globals.update(query=query, csrf_field=CSRF_FIELD)
    return env


def render(
    request: Request, template: str, context: Mapping[str, Any], *, status_code: int = 200
) -> HTMLResponse:
    """Render ``template`` with ``context`` plus what every page needs: the CSRF value,
    whether sign-out applies, and the flash message from the query string."""
    flash, kind = flash_of(request)
    session = current_session(request)
    page = {
        "request": request,
        "csrf": csrf_token(request),
        "token_required": settings_of(request).auth,
        "signed_in": session is not None,
        "principal": None if session is None else session.principal,
        "payloads_visible": session is None or session.principal.payloads,
        "flash": flash[:MAX_FLASH],
        "flash_kind": kind,
        **context,
    }
    html = environment().get_template(template).render(page)
    return HTMLResponse(html, status_code=status_code)


# -- the dead letters per minute chart ---------------------------------------------------------

CHART_WIDTH, CHART_HEIGHT, CHART_TOP = 600, 90, 14


@dataclasses.dataclass(frozen=True)
class Bar:
    """One minute of the chart: where to draw it and what its tooltip says."""

    x: float
    y: float
    width: float
    height: float
    label: str


@dataclasses.dataclass(frozen=True)
class Chart:
    """An SVG bar chart's geometry: one bar per minute, scaled to the busiest minute."""

    bars: list[Bar]
    peak: int
    total: int
    width: int = CHART_WIDTH
    height: int = CHART_HEIGHT


def rate_chart(
    rate: Sequence[tuple[int, int]], unit: tuple[str, str] = ("dead letter", "dead letters")
) -> Chart:
    """The chart of ``(minute start in ms, count)`` pairs (``Queue.get_dead_letter_rate``,
    ``Queue.get_metrics``), its tooltips counting ``unit`` (singular, plural)."""
    peak = max((count for _, count in rate), default=0)
    slot = CHART_WIDTH / max(len(rate), 1)
    usable = CHART_HEIGHT - CHART_TOP
    bars = []
    for i, (start, count) in enumerate(rate):
        height = usable * count / peak if peak else 0.0
        if count and height < 2:
            height = 2.0  # a single dead letter stays visible beside a busy minute
        minute = datetime.datetime.fromtimestamp(start / 1000, tz=datetime.timezone.utc)
        noun = unit[0] if count == 1 else unit[1]
        label = f"{minute:%H:%M} UTC: {count} {noun}"
        bars.append(Bar(round(i * slot + 1, 2), round(CHART_HEIGHT - height, 2),
                        round(max(slot - 2, 1), 2), round(height, 2), label))  # fmt: skip
    return Chart(bars, peak, sum(count for _, count in rate))
