"""A real ``lazarus serve`` process against hostile clients: a huge body, clients that never
finish their headers, token guessing, and the generated token printed at start."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator

import httpx
import pytest

from ..conftest import wait_until
from .test_serve import free_port, wait_for_health

TOKEN = "a-token-for-the-limits-test"


@pytest.fixture
async def server(redis_url: str, prefix: str) -> AsyncIterator[tuple[str, subprocess.Popen[bytes]]]:
    """``lazarus serve`` with a token, a 64 KiB body limit and a 1 s header deadline."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAZARUS_")}
    env["LAZARUS_API_TOKEN"] = TOKEN
    process = subprocess.Popen(
        [sys.executable, "-m", "lazarus.cli", "serve", "--port", str(port), "--redis-url",
         redis_url, "--prefix", prefix, "--max-body-bytes", "65536", "--header-timeout", "1"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        await wait_for_health(f"{base}/health", process, 30)
        yield base, process
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        found = re.search(r"VmRSS:\s+(\d+) kB", status.read())
    assert found
    return int(found.group(1))


async def test_a_huge_unauthenticated_body_is_refused_unread(
    server: tuple[str, subprocess.Popen[bytes]],
) -> None:
    base, process = server
    before = rss_kib(process.pid)

    async def body() -> AsyncIterator[bytes]:
        chunk = b"x" * (1 << 20)
        for _ in range(150):  # 150 MB, sent without a length
            yield chunk

    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        declared = await client.post(
            "/api/dead-letters/bulk", content=b"x" * 100_000,
            headers={"Content-Type": "application/json"},
        )  # fmt: skip
        try:
            streamed = await client.post("/api/dead-letters/bulk", content=body())
            streamed_status = streamed.status_code
        except httpx.TransportError:
            streamed_status = 0  # the server answered and closed while the body still came
    assert declared.status_code == 413
    assert streamed_status in (0, 401, 413)
    assert rss_kib(process.pid) - before < 50_000  # far from buffering 150 MB


async def test_a_client_that_never_finishes_its_headers_is_cut_off(
    server: tuple[str, subprocess.Popen[bytes]],
) -> None:
    base, _ = server
    host, port = base.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(b"GET /api/queues HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
    await writer.drain()

    # The server closes the connection by itself once the header deadline passes
    closed = await asyncio.wait_for(reader.read(), 10)
    assert closed == b""
    writer.close()

    # and keeps serving others
    async with httpx.AsyncClient(base_url=base) as client:
        assert (await client.get("/health")).status_code == 200


async def test_guessing_tokens_is_throttled(server: tuple[str, subprocess.Popen[bytes]]) -> None:
    base, _ = server
    async with httpx.AsyncClient(base_url=base) as client:
        statuses = [
            (
                await client.get("/api/queues", headers={"Authorization": f"Bearer guess-{i}"})
            ).status_code
            for i in range(12)
        ]
        right = await client.get("/api/queues", headers={"Authorization": f"Bearer {TOKEN}"})
    assert statuses[:10] == [401] * 10
    assert statuses[10:] == [429, 429]
    assert right.status_code == 429


async def test_without_a_token_serve_prints_a_generated_one_that_works(
    redis_url: str, prefix: str
) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAZARUS_")}
    process = subprocess.Popen(
        [sys.executable, "-m", "lazarus.cli", "serve", "--port", str(port),
         "--redis-url", redis_url, "--prefix", prefix],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    lines: list[str] = []
    try:
        assert process.stdout is not None
        stdout = process.stdout

        async def printed_sign_in() -> bool:
            lines.append((await asyncio.to_thread(stdout.readline)).decode())
            return "Sign in: " in lines[-1]

        await wait_until(printed_sign_in, message="the sign-in link")
        token = lines[-1].rsplit("token=", 1)[1].strip()
        base = f"http://127.0.0.1:{port}"
        await wait_for_health(f"{base}/health", process, 30)
        async with httpx.AsyncClient(base_url=base) as client:
            assert (await client.get("/api/queues")).status_code == 401
            headers = {"Authorization": f"Bearer {token}"}
            assert (await client.get("/api/queues", headers=headers)).status_code == 200
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(15)
