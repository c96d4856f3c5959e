"""The real ``python -m lazarus.cli`` in a subprocess, configured by LAZARUS_REDIS_URL."""

from __future__ import annotations

import asyncio
import json
import os
import sys

from lazarus import Queue

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
