"""Attacks through a real Chromium on the server without authentication (the loopback
default for demos): a cross-site form, a page on another port of the same host that plants a
CSRF cookie, a DNS-rebinding Host, and an XSS corpus through every page. None changes
anything or runs a script."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from playwright.async_api import Page, async_playwright
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import Route

from lazarus import Queue
from lazarus.http.app import create_app

from ..conftest import wait_until
from ..servers import serving
from .conftest import MakeWorker, dead_letter
from .test_browser import CHROMIUM_ARGS

LIST = "/dashboard/queues/jobs-dlq/dead-letters"
XSS = [
    "<script>alert(1)</script>",
    '"><img src=x onerror=alert(2)>',
    "<svg/onload=alert(3)>",
    "javascript:alert(4)",
    "{{7*7}}<iframe src=javascript:alert(5)>",
    "</textarea><details open ontoggle=alert(6)>",
]


def attacker_app(target: str, dead_id: str) -> Starlette:
    """A page on another origin that plants a CSRF cookie for the target's host, then posts
    forms at the dashboard and at the API."""
    html = f"""<!doctype html><html><body>
<form id="dash" method="post" target="f1" action="{target}{LIST}/{dead_id}/delete">
  <input name="csrf" value="planted"></form>
<form id="api" method="post" target="f2" action="{target}/api/queues/jobs/pause"></form>
<iframe name="f1"></iframe><iframe name="f2"></iframe>
<script>
document.cookie = "lazarus_csrf=planted; path=/dashboard";
document.getElementById("dash").submit();
document.getElementById("api").submit();
document.title = "sent";
</script></body></html>"""

    async def home(_: Request) -> HTMLResponse:
        return HTMLResponse(html)

    return Starlette(routes=[Route("/", home)])


@pytest.fixture
async def open_server(redis_url: str, prefix: str) -> AsyncIterator[str]:
    async with serving(create_app(connection=redis_url, prefix=prefix, auth=False)) as url:
        yield url


@pytest.fixture
async def browser_page(chromium: Path) -> AsyncIterator[Page]:
    playwright = await async_playwright().start()
    args = [*CHROMIUM_ARGS, "--host-resolver-rules=MAP rebind.test 127.0.0.1"]
    browser = await playwright.chromium.launch(
        executable_path=str(chromium), headless=True, args=args
    )
    try:
        yield await (await browser.new_context()).new_page()
    finally:
        await browser.close()
        await playwright.stop()


async def test_forms_from_another_port_of_the_same_host_change_nothing(
    open_server: str, browser_page: Page, queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    # Given a dead letter, and a browser that has used the dashboard (it has a session)
    [dead_id] = await dead_letter(make_worker, queue, [("a", {})])
    await browser_page.goto(open_server + LIST)

    # When the same browser opens a page on another port that posts forms at lazarus
    async with serving(attacker_app(open_server, dead_id)) as evil:
        responses = []
        browser_page.on("response", lambda r: responses.append(r))
        await browser_page.goto(evil)
        await browser_page.wait_for_function("document.title === 'sent'")

        async def both_answered() -> bool:
            posted = [r for r in responses if r.request.method == "POST"]
            return len(posted) >= 2

        await wait_until(both_answered, message="both forms to be answered")

    # Then both were refused, the dead letter is still there and the queue is not paused
    statuses = sorted(r.status for r in responses if r.request.method == "POST")
    assert statuses == [403, 403]
    assert await dlq.get_dead_letter_count() == 1
    assert not await queue.is_paused()


async def test_a_rebinding_host_name_reaches_nothing(
    open_server: str, browser_page: Page, queue: Queue
) -> None:
    port = open_server.rsplit(":", 1)[1]
    # When a page served under another name (resolving to 127.0.0.1) loads and posts
    response = await browser_page.goto(f"http://rebind.test:{port}/dashboard")
    assert response is not None and response.status == 421
    async with browser_page.expect_response(lambda r: r.request.method == "POST") as posted:
        await browser_page.evaluate(
            """() => { const f = document.createElement('form'); f.method = 'post';
                       f.action = '/api/queues/jobs/pause'; document.body.appendChild(f);
                       f.submit(); }"""
        )
    # Then the server refuses it as misdirected, and nothing changes
    assert (await posted.value).status == 421
    assert not await queue.is_paused()


async def test_xss_corpus_through_every_page_runs_no_script(
    open_server: str, browser_page: Page, queue: Queue, make_worker: MakeWorker
) -> None:
    # Given dead letters whose names, errors and payloads carry script injections
    ids = await dead_letter(
        make_worker, queue, [(f"job{x}", {"error": "KeyError", "message": x, "x": x}) for x in XSS]
    )
    dialogs: list[str] = []
    browser_page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    pages = ["/dashboard", LIST, "/dashboard/dead-letters", "/dashboard/audit",
             "/dashboard/queues/jobs-dlq/bulk/purge", *(f"{LIST}/{i}" for i in ids),
             f"{LIST}?name={XSS[0]}", f"/dashboard/find?id={XSS[1]}"]  # fmt: skip

    # When an operator opens every page
    for path in pages:
        await browser_page.goto(open_server + path)
        # Then no script ran, and the page holds no script or event-handler attribute
        injected = await browser_page.evaluate(
            """() => document.querySelectorAll('script').length +
                [...document.querySelectorAll('*')].filter(
                    e => [...e.attributes].some(a => a.name.startsWith('on'))).length"""
        )
        assert injected == 0, path
    assert dialogs == []
    detail = await browser_page.goto(open_server + f"{LIST}/{ids[1]}")
    assert detail is not None and XSS[1] in await browser_page.inner_text("main")
