"""The message-forward service against its functional requirements, FR-001 to FR-010."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis
from examples.message_forward import ForwardJob, Settings
from examples.message_forward.service import Service

from lazarus import Queue
from lazarus.embedded import EmbeddedRedis
from tests.conftest import keys_of, wait_until

from .conftest import Forwarder, message

ROOT = Path(__file__).resolve().parents[2]


async def test_fr001_the_producer_queues_on_message_forward(
    make_service: Any, redis_url: str, prefix: str
) -> None:
    service = await make_service(consume=False)
    job = await service.producer.send(message(7))
    async with Queue("message-forward", connection=redis_url, prefix=prefix) as queue:
        stored = await queue.get_job(job.id)
        assert await queue.get_job_state(job.id) == "waiting"
    assert stored is not None and stored.data["message_id"] == 7


async def test_fr002_the_http_endpoint_and_the_python_api_both_queue(
    http: tuple[httpx.AsyncClient, Service],
) -> None:
    client, service = http
    await service.queue.pause()  # keep both jobs waiting
    response = await client.post("/messages", json=message(1, channel=-5))
    job = await service.producer.send(ForwardJob.model_validate(message(2, channel=-5)))
    assert response.status_code == 202
    assert response.json() == {"jobId": "-5-1", "queue": "message-forward"}
    assert job.id == "-5-2"
    # The same message sent twice is queued once.
    again = await client.post("/messages", json=message(1, channel=-5))
    assert again.json()["jobId"] == "-5-1"
    assert (await service.queue.get_job_counts())["paused"] == 2


async def test_fr002_send_many_checks_every_message_before_queueing_any(
    make_service: Any,
) -> None:
    service = await make_service(consume=False)
    with pytest.raises(ValueError, match=r"^messages\[1\]\.timestamp: Field required"):
        await service.producer.send_many([message(1), {"messageId": 2, "sourceChannelId": 1}])
    assert sum((await service.queue.get_job_counts()).values()) == 0
    jobs = await service.producer.send_many([message(1), message(2)])
    assert [job.id for job in jobs] == ["-100-1", "-100-2"]


async def test_fr003_the_consumer_logs_the_payload(
    redis_url: str, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="message_forward.consumer")
    service = Service(Settings(redis_url=redis_url, prefix=prefix))  # the logging forwarder
    await service.start()
    try:
        await service.producer.send(message(3, text="hello there"))

        async def logged() -> bool:
            return any("hello there" in r.getMessage() for r in caplog.records)

        await wait_until(logged)
    finally:
        await service.stop()
    (record,) = [r for r in caplog.records if "hello there" in r.getMessage()]
    assert record.getMessage().startswith('forward {"messageId": 3, "sourceChannelId": -100')


async def test_fr004_the_payload_carries_every_field(
    make_service: Any, forwarder: Forwarder
) -> None:
    service = await make_service()
    group = [
        {"mediaType": "photo", "mediaFileId": "f1", "caption": "one"},
        {"mediaType": "video", "mediaFileId": "f2"},
    ]
    full = message(
        4, text=None, caption="album", mediaType="photo", mediaFileId="f1",
        mediaGroupId="g-9", mediaGroup=group,
    )  # fmt: skip
    await service.producer.send(full)
    await service.producer.send({"messageId": 5, "sourceChannelId": 1,
                                 "timestamp": "2026-02-17T10:00:00+02:00"})  # fmt: skip

    async def both() -> bool:
        return len(forwarder.forwarded) == 2

    await wait_until(both)
    by_id = {m.message_id: m for m in forwarder.forwarded}
    assert by_id[4].model_dump(mode="json", by_alias=True) == {
        **full,
        "mediaGroup": [{**group[0]}, {**group[1], "caption": None}],
    }
    bare = by_id[5]
    assert (bare.text, bare.caption, bare.media_type, bare.media_group) == (None,) * 4
    assert bare.timestamp.utcoffset() is not None


async def test_fr004_a_payload_missing_a_field_is_refused_naming_it(
    http: tuple[httpx.AsyncClient, Service], raw: aioredis.Redis, prefix: str
) -> None:
    client, service = http
    no_id = {k: v for k, v in message(6).items() if k != "messageId"}
    response = await client.post("/messages", json=no_id)
    assert response.status_code == 422
    assert response.json()["error"]["message"] == "messageId: Field required"
    with pytest.raises(ValueError, match=r"^data\.timestamp: Field required"):
        await service.producer.send({"messageId": 6, "sourceChannelId": 1})
    bad_media = await client.post("/messages", json=message(6, mediaType="hologram"))
    assert bad_media.json()["error"]["message"].startswith("mediaType: Input should be")
    assert sum((await service.queue.get_job_counts()).values()) == 0
    assert not [k for k in await keys_of(raw, prefix) if k.endswith(("-1-6", "-100-6"))]


async def test_fr005_jobs_get_3_attempts_with_exponential_backoff_from_5_seconds(
    make_service: Any,
) -> None:
    service = await make_service(consume=False)
    job = await service.producer.send(message(8))
    stored = await service.queue.get_job(job.id)
    assert stored is not None
    assert stored.opts.attempts == 3
    assert (stored.opts.backoff.type, stored.opts.backoff.delay) == ("exponential", 5000)


async def test_fr005_each_retry_waits_twice_as_long_as_the_one_before(
    make_service: Any, forwarder: Forwarder
) -> None:
    # Given a forwarder that always fails, and a backoff of 200 ms (5 s in production)
    forwarder.failing.add(-100)
    service = await make_service(backoff_ms=200)
    await service.producer.send(message(9))

    async def dead() -> bool:
        return await service.dead_letters.get_dead_letter_count() == 1

    await wait_until(dead)
    (letter,) = await service.dead_letters.get_dead_letter_jobs()
    assert letter.dead_letter is not None
    first, second, third = letter.dead_letter.attempts
    # Then the 2nd attempt began at least 200 ms after the 1st failed, the 3rd 400 ms after
    assert second.started_at - first.finished_at >= 200
    assert third.started_at - second.finished_at >= 400
    assert [a.attempt for a in letter.dead_letter.attempts] == [1, 2, 3]


async def test_fr006_defaults_keep_1000_completed_and_5000_failed(make_service: Any) -> None:
    settings = Settings()
    assert (settings.keep_completed, settings.keep_failed) == (1000, 5000)
    service = await make_service(consume=False)
    job = await service.producer.send(message(10))
    stored = await service.queue.get_job(job.id)
    assert stored is not None
    assert stored.opts.to_dict()["removeOnComplete"] == {"count": 1000}
    assert stored.opts.to_dict()["removeOnFail"] == {"count": 5000}


async def test_fr007_an_exhausted_job_moves_to_message_forward_dlq_with_payload_and_reason(
    make_service: Any, forwarder: Forwarder, redis_url: str, prefix: str
) -> None:
    forwarder.failing.add(-7)
    service = await make_service(backoff_ms=10)
    job = await service.producer.send(message(11, channel=-7))
    async with Queue("message-forward-dlq", connection=redis_url, prefix=prefix) as dlq:

        async def dead() -> bool:
            return await dlq.find_dead_letter_by_original_id(job.id) is not None

        await wait_until(dead)
        letter = await dlq.find_dead_letter_by_original_id(job.id)
    assert letter is not None and letter.dead_letter is not None
    assert letter.original_data["message_id"] == 11
    assert letter.dead_letter.failed_reason == "channel -7 did not answer"
    assert letter.dead_letter.reason == "attempts_exhausted"
    assert await service.queue.get_job_state(job.id) == "unknown"  # it left the queue


async def test_fr008_health_reports_queue_statistics_beside_redis(
    http: tuple[httpx.AsyncClient, Service],
) -> None:
    client, _ = http
    body = (await client.get("/health")).json()
    assert body["redis"] == {"reachable": True}
    assert body["queue"] == {
        "name": "message-forward", "active": 0, "waiting": 0, "delayed": 0, "failed": 0,
        "completed": 0, "paused": False,
    }  # fmt: skip
    assert body["deadLetterQueue"] == {"name": "message-forward-dlq", "depth": 0}


async def test_fr009_the_dashboard_shows_the_queues_and_a_failed_jobs_reason_and_payload(
    http: tuple[httpx.AsyncClient, Service], forwarder: Forwarder
) -> None:
    client, service = http
    forwarder.gone.add(-9)
    await client.post("/messages", json=message(12, channel=-9, text="lost words"))

    async def dead() -> bool:
        return await service.dead_letters.get_dead_letter_count() == 1

    await wait_until(dead)
    overview = await client.get("/dashboard")
    assert overview.status_code == 200
    assert "message-forward-dlq" in overview.text
    (letter,) = await service.dead_letters.get_dead_letter_jobs()
    page = await client.get(f"/dashboard/queues/message-forward-dlq/dead-letters/{letter.id}")
    assert page.status_code == 200
    assert "channel -9 was deleted" in page.text
    assert "lost words" in page.text


def test_fr010_the_service_fails_fast_with_a_clear_error_when_redis_is_down() -> None:
    with EmbeddedRedis() as server:
        url = server.url  # a port that answered once, and is closed once it stops
    env = {**os.environ, "LAZARUS_REDIS_URL": url}
    result = subprocess.run(
        [sys.executable, "-m", "examples.message_forward", "--port", "0"],
        capture_output=True, text=True, timeout=60, cwd=ROOT, env=env, check=False,
    )  # fmt: skip
    assert result.returncode == 2
    assert "message-forward cannot start: Redis at 127.0.0.1:" in result.stderr
    assert "does not answer" in result.stderr


async def test_fr010_transient_errors_are_logged_as_warnings(
    caplog: pytest.LogCaptureFixture, forwarder: Forwarder
) -> None:
    caplog.set_level(logging.WARNING)
    with EmbeddedRedis() as server:
        service = Service(Settings(redis_url=server.url), forward=forwarder)
        await service.start()
        server.stop()  # Redis goes away while the service runs

        async def warned() -> bool:
            return any(
                r.levelno == logging.WARNING and r.name == "lazarus.worker" for r in caplog.records
            )

        try:
            await wait_until(warned, timeout=30)
            report = await service.health()
        finally:
            await service.stop()
    assert report["status"] == "unavailable"
    assert any(r.name == "message_forward" and "unavailable" in r.getMessage()
               for r in caplog.records)  # fmt: skip
