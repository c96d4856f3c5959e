"""``lazarus serve``: one real subprocess, and the refusal to bind a public address without
a token (through click's runner)."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys

import httpx
import pytest
from click.testing import CliRunner

from lazarus import Queue
from lazarus.cli import main
from lazarus.cli.serve import is_loopback

TOKEN = "a-token-for-the-serve-test"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def wait_for_health(url: str, process: subprocess.Popen[bytes], timeout: float) -> None:
    """Poll ``url`` until it answers 200; fail if the process dies or the deadline passes."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    async with httpx.AsyncClient() as client:
        while True:
            assert process.poll() is None, "lazarus serve exited early"
            try:
                if (await client.get(url, timeout=1)).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if loop.time() > deadline:
                pytest.fail(f"lazarus serve did not answer {url} within {timeout}s")
            await asyncio.sleep(0.05)


async def test_serve_subprocess_answers_and_stops_on_sigterm(
    redis_url: str, prefix: str, queue: Queue
) -> None:
    # Given a queue with one job, and lazarus serve on a free port with a token
    await queue.add("pending")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAZARUS_")}
    env["LAZARUS_API_TOKEN"] = TOKEN
    process = subprocess.Popen(
        [sys.executable, "-m", "lazarus.cli", "serve", "--port", str(port),
         "--redis-url", redis_url, "--prefix", prefix],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        # When it is up, then it answers with the queues of its prefix
        base = f"http://127.0.0.1:{port}"
        await wait_for_health(f"{base}/health", process, 30)
        async with httpx.AsyncClient(base_url=base) as client:
            refused = await client.get("/api/queues")
            response = await client.get("/api/queues", headers={"Authorization": f"Bearer {TOKEN}"})
        assert refused.status_code == 401
        assert response.status_code == 200
        assert [q["name"] for q in response.json()["queues"]] == ["jobs"]
        assert response.json()["queues"][0]["counts"]["waiting"] == 1

        # When it receives SIGTERM, then it shuts down gracefully (uvicorn re-raises the
        # signal once it is done, so the exit status may say "terminated by SIGTERM")
        process.send_signal(signal.SIGTERM)
        output = process.communicate(timeout=15)[0].decode(errors="replace")
        assert process.returncode in (0, -signal.SIGTERM), output
        assert "Application shutdown complete" in output
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.parametrize("host", ["0.0.0.0", "::"])
def test_serve_on_every_address_needs_the_host_names_clients_use(host: str) -> None:
    result = CliRunner().invoke(main, ["serve", "--host", host], env={"LAZARUS_API_TOKEN": ""})

    assert result.exit_code != 0
    assert "--allowed-host" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.10", "example.com"])
def test_serve_without_auth_is_refused_off_loopback(host: str) -> None:
    args = ["serve", "--host", host, "--insecure-no-auth", "--allowed-host", "x"]
    result = CliRunner().invoke(main, args, env={"LAZARUS_API_TOKEN": ""})

    assert result.exit_code != 0
    assert "--insecure-no-auth serves loopback only" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("entries", "field"),
    [("ops:operator:short", "at least 16"), ("ops:boss:" + "x" * 20, "unknown role"),
     ("nocolons", "expected 'name:role:token'"), (f"a:admin:{'x' * 20},a:viewer:{'y' * 20}",
     "must be unique")],
)  # fmt: skip
def test_serve_refuses_bad_named_tokens_naming_the_entry(entries: str, field: str) -> None:
    result = CliRunner().invoke(main, ["serve"], env={"LAZARUS_API_TOKENS": entries})

    assert result.exit_code != 0
    assert field in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.8.9.1", True), ("localhost", True), ("::1", True),
     ("[::1]", True), ("0.0.0.0", False), ("::", False), ("10.0.0.1", False),
     ("api.example.com", False)],
)  # fmt: skip
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback
