"""A job's page changes its priority (a job that waits) and its delay (a delayed job):
POST /dashboard/queues/{name}/jobs/{id}/change."""

from __future__ import annotations

import html
import time

import httpx
import pytest
import redis.asyncio as aioredis

from lazarus import Queue
from tests.conftest import job_snapshot

from .conftest import MakeWorker, csrf_of, dead_letter


def page_of(job_id: str, queue: str = "jobs") -> str:
    return f"/dashboard/queues/{queue}/jobs/{job_id}"


async def change(client: httpx.AsyncClient, job_id: str, **form: str) -> httpx.Response:
    """Post the change form of ``job_id``'s page; the page it redirects to."""
    token = await csrf_of(client, page_of(job_id))
    response = await client.post(f"{page_of(job_id)}/change", data={"csrf": token, **form})
    assert response.status_code == 303, response.text
    assert response.headers["location"].startswith(page_of(job_id) + "?")
    return await client.get(response.headers["location"])


async def test_a_waiting_job_offers_its_priority_a_delayed_one_its_delay_a_dead_letter_neither(
    client: httpx.AsyncClient, queue: Queue, make_worker: MakeWorker
) -> None:
    (letter,) = await dead_letter(make_worker, queue, [("charge", {"error": "ValueError"})])
    await queue.pause()
    waiting = await queue.add("n", None, priority=4)
    delayed = await queue.add("n", None, delay=3_600_000)

    waiting_page = (await client.get(page_of(waiting.id))).text
    delayed_page = (await client.get(page_of(delayed.id))).text
    letter_page = (await client.get(page_of(letter, "jobs-dlq"))).text

    assert f'action="{page_of(waiting.id)}/change"' in waiting_page
    assert 'name="priority"' in waiting_page and 'placeholder="4"' in waiting_page
    assert 'name="delay_s"' not in waiting_page
    assert 'name="priority"' in delayed_page and 'name="delay_s"' in delayed_page
    assert "/change" not in letter_page and 'name="priority"' not in letter_page


async def test_a_new_priority_places_a_waiting_job_again(
    client: httpx.AsyncClient, queue: Queue, raw: aioredis.Redis
) -> None:
    await queue.pause()
    added = await queue.add("n", None)

    shown = await change(client, added.id, priority="1", delay_s="")

    assert "Changed the priority: the job is paused now." in shown.text
    assert "flash-ok" in shown.text
    assert await raw.zscore(queue.keys.prioritized, added.id) is not None
    assert await raw.lrange(queue.keys.wait, 0, -1) == []


async def test_a_delayed_job_is_due_the_seconds_given_from_now(
    client: httpx.AsyncClient, queue: Queue, raw: aioredis.Redis
) -> None:
    added = await queue.add("n", None, delay=3_600_000)

    before = int(time.time() * 1000)
    shown = await change(client, added.id, priority="", delay_s="90")
    after = int(time.time() * 1000)

    assert "Changed the delay: the job is delayed now." in shown.text
    due = await raw.zscore(queue.keys.delayed, added.id)
    assert due is not None and before + 90_000 <= due <= after + 90_000
    assert await raw.hget(queue.keys.job(added.id), "priority") in (None, "0")


@pytest.mark.parametrize(
    ("form", "says"),
    [
        ({}, "give a priority or a delay"),
        ({"priority": " ", "delay_s": ""}, "give a priority or a delay"),
        ({"priority": "high"}, "the priority must be a whole number from 0 to 2097152"),
        ({"priority": "-1"}, "the priority must be a whole number"),
        ({"priority": "1.5"}, "the priority must be a whole number"),
        ({"priority": "²"}, "the priority must be a whole number"),
        ({"priority": "2097153"}, "the priority must be a whole number"),
        ({"priority": "1", "delay_s": "soon"}, "the delay must be a whole number"),
        ({"priority": "1", "delay_s": "10000000001"}, "the delay must be a whole number"),
        ({"priority": "1", "delay_s": "10"}, "it is not delayed"),  # it waits
    ],
)
async def test_bad_input_is_an_error_notice_and_writes_nothing(
    client: httpx.AsyncClient,
    queue: Queue,
    raw: aioredis.Redis,
    form: dict[str, str],
    says: str,
) -> None:
    await queue.pause()
    added = await queue.add("n", {"v": 1})
    before = await job_snapshot(raw, queue, added.id)

    shown = await change(client, added.id, **form)

    assert "flash-error" in shown.text
    assert "Nothing was changed: " in html.unescape(shown.text)
    assert says in html.unescape(shown.text)
    assert await job_snapshot(raw, queue, added.id) == before


async def test_a_missing_job_is_an_error_notice_and_a_form_without_csrf_is_refused(
    client: httpx.AsyncClient, queue: Queue, raw: aioredis.Redis
) -> None:
    added = await queue.add("n", None)
    before = await job_snapshot(raw, queue, added.id)
    token = await csrf_of(client, page_of(added.id))

    gone = await client.post(f"{page_of('nope')}/change", data={"csrf": token, "priority": "1"})
    forged = await client.post(f"{page_of(added.id)}/change", data={"priority": "1"})
    no_queue = await client.post(
        f"/dashboard/queues/nope/jobs/{added.id}/change", data={"csrf": token, "priority": "1"}
    )

    assert gone.status_code == 303
    assert "Nothing was changed" in html.unescape((await client.get(gone.headers["location"])).text)
    assert forged.status_code == 403 and "CSRF token is missing or wrong" in forged.text
    assert no_queue.status_code == 404
    assert not await raw.exists(queue.keys.job("nope"))
    assert await job_snapshot(raw, queue, added.id) == before
