"""The message-forward service against its success criteria (SC-001 to SC-004; SC-005's
throughput is a benchmark: benchmarks/message_forward.py) and its edge cases: payload size,
retention, crash recovery."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis
from examples.message_forward import Service

from tests.conftest import wait_until

from .conftest import Forwarder, message

ROOT = Path(__file__).resolve().parents[2]


async def test_sc001_a_queued_message_is_consumed_and_logged_within_5_seconds(
    http: tuple[httpx.AsyncClient, Service], forwarder: Forwarder
) -> None:
    client, _ = http
    await client.post("/messages", json=message(20))

    async def consumed() -> bool:
        return [m.message_id for m in forwarder.forwarded] == [20]

    await wait_until(consumed, timeout=5)


@pytest.mark.timeout(90)
async def test_sc002_a_job_failing_3_times_reaches_the_dead_letter_queue_within_60_seconds(
    make_service: Any, forwarder: Forwarder
) -> None:
    # Given the production settings: 3 attempts, 5 s then 10 s apart
    forwarder.failing.add(-100)
    service = await make_service()
    job = await service.producer.send(message(21))

    async def dead() -> bool:
        return await service.dead_letters.find_dead_letter_by_original_id(job.id) is not None

    await wait_until(dead, timeout=60)
    assert forwarder.started == 3


async def test_sc003_health_counts_match_the_jobs_in_each_state(
    http: tuple[httpx.AsyncClient, Service], forwarder: Forwarder
) -> None:
    # Given one job running (held), one dead-lettered, one waiting for a retry and two waiting
    client, service = http
    forwarder.gone.add(-3)
    await client.post("/messages", json=message(30, channel=-3))

    async def one_dead() -> bool:
        return await service.dead_letters.get_dead_letter_count() == 1

    await wait_until(one_dead)
    forwarder.hold = asyncio.Event()
    await client.post("/messages", json=message(31))

    async def running() -> bool:
        return forwarder.started == 2

    await wait_until(running)
    await service.queue.pause()
    for n in (32, 33):
        await client.post("/messages", json=message(n))
    await service.queue.add("forward", message(34), delay=60_000, job_id="later")
    # When the health endpoint is called
    body = (await client.get("/health")).json()
    forwarder.hold.set()
    # Then each count is what is there
    stats = body["queue"]
    assert (stats["active"], stats["waiting"], stats["delayed"]) == (1, 2, 1)
    assert (stats["failed"], stats["completed"], stats["paused"]) == (0, 0, True)
    assert body["deadLetterQueue"]["depth"] == 1


async def test_sc004_history_keeps_at_most_the_configured_completed_and_failed_jobs(
    make_service: Any, forwarder: Forwarder
) -> None:
    # Given limits of 3 completed and 2 failed (1,000 and 5,000 in production)
    forwarder.gone.add(-4)
    service = await make_service(keep_completed=3, keep_failed=2, concurrency=1)
    # When 6 messages are forwarded, then 4 fail for good, one after another
    for n in range(6):
        await service.producer.send(message(40 + n))
    for n in range(4):
        await service.producer.send(message(50 + n, channel=-4))

    async def newest_kept() -> bool:
        letters = await service.dead_letters.get_dead_letter_jobs()
        return sorted(j.original_data["message_id"] for j in letters) == [52, 53]

    # Then the 2 newest dead letters and 3 completed jobs are kept
    await wait_until(newest_kept)
    assert await service.queue.get_completed_count() == 3
    assert len(forwarder.forwarded) == 6


async def test_an_oversized_request_is_refused_before_anything_is_written(
    http: tuple[httpx.AsyncClient, Service],
) -> None:
    # Given a valid message padded past the size limit (64 KiB)
    client, service = http
    valid = httpx.Request("POST", "/", json=message(60)).content
    body = valid + b" " * service.settings.max_payload_bytes
    # When it is posted
    response = await client.post(
        "/messages", content=body, headers={"content-type": "application/json"}
    )
    # Then it is refused, and not queued
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "payload_too_large"
    assert await service.queue.get_job("-100-60") is None


async def test_the_python_producer_refuses_a_payload_over_the_size_limit(
    make_service: Any,
) -> None:
    service = await make_service(consume=False, max_payload_bytes=1024)
    with pytest.raises(ValueError, match="over the limit of 1024"):
        await service.producer.send(message(61, text="z" * 2000))
    assert await service.queue.get_job("-100-61") is None


@pytest.mark.timeout(60)
async def test_a_job_of_a_crashed_consumer_is_picked_up_by_another(
    make_service: Any, forwarder: Forwarder, redis_url: str, prefix: str, raw: aioredis.Redis
) -> None:
    # Given a consumer process that has taken a job and hangs in it
    producer = await make_service(consume=False)
    job = await producer.producer.send(message(70))
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.message_forward.hanging_consumer", redis_url, prefix],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    try:

        async def taken() -> bool:
            return await raw.llen(f"{prefix}:started") == 1

        await wait_until(taken, timeout=30)
    finally:
        # When it is killed mid-job
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    # Then another consumer gets the job once its lease runs out, and forwards it
    await make_service(lock_duration_ms=1000, stalled_interval_ms=500)

    async def forwarded() -> bool:
        return await producer.queue.get_job_state(job.id) == "completed"

    await wait_until(forwarded, timeout=20)
    assert [m.message_id for m in forwarder.forwarded] == [70]
