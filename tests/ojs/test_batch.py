"""Batch PUSH (``POST /ojs/v1/jobs/batch``): every job is checked by the parser of a single
PUSH before anything is written, and the batch goes in whole or not at all: a bad job, an
id taken, a batch over the limit or a write Redis refuses partway leaves no job of it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from lazarus.http import create_app

from .test_input import stored


@pytest.fixture
async def app(redis_url: str, prefix: str) -> FastAPI:
    return create_app(connection=redis_url, prefix=prefix, auth=False)


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)  # a 500 is an answer
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as c:
        yield c


def job(queue: str = "mail", **fields: Any) -> dict[str, Any]:
    return {"type": "mail.send", "args": ["ada"], "options": {"queue": queue}, **fields}


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [("/ojs/v1/jobs", job("q" * 201), "options.queue"),
     ("/ojs/v1/workers/fetch", {"queues": ["q" * 201]}, "queues")],
    ids=["push", "fetch"],
)  # fmt: skip
async def test_a_queue_name_longer_than_lazarus_keeps_is_refused(
    client: httpx.AsyncClient, raw: Any, prefix: str, path: str, body: Any, field: str
) -> None:
    # Given a store with nothing of OJS yet
    before = await stored(raw, prefix)

    # When a job or a fetch names a queue of 201 characters (OJS's pattern, lazarus's limit
    # is 200)
    response = await client.post(path, json=body)

    # Then it is refused naming the field and the limit, and nothing was written
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["details"]["field"] == field
    assert "at most 200" in error["message"]
    assert await stored(raw, prefix) == before
