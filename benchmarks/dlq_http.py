"""The list route of ``lazarus serve``'s app, for ``dlq_scale.py``: the app from
``lazarus.http.create_app`` called in process through httpx's ASGI transport (no socket, no
uvicorn: the figures are the app's and the library's own time).

The route lists by page number and limit (an offset underneath). When it also takes a
``cursor`` (its OpenAPI schema says so), the deep pages are walked by cursor too.
"""

from __future__ import annotations

import random
from functools import partial
from typing import Any

import httpx
from dlq_data import DLQ, DOMAINS, ERROR_TYPES, NAMES, NO_MATCH, SOURCES
from dlq_measure import measure
from dlq_probe import PauseProbe
from dlq_report import Row

from lazarus.cli._startup import freeze_start_up
from lazarus.http import create_app

ROUTE = "/api/dlq"
HTTP_PAGE_MS = 50
PAGE = 50
KINDS: list[tuple[str, str, Any]] = [
    ("none", "no filter", lambda r: {}),
    ("error_type", "error_type (10 %)", lambda r: {"error_type": r.choice(ERROR_TYPES)}),
    ("rare", "job_type + error_type + queue (0.1 %)",
     lambda r: {"job_type": r.choice(NAMES), "error_type": r.choice(ERROR_TYPES),
                "queue": r.choice(SOURCES)}),
    ("prefix", "job_type prefix `domain.*` (20 %)",
     lambda r: {"job_type": r.choice(DOMAINS) + ".*"}),
]  # fmt: skip


def _cursor_param(app: Any) -> bool:
    params = app.openapi()["paths"][ROUTE]["get"].get("parameters", [])
    return any(p["name"] == "cursor" for p in params)


def _next_cursor(body: dict[str, Any]) -> str | None:
    for key, value in body.items():
        if "cursor" in key.lower() and "next" in key.lower():
            return value if isinstance(value, str) and value else None
    return None


async def _get(client: httpx.AsyncClient, params: dict[str, Any]) -> Any:
    response = await client.get(ROUTE, params={"dlq": DLQ, "limit": PAGE, **params})
    response.raise_for_status()
    return response.json()


async def list_route(url: str, prefix: str, probe: PauseProbe, rng: random.Random, reps: int,
                     pages: int) -> tuple[list[Row], list[str]]:  # fmt: skip
    """First pages with filters, a deep page, and a substring filter; rows and notes."""
    app = create_app(connection=url, prefix=prefix, auth=False)
    transport = httpx.ASGITransport(app=app)
    rows: list[Row] = []
    notes = []
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        await _get(client, {})  # unmeasured: the app's first request opens its connections
        freeze_start_up()  # as `lazarus serve` does once the app is up
        for key, label, make in KINDS:
            calls = [partial(_get, client, make(rng)) for _ in range(reps)]
            async with probe.phase(f"HTTP first page: {label}"):
                sample = await measure(probe, calls)
            rows.append(sample.latency(f"http.{key}", f"HTTP list, first page, {label}",
                                       HTTP_PAGE_MS))  # fmt: skip
        async with probe.phase(f"HTTP page {pages} by page number"):
            sample = await measure(probe, [partial(_get, client, {"page": pages})] * 10)
        label = f"HTTP list, page={pages} (offset), no filter"
        rows.append(sample.latency(f"http.page{pages}", label, None))
        if _cursor_param(app):
            rows += await _cursor_walk(client, probe, pages)
        else:
            notes.append(
                "the HTTP list route takes no cursor at this commit: deep pages over "
                f"HTTP are measured by page number (page={pages}, an offset) only"
            )
        async with probe.phase("HTTP first page: payload substring, no match"):
            sample = await measure(probe, [partial(_get, client, {"args": NO_MATCH})] * 2)
        note = "the route also counts the matches: a whole-store walk"
        rows.append(sample.latency("http.substring", "HTTP list, first page, args= no match",
                                   HTTP_PAGE_MS, note))  # fmt: skip
    await app.state.ops.close()
    return rows, notes


class _Walk:
    """The list route page after page by cursor; :attr:`done` once there is no more."""

    def __init__(self, client: httpx.AsyncClient, cursor: str | None) -> None:
        self.client, self.cursor = client, cursor

    @property
    def done(self) -> bool:
        return self.cursor is None

    async def __call__(self) -> None:
        self.cursor = _next_cursor(await _get(self.client, {"cursor": self.cursor}))


async def _cursor_walk(client: httpx.AsyncClient, probe: PauseProbe, pages: int) -> list[Row]:
    walk = _Walk(client, _next_cursor(await _get(client, {})))
    async with probe.phase("HTTP deep pages by cursor"):
        sample = await measure(probe, [walk] * (pages - 1), stop=lambda: walk.done)
    if not sample.seconds:
        return []
    label = f"HTTP list by cursor, pages 2 to {len(sample.seconds) + 1}"
    return [sample.latency("http.cursor", label, HTTP_PAGE_MS)]
