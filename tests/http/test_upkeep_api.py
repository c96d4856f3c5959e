"""A dead letter queue's health, retention policy and pruning over HTTP, and its health in
``/metrics``."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from lazarus import Queue

from .conftest import DLQ
from .test_metrics_api import key, samples


async def test_dead_letter_health_reports_backlog_and_error_types(
    client: httpx.AsyncClient, seeded: dict[str, str]
) -> None:
    response = await client.get(f"/api/queues/{DLQ}/dead-letter-health")

    assert response.status_code == 200, response.text
    body = response.json()
    assert body["backlog"] == 4 and body["byStatus"] == {"pending": 4}
    assert body["errorTypes"]["TimeoutError"] == 1
    assert body["resolutionRate"] is None


async def test_health_of_an_unknown_queue_is_404(client: httpx.AsyncClient) -> None:
    response = await client.get("/api/queues/nope/dead-letter-health")

    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


async def test_retention_is_set_read_back_and_applied_by_prune(
    client: httpx.AsyncClient, seeded: dict[str, str], redis_url: str, prefix: str
) -> None:
    response = await client.put(f"/api/queues/{DLQ}/retention", json={"maxCount": 1})
    assert response.status_code == 200, response.text

    async with Queue(DLQ, connection=redis_url, prefix=prefix) as dlq:
        assert (await dlq.get_retention_policy()).max_count == 1
    read = await client.get(f"/api/queues/{DLQ}/retention")
    assert read.json()["maxCount"] == 1 and read.json()["statuses"]["failed"]["prune"] == "archive"

    pruned = await client.post(f"/api/queues/{DLQ}/prune")
    assert pruned.json() == {"pruned": 3}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"maxAge": "180 days"}, "maxAge"),
        ({"maxAge": "P0D"}, "maxAge"),
        ({"statuses": {"failed": {"maxAge": "90 days"}}}, "statuses.failed.maxAge"),
        ({"statuses": {"lost": {"maxAge": "P1D"}}}, "statuses"),
        ({"max_age": "P1D", "maxcount": 5}, "max_age"),
        ({"maxAge": "P1D", "maxcount": 5}, "maxcount"),
        ({"statuses": {"pending": {"max_age": "P1D"}}}, "statuses.pending.max_age"),
        ({"maxCount": True}, "maxCount"),
        ({"maxCount": 5.0}, "maxCount"),
    ],
)
async def test_a_bad_policy_is_a_422_naming_the_field_and_writes_nothing(
    client: httpx.AsyncClient, seeded: dict[str, str], dlq: Queue, body: Any, field: str
) -> None:
    # Given a dead letter queue with no stored policy
    # When a policy comes with a duration or a status the library refuses, a field of another
    # spelling, or true or 5.0 for a count
    response = await client.put(f"/api/queues/{DLQ}/retention", json=body)

    # Then the error's field says which, and no policy (not even the default) was stored
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert (error["code"], error["field"]) == ("invalid_parameter", field)
    assert field in error["message"]
    assert await dlq.client.exists(dlq.keys.dl_retention) == 0


async def test_changing_retention_needs_the_token(
    anonymous: httpx.AsyncClient, seeded: dict[str, str]
) -> None:
    assert (await anonymous.put(f"/api/queues/{DLQ}/retention", json={})).status_code == 401
    assert (await anonymous.post(f"/api/queues/{DLQ}/prune")).status_code == 401


async def test_metrics_carry_each_dead_letter_queues_health(
    client: httpx.AsyncClient, seeded: dict[str, str]
) -> None:
    found = samples((await client.get("/metrics")).text)

    assert found[key("lazarus_dlq_backlog", queue=DLQ)] == 4
    assert found[key("lazarus_dlq_dead_letters_by_status", queue=DLQ, status="pending")] == 4
    assert found[key("lazarus_dlq_error_types", queue=DLQ, error_type="TimeoutError")] == 1
    assert found[key("lazarus_dlq_pruned_total", queue=DLQ, action="delete")] == 0
    assert key("lazarus_dlq_resolution_rate", queue=DLQ) not in found
