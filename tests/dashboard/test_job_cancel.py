"""Cancelling a job from its page, or an active one from its row on the queue's page:
POST /dashboard/queues/{name}/jobs/{id}/cancel, for operators only."""

from __future__ import annotations

import asyncio
import html

import httpx
import redis.asyncio as aioredis

from lazarus import Job, Queue
from tests.conftest import job_snapshot, run_until_stopped, wait_for_state

from .conftest import MakeWorker, csrf_of, dead_letter

QUEUE_PAGE = "/dashboard/queues/jobs"


def page_of(job_id: str, queue: str = "jobs") -> str:
    return f"/dashboard/queues/{queue}/jobs/{job_id}"


def cancel_form(job_id: str, queue: str = "jobs") -> str:
    return f'action="{page_of(job_id, queue)}/cancel"'


async def cancel(
    client: httpx.AsyncClient, job_id: str, *, queue: str = "jobs", **form: str
) -> tuple[str, str]:
    """Post the cancel form of ``job_id``'s page; where it redirects to, and that page's
    text (unescaped)."""
    token = await csrf_of(client, QUEUE_PAGE)
    response = await client.post(f"{page_of(job_id, queue)}/cancel", data={"csrf": token, **form})
    assert response.status_code == 303, response.text
    location = response.headers["location"]
    return location, html.unescape((await client.get(location)).text)


async def test_a_job_that_has_not_ended_offers_cancel_an_ended_one_or_a_dead_letter_does_not(
    client: httpx.AsyncClient, queue: Queue, make_worker: MakeWorker
) -> None:
    (letter,) = await dead_letter(make_worker, queue, [("charge", {"error": "ValueError"})])
    done = await queue.add("ok", None)
    worker = make_worker(lambda j: None)
    await wait_for_state(queue, done.id, "completed")
    await worker.close()
    await queue.pause()
    waiting = await queue.add("n", None)
    prioritized = await queue.add("n", None, priority=2)
    delayed = await queue.add("n", None, delay=3_600_000)

    for job_id in (waiting.id, prioritized.id, delayed.id):
        shown = (await client.get(page_of(job_id))).text
        assert cancel_form(job_id) in shown and 'name="reason"' in shown
    assert cancel_form(done.id) not in (await client.get(page_of(done.id))).text
    letter_page = (await client.get(page_of(letter, "jobs-dlq"))).text
    assert "/cancel" not in letter_page and 'name="reason"' not in letter_page


async def test_a_waiting_job_cancelled_from_its_page_fails_with_the_reason_without_running(
    client: httpx.AsyncClient, queue: Queue, make_worker: MakeWorker
) -> None:
    first = await queue.add("n", None)
    second = await queue.add("n", None, priority=5)

    location, shown = await cancel(client, second.id, reason="  duplicate order ", state="waiting")

    assert location.startswith(page_of(second.id) + "?")
    assert f"Job {second.id} fails as cancelled when a worker next claims it" in shown
    assert "flash-ok" in shown
    ran: list[str] = []

    async def process(j: Job) -> None:
        ran.append(j.id)

    make_worker(process, concurrency=1, dead_letter_queue=None)
    await wait_for_state(queue, second.id, "failed")
    await wait_for_state(queue, first.id, "completed")
    assert ran == [first.id]
    failed = await queue.get_job(second.id)
    assert failed is not None
    assert (failed.error_type, failed.failed_reason) == ("JobCancelledError", "duplicate order")


async def test_an_empty_reason_cancels_as_cancelled_and_a_paused_queue_is_said(
    client: httpx.AsyncClient, queue: Queue, make_worker: MakeWorker
) -> None:
    await queue.pause()
    added = await queue.add("n", None, delay=3_600_000)

    _, shown = await cancel(client, added.id, reason=" ")

    assert "once the queue is resumed" in shown
    make_worker(lambda j: None, dead_letter_queue=None)
    await queue.resume()
    await wait_for_state(queue, added.id, "failed")
    stored = await queue.get_job(added.id)
    assert stored is not None and stored.failed_reason == "cancelled"


async def test_an_active_job_is_cancelled_from_its_row_and_its_worker_stops_it(
    client: httpx.AsyncClient, queue: Queue, make_worker: MakeWorker
) -> None:
    added, stopped = await run_until_stopped(queue, make_worker, dead_letter_queue=None)
    rows = (await client.get(f"{QUEUE_PAGE}?state=active")).text
    assert cancel_form(added.id) in rows
    assert cancel_form(added.id) in (await client.get(page_of(added.id))).text

    location, shown = await cancel(client, added.id, back="queue", state="active")

    assert location.startswith(f"{QUEUE_PAGE}?") and "state=active" in location
    assert f"Job {added.id} is active: its worker stops it at its next lease renewal" in shown
    await asyncio.wait_for(stopped.wait(), 10)
    await wait_for_state(queue, added.id, "failed")
    stored = await queue.get_job(added.id)
    assert stored is not None and stored.error_type == "JobCancelledError"


async def test_the_rows_of_other_states_have_no_cancel_button(
    client: httpx.AsyncClient, queue: Queue
) -> None:
    await queue.pause()
    waiting = await queue.add("n", None)
    delayed = await queue.add("n", None, delay=3_600_000)

    waiting_rows = (await client.get(f"{QUEUE_PAGE}?state=waiting")).text
    delayed_rows = (await client.get(f"{QUEUE_PAGE}?state=delayed")).text

    assert waiting.id in waiting_rows and "/cancel" not in waiting_rows
    assert delayed.id in delayed_rows and "/cancel" not in delayed_rows


async def test_a_reason_too_long_is_an_error_notice_and_writes_nothing(
    client: httpx.AsyncClient, queue: Queue, raw: aioredis.Redis
) -> None:
    added = await queue.add("n", None, delay=60_000)
    before = await job_snapshot(raw, queue, added.id)

    location, shown = await cancel(client, added.id, reason="x" * 5000, state="delayed")

    assert location.startswith(f"{QUEUE_PAGE}?") and "state=delayed" in location
    assert "flash-error" in shown
    assert f"Could not cancel job {added.id}: reason must be at most 4096 bytes" in shown
    assert await job_snapshot(raw, queue, added.id) == before


async def test_an_ended_job_or_a_missing_one_is_an_error_notice_and_writes_nothing(
    client: httpx.AsyncClient, queue: Queue, make_worker: MakeWorker, raw: aioredis.Redis
) -> None:
    done = await queue.add("ok", None)
    worker = make_worker(lambda j: None)
    await wait_for_state(queue, done.id, "completed")
    await worker.close()
    before = await job_snapshot(raw, queue, done.id)

    _, ended = await cancel(client, done.id)
    _, missing = await cancel(client, "nope")

    assert "flash-error" in ended and "it has ended" in ended
    assert "flash-error" in missing and "Could not cancel job nope" in missing
    assert await job_snapshot(raw, queue, done.id) == before
    assert not await raw.exists(queue.keys.job("nope"))


async def test_a_form_without_csrf_or_for_an_unknown_queue_is_refused(
    client: httpx.AsyncClient, queue: Queue, raw: aioredis.Redis
) -> None:
    added = await queue.add("n", None)
    before = await job_snapshot(raw, queue, added.id)
    token = await csrf_of(client, page_of(added.id))

    forged = await client.post(f"{page_of(added.id)}/cancel", data={"reason": "x"})
    no_queue = await client.post(f"{page_of(added.id, 'nope')}/cancel", data={"csrf": token})

    assert forged.status_code == 403 and "CSRF token is missing or wrong" in forged.text
    assert no_queue.status_code == 404
    assert await job_snapshot(raw, queue, added.id) == before


async def test_a_viewer_sees_no_cancel_and_cannot_post_one(
    viewer: httpx.AsyncClient, queue: Queue, make_worker: MakeWorker, raw: aioredis.Redis
) -> None:
    added, _ = await run_until_stopped(queue, make_worker, dead_letter_queue=None)
    waiting = await queue.add("n", None)
    before = await job_snapshot(raw, queue, waiting.id)
    job_page = await viewer.get(page_of(waiting.id))
    rows = await viewer.get(f"{QUEUE_PAGE}?state=active")
    csrf = await csrf_of(viewer, QUEUE_PAGE)
    refused = [
        await viewer.post(f"{page_of(job_id)}/cancel", data={"csrf": csrf})
        for job_id in (waiting.id, added.id)
    ]

    assert job_page.status_code == rows.status_code == 200
    assert "/cancel" not in job_page.text
    assert added.id in rows.text and "/cancel" not in rows.text
    for response in refused:
        assert response.status_code == 403
        assert "needs the operator role" in response.text
    assert await job_snapshot(raw, queue, waiting.id) == before
    assert await queue.get_job_state(added.id) == "active"
    assert await raw.hget(queue.keys.job(added.id), "cancel") is None
