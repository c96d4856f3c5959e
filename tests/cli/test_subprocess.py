"""The real ``python -m lazarus.cli`` in a subprocess, configured by LAZARUS_REDIS_URL."""

from __future__ import annotations

import asyncio
import json
import os
import sys

import pytest

from lazarus import Queue
from lazarus.embedded import EmbeddedRedis

from .conftest import MakeWorker, dead_letter


async def test_dlq_list_json_in_a_real_process_reads_the_url_from_the_environment(
    queue: Queue, make_worker: MakeWorker, redis_url: str, prefix: str
) -> None:
    # Given two dead letters
    ids = await dead_letter(queue, make_worker, ("charge", {"n": 1}), ("refund", {"n": 2}))

    # When `python -m lazarus.cli dlq list` runs with only LAZARUS_REDIS_URL to find Redis
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "lazarus.cli", "dlq", "list", "jobs-dlq", "--prefix", prefix,
        "--json",
        env={**os.environ, "LAZARUS_REDIS_URL": redis_url},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    stdout, stderr = await asyncio.wait_for(process.communicate(), 60)

    # Then it exits 0 and prints one JSON document with both, newest first
    assert process.returncode == 0, stderr.decode()
    document = json.loads(stdout)
    assert [d["id"] for d in document["deadLetters"]] == ids[::-1]
    assert document["total"] == 2


async def test_redis_on_a_busy_port_exits_1_with_one_line_instead_of_claiming_success(
    redis_server: EmbeddedRedis,
) -> None:
    # Given a port the test's own Redis listens on
    busy = str(redis_server.port)

    # When `lazarus redis` is asked to start another server there
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "lazarus.cli", "redis", "--port", busy,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(), 60)
    except asyncio.TimeoutError:  # it took the other server's answer for its own and waits
        process.kill()
        await process.wait()
        pytest.fail("lazarus redis reported a server that had died and kept running")

    # Then it says why in one line on stderr, claims nothing on stdout, and exits 1
    assert process.returncode == 1
    assert stdout == b""
    lines = stderr.decode().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("Error: redis-server exited at start-up")
    assert "Address already in use" in lines[0]
    assert redis_server.running  # the server that held the port is untouched
