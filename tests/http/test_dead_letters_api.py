"""The OJS dead-letter binding: list with every filter and pagination, get one, retry one
(with changes), delete one, stats, and the admin alias, against a real Redis."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from lazarus import Queue
from lazarus.http.schemas import iso

from .conftest import DLQ

BASE = "/api/dlq"


async def listed(client: httpx.AsyncClient, **params: Any) -> dict[str, Any]:
    response = await client.get(BASE, params={"dlq": DLQ, **params})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def labels(page: dict[str, Any]) -> list[str]:
    return [item["payload"]["label"] for item in page["data"]]


async def dead_lettered_at(client: httpx.AsyncClient) -> dict[str, int]:
    page = await listed(client, limit=500)
    return {item["payload"]["label"]: item["deadLetteredAt"] for item in page["data"]}


async def test_list_returns_every_dead_letter_newest_first_in_the_pagination_shape(
    client: httpx.AsyncClient, seeded: dict[str, str]
) -> None:
    # Given four dead letters (a, b, c from jobs, then d from other)
    # When the dead letter queue is listed
    page = await listed(client)

    # Then the page has OJS pagination and seed 003's fields, newest first, with metadata
    assert set(page) == {"data", "pagination", "total", "page", "limit", "totalPages"}
    assert page["pagination"] == {"total": 4, "has_more": False, "next_cursor": None,
                                  "limit": 20}  # fmt: skip
    assert (page["total"], page["page"], page["limit"], page["totalPages"]) == (4, 1, 20, 1)
    assert labels(page) == ["d", "c", "b", "a"]
    a = page["data"][3]
    assert a["id"] == seeded["a"]
    assert a["name"] == a["jobType"] == "email.send"
    assert a["payload"] == {"label": "a", "error": "TimeoutError", "message": "smtp timeout",
                            "to": "ada@x.io"}  # fmt: skip
    assert a["_dlqMeta"]["sourceQueue"] == a["sourceQueue"] == "jobs"
    assert a["_dlqMeta"]["errorType"] == a["errorType"] == "TimeoutError"
    assert a["_dlqMeta"]["failedReason"] == "smtp timeout"
    assert a["_dlqMeta"]["reason"] == a["reason"] == "attempts_exhausted"
    assert a["_dlqMeta"]["status"] == a["status"] == "pending"
    assert a["_dlqMeta"]["attempts"][0]["errorType"] == "TimeoutError"
    assert (a["attemptsMade"], a["maxAttempts"], a["replayCount"]) == (1, 1, 0)
    assert a["failedAt"] == iso(a["deadLetteredAt"])
    assert a["queue"] == DLQ


async def test_list_pages_through_the_dead_letters_by_cursor(
    client: httpx.AsyncClient, seeded: dict[str, str]
) -> None:
    # Given four dead letters; When they are read three at a time, following next_cursor
    first = await listed(client, limit=3)
    second = await listed(client, limit=3, cursor=first["pagination"]["next_cursor"])

    # Then the pages split them in order, and only the first says it has more
    assert labels(first) == ["d", "c", "b"] and labels(second) == ["a"]
    assert first["pagination"]["has_more"] and first["pagination"]["next_cursor"]
    assert not second["pagination"]["has_more"] and second["pagination"]["next_cursor"] is None
    assert (first["page"], second["page"]) == (1, None)
    for page in (first, second):
        assert (page["pagination"]["total"], page["total"], page["totalPages"]) == (4, 4, 2)


async def test_list_pages_oldest_first_by_cursor(
    client: httpx.AsyncClient, seeded: dict[str, str]
) -> None:
    first = await listed(client, limit=3, order="oldest")
    second = await listed(client, limit=3, order="oldest",
                          cursor=first["pagination"]["next_cursor"])  # fmt: skip
    assert labels(first) == ["a", "b", "c"] and labels(second) == ["d"]


async def test_page_numbers_still_work_for_older_clients(
    client: httpx.AsyncClient, seeded: dict[str, str]
) -> None:
    # Given four dead letters; When they are read three at a time by page number
    first = await listed(client, limit=3, page=1)
    second = await listed(client, limit=3, page=2)
    beyond = await listed(client, limit=3, page=3)

    # Then the pages split them in order and agree on the totals
    assert labels(first) == ["d", "c", "b"]
    assert labels(second) == ["a"]
    assert labels(beyond) == []
    for page in (first, second, beyond):
        assert (page["total"], page["limit"], page["totalPages"]) == (4, 3, 2)
    assert second["page"] == 2 and not second["pagination"]["has_more"]
    assert first["pagination"]["has_more"]


async def test_a_bad_cursor_or_a_cursor_with_a_page_is_a_422_naming_it(
    client: httpx.AsyncClient, seeded: dict[str, str]
) -> None:
    newest = await listed(client, limit=1)
    cursor = newest["pagination"]["next_cursor"]

    garbage = await client.get(BASE, params={"dlq": DLQ, "cursor": "not-a-cursor"})
    other_order = await client.get(BASE, params={"dlq": DLQ, "cursor": cursor, "order": "oldest"})
    both = await client.get(BASE, params={"dlq": DLQ, "cursor": cursor, "page": 2})
    numbered_oldest = await client.get(BASE, params={"dlq": DLQ, "order": "oldest", "page": 2})

    for response, field in ((garbage, "cursor"), (other_order, "cursor"), (both, "page"),
                            (numbered_oldest, "page")):  # fmt: skip
        assert response.status_code == 422, response.text
        assert response.json()["error"]["field"] == field


async def test_a_text_filter_pages_without_a_total_and_count_counts(
    client: httpx.AsyncClient, seeded: dict[str, str]
) -> None:
    # Given four dead letters, two with "to" in their payload
    # When they are listed by payload text, and counted
    page = await listed(client, args='"to":"')
    count = await client.get(f"{BASE}/count", params={"dlq": DLQ, "args": '"to":"'})
    exact = await client.get(f"{BASE}/count", params={"dlq": DLQ, "queue": "jobs"})

    # Then the page comes without a total, and /count has it
    assert set(labels(page)) == {"a", "d"}
    assert page["total"] is None and page["pagination"]["total"] is None
    assert page["totalPages"] is None
    assert count.json() == {"count": 2} and exact.json() == {"count": 3}


async def test_status_filters_the_list(client: httpx.AsyncClient, seeded: dict[str, str]) -> None:
    pending = await listed(client, status="pending")
    resolved = await listed(client, status="resolved")
    bad = await client.get(BASE, params={"dlq": DLQ, "status": "lost"})

    assert set(labels(pending)) == {"a", "b", "c", "d"} and pending["total"] == 4
    assert labels(resolved) == [] and resolved["total"] == 0
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "status"


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"queue": "other"}, {"d"}),
        ({"queue": "jobs"}, {"a", "b", "c"}),
        ({"job_type": "email.send"}, {"a", "d"}),
        ({"job_type": "email.*"}, {"a", "b", "d"}),
        ({"job_type": "email"}, set()),
        ({"error_type": "TimeoutError"}, {"a"}),
        ({"args": "ada@x.io"}, {"a"}),
        ({"args": '"to":"'}, {"a", "d"}),
        ({"failed_reason": "REFUSED"}, {"b"}),
        ({"reason": "discarded"}, {"c"}),
        ({"reason": "attempts_exhausted", "queue": "jobs"}, {"a", "b"}),
        ({"job_type": "email.*", "queue": "jobs", "error_type": "ConnectionError"}, {"b"}),
    ],
)
async def test_list_applies_each_filter(
    client: httpx.AsyncClient, seeded: dict[str, str], params: dict[str, str], expected: set[str]
) -> None:
    # Given four dead letters; When the list is filtered
    page = await listed(client, **params)

    # Then exactly the matching ones are listed, and counted unless that needs a scan
    assert set(labels(page)) == expected
    text_search = "args" in params or "failed_reason" in params
    assert page["total"] == (None if text_search else len(expected))


async def test_list_filters_by_time_given_in_ms_or_iso_8601(
    client: httpx.AsyncClient, seeded: dict[str, str]
) -> None:
    # Given four dead letters and when each was dead-lettered
    at = await dead_lettered_at(client)
    pivot = at["c"]
    after = {label for label, t in at.items() if t >= pivot}
    before = {label for label, t in at.items() if t <= pivot}

    # When the list is bounded by c's time, in ms and in ISO 8601 (with Z or an offset)
    iso_pivot = iso(pivot)
    assert iso_pivot is not None
    by_ms = await listed(client, since=pivot)
    by_iso = await listed(client, since=iso_pivot)
    by_offset = await listed(client, since=iso_pivot.replace("Z", "+00:00"))
    until = await listed(client, until=iso_pivot)
    exactly = await listed(client, since=pivot, until=pivot)

    # Then since and until are inclusive bounds, whatever the notation
    assert set(labels(by_ms)) == set(labels(by_iso)) == set(labels(by_offset)) == after
    assert set(labels(until)) == before
    assert set(labels(exactly)) == after & before
    assert "c" in after & before


async def test_get_one_dead_letter_returns_it_with_its_metadata(
    client: httpx.AsyncClient, seeded: dict[str, str]
) -> None:
    # Given the dead letter c; When it is fetched by id
    response = await client.get(f"{BASE}/{seeded['c']}", params={"dlq": DLQ})

    # Then it comes with its payload and why it died
    assert response.status_code == 200
    body = response.json()
    assert body["id"] == seeded["c"]
    assert body["payload"]["label"] == "c"
    assert body["_dlqMeta"]["reason"] == "discarded"
    assert body["_dlqMeta"]["errorType"] == "DeadLetterError"
    assert body["_dlqMeta"]["stacktrace"]


async def test_retry_one_replays_it_into_its_source_queue(
    client: httpx.AsyncClient, seeded: dict[str, str], queue: Queue, dlq: Queue
) -> None:
    # Given the dead letter a (from jobs); When it is retried without changes
    response = await client.post(f"{BASE}/{seeded['a']}/retry", params={"dlq": DLQ})

    # Then a new job with the original payload waits in jobs and the dead letter is processing
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["queue"] == "jobs"
    assert body["replayedFrom"] == seeded["a"]
    assert body["name"] == "email.send"
    replayed = await queue.get_job(body["id"])
    assert replayed is not None
    assert replayed.original_data["label"] == "a"
    assert replayed.replay_count == 1
    assert await queue.get_job_state(body["id"]) == "waiting"
    letter = await dlq.peek_dead_letter(seeded["a"])
    assert letter is not None and letter.dead_letter is not None
    assert letter.dead_letter.status == "processing"


async def test_retry_one_applies_the_changes_in_its_body(
    client: httpx.AsyncClient, seeded: dict[str, str], redis_url: str, prefix: str
) -> None:
    # Given the dead letter b; When it is retried with OJS changes
    changes = {"retry": {"max_attempts": 5}, "priority": 3, "queue": "elsewhere"}
    response = await client.post(f"{BASE}/{seeded['b']}/retry", params={"dlq": DLQ}, json=changes)

    # Then the new job is in the other queue with the new attempts and priority
    assert response.status_code == 200, response.text
    assert response.json()["queue"] == "elsewhere"
    async with Queue("elsewhere", connection=redis_url, prefix=prefix) as elsewhere:
        new = await elsewhere.get_job(response.json()["id"])
        assert new is not None
        assert (new.opts.attempts, new.opts.priority) == (5, 3)
        assert await elsewhere.get_job_state(new.id) == "prioritized"


async def test_delete_one_purges_it(
    client: httpx.AsyncClient, seeded: dict[str, str], dlq: Queue
) -> None:
    # Given the dead letter d; When it is deleted
    response = await client.delete(f"{BASE}/{seeded['d']}", params={"dlq": DLQ})

    # Then the answer is empty, it is gone, and the others remain
    assert response.status_code == 204
    assert response.content == b""
    missing = await client.get(f"{BASE}/{seeded['d']}", params={"dlq": DLQ})
    assert missing.status_code == 404
    assert await dlq.get_dead_letter_count() == 3


async def test_stats_count_by_type_error_source_and_reason(
    client: httpx.AsyncClient, seeded: dict[str, str]
) -> None:
    # Given four dead letters; When the stats are read, then with a filter
    response = await client.get(f"{BASE}/stats", params={"dlq": DLQ})
    filtered = await client.get(f"{BASE}/stats", params={"dlq": DLQ, "queue": "jobs"})

    # Then they count each group and bound the dead-lettering times
    assert response.status_code == 200
    stats = response.json()
    at = await dead_lettered_at(client)
    assert stats["total"] == 4
    assert {(g["jobType"], g["count"]) for g in stats["byType"]} == {
        ("email.send", 2), ("email.bounce", 1), ("report.generate", 1)
    }  # fmt: skip
    assert stats["byType"][0] == {"jobType": "email.send", "count": 2}
    assert {(g["errorType"], g["count"]) for g in stats["byErrorType"]} == {
        ("TimeoutError", 1), ("ConnectionError", 1), ("DeadLetterError", 1), ("ValueError", 1)
    }  # fmt: skip
    assert {(g["queue"], g["count"]) for g in stats["bySourceQueue"]} == {("jobs", 3), ("other", 1)}
    assert {(g["reason"], g["count"]) for g in stats["byReason"]} == {
        ("attempts_exhausted", 3), ("discarded", 1)
    }  # fmt: skip
    assert stats["byStatus"] == [{"status": "pending", "count": 4}]
    assert stats["oldest"] == iso(min(at.values()))
    assert stats["newest"] == iso(max(at.values()))
    assert filtered.json()["total"] == 3


async def test_stats_of_an_empty_dead_letter_queue_are_zero(client: httpx.AsyncClient) -> None:
    response = await client.get(f"{BASE}/stats", params={"dlq": "nothing-here"})
    assert response.json() == {
        "total": 0, "byType": [], "byErrorType": [], "bySourceQueue": [], "byReason": [],
        "byStatus": [], "oldest": None, "newest": None,
    }  # fmt: skip
