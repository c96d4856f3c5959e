"""Fixtures of the dashboard tests: the app on the test's prefix, and real dead letters."""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from lazarus import Job, Queue, UnrecoverableError, Worker
from lazarus.dashboard.security import CSRF_COOKIE, SESSION_COOKIE
from lazarus.http.app import create_app

MakeWorker = Callable[..., Worker]
TOKEN = "s3cret-operator-token"
ROW = re.compile(r'class="job-link" href="[^"]*/dead-letters/([0-9a-f]+)\?')


async def fail(job: Job) -> None:
    """A processor that raises what the payload asks for: ``{"error": "TimeoutError"}``."""
    kind = job.data.get("error", "ValueError") if isinstance(job.data, dict) else "ValueError"
    message = job.data.get("message", f"{kind} in {job.name}") if isinstance(job.data, dict) else ""
    if kind == "Unrecoverable":
        raise UnrecoverableError(message)
    raise {"TimeoutError": TimeoutError, "KeyError": KeyError}.get(kind, ValueError)(message)


async def dead_letter(
    make_worker: MakeWorker, queue: Queue, jobs: Iterable[tuple[str, Any]]
) -> list[str]:
    """Add ``jobs`` (name, payload) to ``queue``, let a failing worker dead-letter every one
    into ``jobs-dlq``, close the worker, and return the dead letters' ids in arrival order."""
    added = [await queue.add(name, data) for name, data in jobs]
    worker = make_worker(fail, queue.name, dead_letter_queue="jobs-dlq")
    ids: list[str] = []
    done = asyncio.Event()

    def arrived(job: Job, dead_letter_id: str) -> None:
        ids.append(dead_letter_id)
        if len(ids) == len(added):
            done.set()

    worker.on("deadLettered", arrived)
    await asyncio.wait_for(done.wait(), 10)
    await worker.close()
    return ids


def listed_ids(html: str) -> list[str]:
    """The dead letter ids in a list page, top to bottom."""
    return ROW.findall(html)


@pytest.fixture
async def app(redis_url: str, prefix: str) -> AsyncIterator[FastAPI]:
    app = create_app(connection=redis_url, prefix=prefix, auth=False)
    yield app
    await app.state.bulk.close()
    await app.state.ops.close()


@pytest.fixture
async def secured_app(redis_url: str, prefix: str) -> AsyncIterator[FastAPI]:
    app = create_app(connection=redis_url, prefix=prefix, token=TOKEN)
    yield app
    await app.state.bulk.close()
    await app.state.ops.close()


def client_of(app: FastAPI) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost")


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with client_of(app) as c:
        yield c


@pytest.fixture
async def secured(secured_app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with client_of(secured_app) as c:
        yield c


CSRF_VALUE = re.compile(r'name="csrf" value="([^"]+)"')
BULK_CONFIRM = "/dashboard/queues/jobs-dlq/bulk/replay"


async def csrf_of(client: httpx.AsyncClient, page: str = "/dashboard") -> str:
    """Load ``page`` and return the CSRF value its forms echo: the session's, or before
    sign-in the CSRF cookie's."""
    response = await client.get(page)
    assert response.status_code == 200, response.text
    found = CSRF_VALUE.search(response.text)
    if found is None and client.cookies.get(SESSION_COOKIE):
        # a page without forms: the session's value is on any page that has one
        found = CSRF_VALUE.search((await client.get(BULK_CONFIRM)).text)
    token = found.group(1) if found else client.cookies.get(CSRF_COOKIE)
    assert token, "every page with a form carries the CSRF value"
    return token


CHROMIUM = Path("/usr/bin/chromium")


@pytest.fixture
def chromium() -> Path:
    """Debian's Chromium; the browser tests are skipped without it, unless ``CI`` is set."""
    if not CHROMIUM.exists():
        reason = f"{CHROMIUM} is missing: install Debian's chromium to run the browser tests"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return CHROMIUM


async def sign_in(client: httpx.AsyncClient, token: str = TOKEN) -> httpx.Response:
    """Sign ``client`` in to the dashboard with ``token``."""
    csrf = await csrf_of(client, "/dashboard/login")
    return await client.post("/dashboard/login", data={
        "csrf": csrf, "token": token, "next": "/dashboard/queues/jobs-dlq/dead-letters?page=1",
    })  # fmt: skip


@pytest.fixture
async def viewer(redis_url: str, prefix: str) -> AsyncIterator[httpx.AsyncClient]:
    """A browser signed in as eve, a viewer, to an app of its own on this test's prefix."""
    token = "v" * 20
    app = create_app(connection=redis_url, prefix=prefix, tokens=f"eve:viewer:{token}")
    try:
        async with client_of(app) as browser:
            await sign_in(browser, token)
            yield browser
    finally:
        await app.state.bulk.close()
        await app.state.ops.close()
