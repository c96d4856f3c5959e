"""Bulk retry and delete of dead letters: filters in the body or the query, dry runs, and
the guard against acting on every dead letter by accident."""

from __future__ import annotations

import httpx

from lazarus import Queue

from .conftest import DLQ

BASE = "/api/dlq"


async def remaining(dlq: Queue) -> set[str]:
    return {j.original_data["label"] for j in await dlq.get_dead_letter_jobs()}


async def test_bulk_retry_dry_run_counts_and_changes_nothing(
    client: httpx.AsyncClient, seeded: dict[str, str], dlq: Queue, queue: Queue
) -> None:
    # Given four dead letters, three of them email.*
    # When a bulk retry of email.* is asked as a dry run
    response = await client.post(
        f"{BASE}/retry", params={"dlq": DLQ},
        json={"filter": {"job_type": "email.*"}, "dry_run": True},
    )  # fmt: skip

    # Then it reports three and nothing moved
    assert response.status_code == 200, response.text
    assert response.json() == {"count": 3, "dryRun": True}
    assert await remaining(dlq) == {"a", "b", "c", "d"}
    assert await queue.get_waiting_count() == 0


async def test_bulk_retry_with_a_body_filter_replays_the_matches_into_their_sources(
    client: httpx.AsyncClient, seeded: dict[str, str], dlq: Queue, queue: Queue, other: Queue
) -> None:
    # Given four dead letters; When email.* from jobs are retried (OJS body)
    response = await client.post(
        f"{BASE}/retry", params={"dlq": DLQ},
        json={"filter": {"job_type": "email.*", "queue": "jobs"}},
    )  # fmt: skip

    # Then a and b are back in jobs, c and d still dead
    assert response.json() == {"count": 2, "dryRun": False}
    assert await remaining(dlq) == {"c", "d"}
    assert {j.original_data["label"] for j in await queue.get_waiting()} == {"a", "b"}
    assert await other.get_waiting_count() == 0


async def test_bulk_retry_with_a_query_filter_replays_the_matches(
    client: httpx.AsyncClient, seeded: dict[str, str], dlq: Queue, other: Queue
) -> None:
    # Given four dead letters; When those that raised ValueError are retried (query filter)
    response = await client.post(f"{BASE}/retry", params={"dlq": DLQ, "error_type": "ValueError"})

    # Then d is back in its source queue, other
    assert response.json() == {"count": 1, "dryRun": False}
    assert await remaining(dlq) == {"a", "b", "c"}
    assert [j.original_data["label"] for j in await other.get_waiting()] == ["d"]


async def test_bulk_delete_dry_run_in_the_query_counts_and_deletes_nothing(
    client: httpx.AsyncClient, seeded: dict[str, str], dlq: Queue
) -> None:
    response = await client.delete(BASE, params={"dlq": DLQ, "queue": "jobs", "dry_run": "true"})
    assert response.json() == {"count": 3, "dryRun": True}
    assert await dlq.get_dead_letter_count() == 4


async def test_bulk_delete_with_a_filter_purges_the_matches(
    client: httpx.AsyncClient, seeded: dict[str, str], dlq: Queue
) -> None:
    # Given four dead letters; When the discarded ones are deleted (body filter)
    response = await client.request(
        "DELETE", BASE, params={"dlq": DLQ}, json={"filter": {"reason": "discarded"}}
    )

    # Then only c is gone
    assert response.json() == {"count": 1, "dryRun": False}
    assert await remaining(dlq) == {"a", "b", "d"}


async def test_bulk_operations_without_a_filter_need_all_true(
    client: httpx.AsyncClient, seeded: dict[str, str], dlq: Queue
) -> None:
    # Given four dead letters; When a bulk delete and retry come without any filter
    delete = await client.delete(BASE, params={"dlq": DLQ})
    retry = await client.post(f"{BASE}/retry", params={"dlq": DLQ}, json={})
    dry = await client.delete(BASE, params={"dlq": DLQ, "dry_run": "true"})

    # Then both are refused (a dry run may count everything) and nothing changed
    for refused in (delete, retry):
        assert refused.status_code == 422
        assert refused.json()["error"]["code"] == "filter_required"
        assert refused.json()["error"]["field"] == "filter"
    assert dry.json() == {"count": 4, "dryRun": True}
    assert await dlq.get_dead_letter_count() == 4

    # When all=true is given, in the query or the body, then everything is acted on
    everything = await client.delete(BASE, params={"dlq": DLQ, "all": "true"})
    assert everything.json() == {"count": 4, "dryRun": False}
    assert await dlq.get_dead_letter_count() == 0
    again = await client.post(f"{BASE}/retry", params={"dlq": DLQ}, json={"all": True})
    assert again.json() == {"count": 0, "dryRun": False}


async def test_bulk_filter_in_both_body_and_query_is_refused(
    client: httpx.AsyncClient, seeded: dict[str, str], dlq: Queue
) -> None:
    response = await client.post(
        f"{BASE}/retry", params={"dlq": DLQ, "queue": "jobs"},
        json={"filter": {"queue": "other"}},
    )  # fmt: skip
    assert response.status_code == 422
    assert response.json()["error"]["field"] == "filter"
    assert await dlq.get_dead_letter_count() == 4


async def test_an_unknown_key_of_a_body_filter_is_refused_naming_it_and_nothing_moves(
    client: httpx.AsyncClient, seeded: dict[str, str], dlq: Queue, queue: Queue
) -> None:
    # Given four dead letters, three from jobs
    # When a bulk retry's body filter spells the job type as the v1 API does (jobType)
    response = await client.post(
        f"{BASE}/retry", params={"dlq": DLQ},
        json={"filter": {"queue": "jobs", "jobType": "report.generate"}},
    )  # fmt: skip

    # Then it is refused naming the key, and nothing was replayed
    assert response.status_code == 422, response.text
    assert response.json()["error"]["code"] == "invalid_parameter"
    assert response.json()["error"]["field"] == "filter.jobType"
    assert await remaining(dlq) == {"a", "b", "c", "d"}
    assert await queue.get_waiting_count() == 0
