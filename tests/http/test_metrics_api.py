"""``GET /metrics``: the Prometheus families and their values."""

from __future__ import annotations

import itertools

import httpx
from fastapi import FastAPI
from prometheus_client.parser import text_string_to_metric_families

from lazarus._connection import now_ms
from lazarus.http import create_app

from .conftest import DLQ

BASE = "/api/dlq"


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of the exposition, keyed by name and labels."""
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def key(name: str, **labels: str) -> tuple[str, frozenset[tuple[str, str]]]:
    return name, frozenset(labels.items())


async def test_metrics_expose_job_counts_dead_letters_and_counters(
    client: httpx.AsyncClient, seeded: dict[str, str]
) -> None:
    # Given four dead letters (three from jobs: two exhausted, one discarded; one from other),
    # of which one is replayed and one purged
    await client.post(f"{BASE}/{seeded['a']}/retry", params={"dlq": DLQ})
    await client.delete(f"{BASE}/{seeded['d']}", params={"dlq": DLQ})

    # When the metrics are scraped
    response = await client.get("/metrics")

    # Then every family is there with the right values
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    values = samples(response.text)
    assert values[key("lazarus_jobs", queue="jobs", state="waiting")] == 1
    assert values[key("lazarus_jobs", queue="jobs", state="failed")] == 0
    assert values[key("lazarus_jobs", queue=DLQ, state="waiting")] == 2
    assert values[key("lazarus_dead_letters", queue=DLQ)] == 2
    assert key("lazarus_dead_letters", queue="jobs") not in values
    assert values[key("lazarus_oldest_dead_letter_age_seconds", queue=DLQ)] >= 0
    dead = "lazarus_dead_lettered_total"
    assert values[key(dead, queue=DLQ, source_queue="jobs", reason="attempts_exhausted")] == 2
    assert values[key(dead, queue=DLQ, source_queue="jobs", reason="discarded")] == 1
    assert values[key(dead, queue=DLQ, source_queue="other", reason="attempts_exhausted")] == 1
    assert values[key("lazarus_replayed_total", queue=DLQ)] == 1
    assert values[key("lazarus_purged_total", queue=DLQ)] == 1
    assert values[key("lazarus_queue_paused", queue="jobs")] == 0
    # The outcomes of each queue's jobs: its three dead-lettered ones failed for good
    assert values[key("lazarus_jobs_failed_total", queue="jobs")] == 3
    assert values[key("lazarus_jobs_failed_total", queue="other")] == 1
    assert values[key("lazarus_jobs_completed_total", queue="jobs")] == 0
    assert values[key("lazarus_jobs_failed_total", queue=DLQ)] == 0


async def test_oldest_dead_letter_age_is_measured_from_the_oldest_dead_letter(
    client: httpx.AsyncClient, seeded: dict[str, str]
) -> None:
    # Given dead letters, the oldest dead-lettered at a known time
    page = (await client.get(BASE, params={"dlq": DLQ})).json()
    oldest = min(item["deadLetteredAt"] for item in page["data"])

    # When the metrics are scraped
    before = now_ms()
    values = samples((await client.get("/metrics")).text)
    after = now_ms()

    # Then the age lies between the scrape's start and end, seen from the oldest
    age = values[key("lazarus_oldest_dead_letter_age_seconds", queue=DLQ)]
    assert (before - oldest) / 1000 <= age <= (after - oldest) / 1000


async def test_each_app_has_its_own_registry(
    app: FastAPI, client: httpx.AsyncClient, redis_url: str, prefix: str
) -> None:
    # Given a second app on the same prefix
    second = create_app(connection=redis_url, prefix=prefix, auth=False)
    transport = httpx.ASGITransport(app=second)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as other:
        # When both are scraped, twice
        responses = [await c.get("/metrics") for c in (client, other, client, other)]
    await second.state.ops.close()

    # Then each renders on its own (no duplicate registration in a shared registry)
    assert [r.status_code for r in responses] == [200] * 4
    assert app.state.metrics_exporter.registry is not second.state.metrics_exporter.registry


async def test_a_queue_s_throughput_per_minute(
    client: httpx.AsyncClient, seeded: dict[str, str]
) -> None:
    # Given three jobs of "jobs" dead-lettered (failed for good), none completed
    response = await client.get("/api/queues/jobs/metrics", params={"minutes": 5})

    assert response.status_code == 200
    body = response.json()
    assert (body["completed"], body["failed"]) == (0, 3)
    assert [m["count"] for m in body["completedPerMinute"]] == [0] * 5
    assert sum(m["count"] for m in body["failedPerMinute"]) == 3
    starts = [m["at"] for m in body["failedPerMinute"]]
    assert starts == sorted(starts) and starts[-1] <= now_ms() < starts[-1] + 60_000
    assert all(b - a == 60_000 for a, b in itertools.pairwise(starts))


async def test_throughput_refuses_bad_minutes_and_unknown_queues(
    client: httpx.AsyncClient, seeded: dict[str, str]
) -> None:
    for minutes in ("0", "121", "x"):
        response = await client.get("/api/queues/jobs/metrics", params={"minutes": minutes})
        assert response.status_code == 422
        assert "minutes" in response.text
    assert (await client.get("/api/queues/nope/metrics")).status_code == 404
