"""The health page of a dead letter queue."""

from __future__ import annotations

import httpx

from lazarus import Queue

from .conftest import MakeWorker, dead_letter


async def test_health_page_shows_measures_charts_and_alerts(
    client: httpx.AsyncClient, queue: Queue, make_worker: MakeWorker
) -> None:
    # Given three dead letters: two timeouts and one other error
    await dead_letter(make_worker, queue, [("charge", {"error": "TimeoutError"})] * 2)
    await dead_letter(make_worker, queue, [("sms", {"error": "ValueError"})])

    # When the health page of the DLQ is loaded
    response = await client.get("/dashboard/queues/jobs-dlq/health")

    # Then it shows the backlog, the bars by status and error type, and the alert rules
    assert response.status_code == 200
    page = response.text
    assert '<th>Backlog (pending)</th><td class="num">3</td>' in page
    assert "<title>TimeoutError: 2</title>" in page
    assert "<title>pending: 3</title>" in page
    assert "DLQBacklogGrowing</strong> (critical)" in page
    assert "<script" not in page
    listing = await client.get("/dashboard/queues/jobs-dlq/dead-letters")
    assert 'href="/dashboard/queues/jobs-dlq/health"' in listing.text


async def test_health_page_of_an_unknown_queue_is_404(client: httpx.AsyncClient) -> None:
    response = await client.get("/dashboard/queues/nope/health")

    assert response.status_code == 404
