"""A real ``lazarus serve`` on the test Redis for the OJS tests, on a prefix of its own that is
emptied before each test (the suite's cases assume a server of their own)."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from lazarus import Queue
from lazarus.http import create_app

DEAD_LETTER_QUEUE = "ojs-dlq"
DLQ = "dead"  # the dead letter queue of the in-process app the OJS tests drive


@pytest.fixture
async def app(redis_url: str, prefix: str) -> FastAPI:
    """lazarus's app, OJS mounted, on the test prefix; OJS dead letters go to ``DLQ``."""
    return create_app(connection=redis_url, prefix=prefix, dead_letter_queue=DLQ, auth=False)


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """A client of ``app``, in process; an error of the app is its answer, a 500."""
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as c:
        yield c


@pytest.fixture
async def mail(redis_url: str, prefix: str) -> AsyncIterator[Queue]:
    """The queue ``mail``, where most OJS tests push."""
    async with Queue("mail", connection=redis_url, prefix=prefix) as queue:
        yield queue


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class OjsServer:
    """A running ``lazarus serve``: its URL, prefix and process."""

    def __init__(self, url: str, prefix: str, process: subprocess.Popen[bytes]) -> None:
        self.url = url
        self.prefix = prefix
        self.process = process


@pytest.fixture(scope="session")
def ojs_process(redis_url: str) -> Iterator[OjsServer]:
    prefix = f"ojs{uuid.uuid4().hex[:10]}"
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAZARUS_")}
    process = subprocess.Popen(
        [sys.executable, "-m", "lazarus.cli", "serve", "--port", str(port), "--redis-url",
         redis_url, "--prefix", prefix, "--dead-letter-queue", DEAD_LETTER_QUEUE,
         "--ojs-test-hooks", "--insecure-no-auth"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    server = OjsServer(f"http://127.0.0.1:{port}", prefix, process)
    yield server
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@pytest.fixture
async def ojs_server(ojs_process: OjsServer, raw: Any) -> OjsServer:
    """The server, up, with none of its prefix's keys left from an earlier test."""
    await _wait_for_health(ojs_process)
    keys = [k async for k in raw.scan_iter(match=f"{ojs_process.prefix}:*", count=1000)]
    if keys:
        await raw.unlink(*keys)
    return ojs_process


async def _wait_for_health(server: OjsServer, timeout: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    async with httpx.AsyncClient() as client:
        while True:
            if server.process.poll() is not None:
                stderr = server.process.stderr.read().decode() if server.process.stderr else ""
                pytest.fail(f"lazarus serve exited early: {stderr[-2000:]}")
            try:
                if (await client.get(server.url + "/ojs/v1/health", timeout=1)).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if loop.time() > deadline:
                pytest.fail(f"lazarus serve did not answer within {timeout}s")
            await asyncio.sleep(0.05)
