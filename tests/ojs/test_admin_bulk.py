"""The OJS admin API's writes (ojs-admin-api 6.5, 7.3, 7.4, 8, 11.3): one job cancelled or
retried, jobs retried, cancelled or deleted in bulk by queue and state, a queue's ended jobs
and the dead letters purged; each behind ``"confirm": true``, bounded per request, and each
checked through lazarus's library and Redis."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from lazarus import DeadLetterView, Queue
from lazarus.ojs import admin_bulk

from .test_admin import DEAD_LETTER, DLQ, enqueue, every_state, fetch, info, nack
from .test_input import stored

DISCARD = {"max_attempts": 1}


async def discarded(client: httpx.AsyncClient, queue: str = "mail", **retry: Any) -> str:
    """A job of ``queue`` that failed for good (``retry``: its policy)."""
    job_id = await enqueue(client, queue, retry=retry or DISCARD)
    assert job_id in await fetch(client, queue)
    await nack(client, job_id)
    return job_id


async def post(client: httpx.AsyncClient, path: str, body: Any) -> httpx.Response:
    return await client.post(f"/ojs/v1/admin{path}", json=body)


async def delete(client: httpx.AsyncClient, path: str, body: Any) -> httpx.Response:
    return await client.request("DELETE", f"/ojs/v1/admin{path}", json=body)


async def dead_letters(redis_url: str, prefix: str) -> int:
    """How many dead letters lazarus's store holds, in every dead letter queue."""
    async with DeadLetterView(redis_url, prefix=prefix) as view:
        return await view.count()


async def test_a_discarded_job_is_retried_under_its_id_with_its_attempts_reset(
    client: httpx.AsyncClient, mail: Queue
) -> None:
    # Given a job that failed for good, and one that became a dead letter
    failed = await discarded(client)
    buried = await discarded(client, **DEAD_LETTER)

    # When the admin retries each
    answers = [await post(client, f"/jobs/{job_id}/retry", None) for job_id in (failed, buried)]

    # Then both are back in 'mail' under their ids, to run afresh
    assert [a.status_code for a in answers] == [200, 200], answers[0].text
    for job_id in (failed, buried):
        assert await mail.get_job_state(job_id) == "prioritized"
        job = await mail.get_job(job_id)
        assert job is not None and job.attempts_started == 0
        assert (await info(client, job_id))["state"] == "available"
    assert await fetch(client) == [failed, buried]


async def test_only_a_discarded_job_is_retried(client: httpx.AsyncClient, mail: Queue) -> None:
    job_id = await enqueue(client)

    response = await post(client, f"/jobs/{job_id}/retry", None)

    assert response.status_code == 409, response.text
    assert await mail.get_job_state(job_id) == "prioritized"


async def test_the_admin_cancel_is_the_ojs_cancel(client: httpx.AsyncClient, mail: Queue) -> None:
    job_id = await enqueue(client)

    response = await post(client, f"/jobs/{job_id}/cancel", None)

    assert response.status_code == 200, response.text
    assert await mail.get_job(job_id) is None
    assert (await info(client, job_id))["state"] == "cancelled"


async def test_a_bulk_retry_retries_the_discarded_jobs_of_a_queue_and_its_dead_letters(
    client: httpx.AsyncClient, mail: Queue, raw: Any, prefix: str, redis_url: str
) -> None:
    # Given in 'mail' two jobs that failed for good and a dead letter, and another queue's
    # discarded job
    failed = [await discarded(client), await discarded(client)]
    buried = await discarded(client, **DEAD_LETTER)
    elsewhere = await discarded(client, "other")

    # When the admin retries the discarded jobs of 'mail'
    body = {"filter": {"queue": "mail", "state": "discarded"}, "confirm": True}
    response = await post(client, "/jobs/bulk/retry", body)

    # Then each is back in 'mail' (the dead letter gone from the store), the other queue's
    # job is left
    assert response.status_code == 200, response.text
    assert response.json() == {"action": "retry", "matched": 3, "succeeded": 3, "failed": 0,
                               "errors": [], "has_more": False}  # fmt: skip
    assert await mail.get_failed_count() == 0
    assert await dead_letters(redis_url, prefix) == 0
    assert sorted(await fetch(client)) == sorted([*failed, buried])
    async with Queue("other", connection=redis_url, prefix=prefix) as other:
        assert await other.get_job_state(elsewhere) == "failed"


async def test_a_bulk_retry_acts_on_a_bounded_number_of_jobs_and_says_more_are_left(
    client: httpx.AsyncClient, mail: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given three discarded jobs, and a bound of two jobs a request
    for _ in range(3):
        await discarded(client)
    monkeypatch.setattr(admin_bulk, "BULK_LIMIT", 2)
    body = {"filter": {}, "confirm": True}

    # When the admin retries them in bulk, twice
    first = (await post(client, "/jobs/bulk/retry", body)).json()
    left = await mail.get_failed_count()
    second = (await post(client, "/jobs/bulk/retry", body)).json()

    # Then the first request retries two and says one is left; the second, the last
    assert (first["matched"], first["has_more"], left) == (2, True, 1)
    assert (second["matched"], second["has_more"]) == (1, False)
    assert await mail.get_failed_count() == 0


async def test_a_bulk_cancel_cancels_the_jobs_of_a_state_whoever_added_them(
    client: httpx.AsyncClient, mail: Queue
) -> None:
    # Given in 'mail' jobs in each state
    expected = await every_state(client, mail)

    # When the admin cancels the available jobs
    body = {"filter": {"queue": "mail", "state": "available"}, "confirm": True}
    response = await post(client, "/jobs/bulk/cancel", body)

    # Then both left the queue, the one lazarus added too, and OJS shows them cancelled
    assert response.status_code == 200, response.text
    assert (response.json()["matched"], response.json()["succeeded"]) == (2, 2)
    for job_id in expected["available"]:
        assert await mail.get_job(job_id) is None
        assert (await info(client, job_id))["state"] == "cancelled"
    for state in ("scheduled", "active"):
        assert await mail.get_job(expected[state][0]) is not None


async def test_a_bulk_cancel_of_scheduled_jobs_leaves_the_retryable_ones(
    client: httpx.AsyncClient, mail: Queue
) -> None:
    expected = await every_state(client, mail)

    response = await post(client, "/jobs/bulk/cancel",
                          {"filter": {"state": "scheduled"}, "confirm": True})  # fmt: skip

    assert response.json()["matched"] == 1
    assert await mail.get_job(expected["scheduled"][0]) is None
    for state in ("retryable", "pending"):
        assert await mail.get_job_state(expected[state][0]) == "delayed"


async def test_a_bulk_delete_removes_ended_jobs_and_their_ojs_records(
    client: httpx.AsyncClient, mail: Queue, raw: Any, prefix: str, redis_url: str
) -> None:
    # Given in 'mail' jobs in each state
    expected = await every_state(client, mail)

    # When the admin deletes the completed and discarded jobs
    response = await post(client, "/jobs/bulk/delete", {"filter": {}, "confirm": True})

    # Then they are gone, their dead letters and OJS records too; the others stay
    assert response.status_code == 200, response.text
    assert response.json()["matched"] == 3
    for job_id in expected["completed"] + expected["discarded"]:
        assert await mail.get_job(job_id) is None
        assert (await client.get(f"/ojs/v1/jobs/{job_id}")).status_code == 404
    assert await dead_letters(redis_url, prefix) == 0
    assert (await mail.get_job_counts())["active"] == 1


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [("/jobs/bulk/retry", {"filter": {}}, "confirm"),
     ("/jobs/bulk/retry", {"filter": {}, "confirm": "yes"}, "confirm"),
     ("/jobs/bulk/retry", {"confirm": True}, "filter"),
     ("/jobs/bulk/retry", {"filter": {"type": "mail.send"}, "confirm": True}, "filter.type"),
     ("/jobs/bulk/retry", {"filter": {"state": "completed"}, "confirm": True}, "filter.state"),
     ("/jobs/bulk/retry", {"filter": {"queue": "Mail"}, "confirm": True}, "filter.queue"),
     ("/jobs/bulk/retry", {"filter": {}, "confirm": True, "dry_run": True}, "dry_run"),
     ("/jobs/bulk/cancel", {"filter": {"state": "completed"}, "confirm": True}, "filter.state"),
     ("/jobs/bulk/delete", {"filter": {"state": "active"}, "confirm": True}, "filter.state"),
     ("/jobs/bulk/delete", [], "filter")],
)  # fmt: skip
async def test_a_bad_bulk_request_is_refused_naming_its_field_and_writes_nothing(
    client: httpx.AsyncClient, raw: Any, prefix: str, path: str, body: Any, field: str
) -> None:
    # Given jobs of every state
    await discarded(client)
    await enqueue(client)
    before = await stored(raw, prefix)

    # When a bulk request is bad
    response = await post(client, path, body)

    # Then it is refused naming the field, and nothing is written
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_request" and error["details"] == {"field": field}
    assert await stored(raw, prefix) == before


async def test_a_purge_removes_a_queue_s_ended_jobs_before_a_time(
    client: httpx.AsyncClient, mail: Queue
) -> None:
    # Given in 'mail' jobs in each state
    expected = await every_state(client, mail)

    # When the admin purges what ended before the jobs were made, then the completed jobs
    before = {"states": ["completed"], "older_than": "2020-01-01T00:00:00Z", "confirm": True}
    early = await delete(client, "/queues/mail/jobs", before)
    purged = await delete(client, "/queues/mail/jobs", {"states": ["completed"], "confirm": True})

    # Then the first removes nothing; the second the completed job, with its OJS record
    assert early.json() == {"purged_count": 0, "states": ["completed"], "has_more": False}
    assert purged.status_code == 200, purged.text
    assert purged.json() == {"purged_count": 1, "states": ["completed"], "has_more": False}
    assert await mail.get_completed_count() == 0
    assert (await client.get(f"/ojs/v1/jobs/{expected['completed'][0]}")).status_code == 404
    assert await mail.get_failed_count() == 1


@pytest.mark.parametrize(
    ("body", "field"),
    [({"states": ["completed"]}, "confirm"),
     ({"states": ["completed"], "confirm": False}, "confirm"),
     ({"states": [], "confirm": True}, "states"),
     ({"states": ["available"], "confirm": True}, "states"),
     ({"states": ["completed"], "older_than": "yesterday", "confirm": True}, "older_than")],
)  # fmt: skip
async def test_a_bad_purge_is_refused_naming_its_field_and_writes_nothing(
    client: httpx.AsyncClient, mail: Queue, raw: Any, prefix: str, body: Any, field: str
) -> None:
    await every_state(client, mail)
    before = await stored(raw, prefix)

    response = await delete(client, "/queues/mail/jobs", body)

    assert response.status_code == 400, response.text
    assert response.json()["error"]["details"] == {"field": field}
    assert await stored(raw, prefix) == before


async def test_a_purge_of_the_dead_letters_deletes_them_for_good(
    client: httpx.AsyncClient, raw: Any, prefix: str, redis_url: str
) -> None:
    # Given two dead letters
    for _ in range(2):
        await discarded(client, **DEAD_LETTER)
    before = await stored(raw, prefix)

    # When a purge comes without confirm, then with it
    refused = await delete(client, "/dead-letter", {})
    after_refusal = await stored(raw, prefix)
    purged = await delete(client, "/dead-letter", {"confirm": True})

    # Then the first is refused and changes nothing; the second deletes both
    assert refused.status_code == 400 and refused.json()["error"]["details"] == {"field": "confirm"}
    assert after_refusal == before
    assert purged.json() == {"purged_count": 2, "has_more": False}
    assert await dead_letters(redis_url, prefix) == 0
    async with Queue(DLQ, connection=redis_url, prefix=prefix) as dlq:
        assert await dlq.get_dead_letter_count() == 0
