"""The dashboard's pages through ASGI: the overview, the dead letter browser and its filters,
the job page, and escaping of everything a payload or an error can carry. (Paging:
test_paging.py; the view of every dead letter queue and the search box: test_find.py.)"""

from __future__ import annotations

import datetime
import html

import httpx
import pytest

from lazarus import Queue
from lazarus.http.app import create_app

from .conftest import MakeWorker, client_of, dead_letter, listed_ids

XSS = "<script>alert(1)</script>"


async def test_root_redirects_to_the_dashboard(client: httpx.AsyncClient) -> None:
    response = await client.get("/")
    assert response.status_code == 307
    assert response.headers["location"] == "/dashboard"


async def test_overview_shows_each_queue_with_counts_dead_letter_depth_and_rate_chart(
    client: httpx.AsyncClient, queue: Queue, make_worker: MakeWorker
) -> None:
    # Given three dead letters from "jobs", and one waiting job in a paused queue "idle"
    await dead_letter(make_worker, queue, [("charge", {"error": "TimeoutError"})] * 3)
    idle = Queue("idle", connection=queue.client, prefix=queue.prefix)
    await idle.add("later", {})
    await idle.pause()

    # When the overview is loaded
    response = await client.get("/dashboard")

    # Then it lists both queues and the DLQ, with depth, age, badges and a chart of 60 minutes
    assert response.status_code == 200
    page = response.text
    assert 'href="/dashboard/queues/jobs-dlq/dead-letters"' in page
    assert '<span class="badge paused">paused</span>' in page
    assert '<a href="/dashboard/queues/jobs-dlq/dead-letters" class="depth nonzero">3</a>' in page
    assert "s ago</span>" in page  # the oldest dead letter's age
    assert "3 in the last hour · peak 3/min" in page
    assert page.count('<rect class="slot"') == 60
    assert page.count('<rect class="bar"') == 1
    assert "3 dead letters</title>" in page


async def test_overview_without_queues_says_so(client: httpx.AsyncClient) -> None:
    response = await client.get("/dashboard")
    assert response.status_code == 200
    assert "No queues yet" in response.text


async def test_dead_letter_list_shows_every_dead_letter_newest_first(
    client: httpx.AsyncClient, queue: Queue, make_worker: MakeWorker
) -> None:
    ids = await dead_letter(make_worker, queue, [("a", {}), ("b", {}), ("c", {})])

    response = await client.get("/dashboard/queues/jobs-dlq/dead-letters")

    assert response.status_code == 200
    assert listed_ids(response.text) == list(reversed(ids))
    assert "3 in the queue" in response.text


async def test_each_filter_narrows_the_list(
    client: httpx.AsyncClient, queue: Queue, make_worker: MakeWorker
) -> None:
    # Given dead letters that differ in name, error, reason and payload
    ids = await dead_letter(make_worker, queue, [
        ("charge-card", {"error": "TimeoutError", "customer": 42}),
        ("charge-refund", {"error": "ValueError", "message": "bad amount", "customer": 7}),
        ("send-email", {"error": "Unrecoverable", "message": "no such address"}),
    ])  # fmt: skip
    card, refund, email = ids
    future = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
    cases = {
        "name=send-email": [email],
        "name_prefix=charge-": [refund, card],
        "error_type=TimeoutError": [card],
        "failed_reason=BAD+AMOUNT": [refund],
        "reason=unrecoverable": [email],
        "source_queue=jobs": [email, refund, card],
        "source_queue=other": [],
        "status=pending": [email, refund, card],
        "status=resolved": [],
        "payload_contains=%22customer%22%3A42": [card],
        f"since={future:%Y-%m-%dT%H:%M}": [],
        f"until={future:%Y-%m-%dT%H:%M}&name_prefix=charge": [refund, card],
    }
    for params, expected in cases.items():
        # When the list is filtered, Then exactly the matching dead letters are listed
        response = await client.get(f"/dashboard/queues/jobs-dlq/dead-letters?{params}")
        assert response.status_code == 200, params
        assert listed_ids(response.text) == expected, params


@pytest.fixture
async def known_dlq(dlq: Queue) -> Queue:
    """jobs-dlq once it has been used (the dashboard knows it), and empty."""
    job = await dlq.add("placeholder")
    await dlq.remove(job.id)
    return dlq


async def test_filter_form_keeps_what_was_typed(
    client: httpx.AsyncClient, known_dlq: Queue
) -> None:
    url = "/dashboard/queues/jobs-dlq/dead-letters?error_type=Timeout%22Error&reason=stalled"
    page = (await client.get(url)).text
    assert 'name="error_type" value="Timeout&#34;Error"' in page
    assert '<option value="stalled" selected>' in page
    assert "No dead letters match this filter." in page


async def test_a_filter_that_does_not_parse_is_shown_as_an_error(
    client: httpx.AsyncClient, known_dlq: Queue
) -> None:
    for params, message in {
        "since=yesterday": "Since (UTC): not a date and time",
        "since=2025-02-01&until=2025-01-01": "Since must not be after Until",
        "reason=exploded": "Reason: must be one of",
        "status=lost": "Status: must be one of",
    }.items():
        response = await client.get(f"/dashboard/queues/jobs-dlq/dead-letters?{params}")
        assert response.status_code == 400, params
        assert message in html.unescape(response.text), params


async def test_job_page_shows_payload_metadata_attempts_and_stack_trace(
    client: httpx.AsyncClient, queue: Queue, make_worker: MakeWorker
) -> None:
    payload = {"error": "TimeoutError", "message": "gateway timed out", "order": 17}
    [dead_id] = await dead_letter(make_worker, queue, [("charge", payload)])

    response = await client.get(f"/dashboard/queues/jobs-dlq/dead-letters/{dead_id}")

    assert response.status_code == 200
    page = html.unescape(response.text)
    assert '"order": 17' in page  # pretty JSON of the payload
    assert '"sourceQueue": "jobs"' in page  # _dlqMeta
    assert "<code>TimeoutError</code> gateway timed out" in page  # the attempt's error
    assert '<dt>Status</dt><dd><span class="badge status-pending">pending</span>' in page
    assert "Traceback (most recent call last)" in page
    assert ", in fail" in page  # the trace reaches the processor
    assert f'action="/dashboard/queues/jobs-dlq/dead-letters/{dead_id}/replay"' in page
    assert f'action="/dashboard/queues/jobs-dlq/dead-letters/{dead_id}/delete"' in page


async def test_payload_and_error_are_escaped_on_every_page(
    client: httpx.AsyncClient, queue: Queue, make_worker: MakeWorker
) -> None:
    # Given a dead letter whose name, payload and error message carry a script tag
    payload = {"note": XSS, "message": XSS}
    [dead_id] = await dead_letter(make_worker, queue, [(XSS, payload)])

    # When the pages that show it are loaded
    pages = [
        await client.get("/dashboard/queues/jobs-dlq/dead-letters"),
        await client.get(f"/dashboard/queues/jobs-dlq/dead-letters/{dead_id}"),
        await client.get("/dashboard/queues/jobs-dlq/dead-letters?name=" + XSS),
    ]

    # Then the tag appears only escaped
    for response in pages:
        assert response.status_code == 200
        assert XSS not in response.text
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in response.text


async def test_an_unsigned_flash_message_in_the_query_string_is_not_shown(
    client: httpx.AsyncClient,
) -> None:
    response = await client.get(f"/dashboard/queues/jobs-dlq/dead-letters?flash={XSS}")
    assert XSS not in response.text
    assert "&lt;script&gt;" not in response.text
    assert 'class="flash flash-ok"' not in response.text


async def test_unknown_queue_or_dead_letter_is_a_404_page(client: httpx.AsyncClient) -> None:
    for url in (
        "/dashboard/queues/%7Bbad%7D/dead-letters",
        "/dashboard/queues/jobs-dlq/dead-letters/nope",
        "/dashboard/queues/jobs-dlq/dead-letters/%7Bbad%7D",
        "/dashboard/queues/jobs-dlq/bulk/explode",
    ):
        response = await client.get(url)
        assert response.status_code == 404, url
        assert "404 · Not found" in response.text


async def test_unreachable_redis_is_a_503_page() -> None:
    app = create_app(connection="redis://127.0.0.1:9/0", auth=False)
    async with client_of(app) as client:
        response = await client.get("/dashboard")
    await app.state.ops.close()
    assert response.status_code == 503
    assert "Redis is unavailable" in response.text
