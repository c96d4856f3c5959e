"""The dashboard in a real headless Chromium (Debian's, at /usr/bin/chromium), served by
uvicorn in a thread against the test Redis, with dead letters made by a real worker.

Without Chromium these tests are skipped, unless ``CI`` is set: then they fail.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from playwright.async_api import Page, async_playwright, expect

from lazarus import Queue
from lazarus.http.app import create_app

from ..servers import serving
from .conftest import TOKEN, MakeWorker, dead_letter

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]


@pytest.fixture
async def page(chromium: Path) -> AsyncIterator[Page]:
    playwright = await async_playwright().start()
    browser = await playwright.chromium.launch(
        executable_path=str(chromium), headless=True, args=CHROMIUM_ARGS
    )
    try:
        context = await browser.new_context(viewport={"width": 1366, "height": 900})
        yield await context.new_page()
    finally:
        await browser.close()
        await playwright.stop()


@pytest.fixture
async def served(redis_url: str, prefix: str) -> AsyncIterator[str]:
    async with serving(create_app(connection=redis_url, prefix=prefix, auth=False)) as url:
        yield url


async def test_operator_filters_opens_replays_and_deletes_dead_letters(
    served: str, page: Page, queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    # Given three dead letters made by a real worker, which is closed before any replay
    card_1, card_2, email = await dead_letter(make_worker, queue, [
        ("charge-card", {"error": "TimeoutError", "order": 1}),
        ("charge-card", {"error": "TimeoutError", "order": 2}),
        ("send-email", {"error": "ValueError", "to": "ops@example.com"}),
    ])  # fmt: skip

    # When the operator opens the app, Then the overview shows the DLQ's depth and a chart
    await page.goto(served + "/")
    assert page.url == served + "/dashboard"
    dlq_row = page.locator("tbody tr", has_text="jobs-dlq")
    await expect(dlq_row.locator(".depth")).to_have_text("3")
    await expect(page.locator("svg.chart rect.bar")).to_have_count(1)

    # When they open the DLQ and filter by error type, Then only the timeouts are listed
    await dlq_row.get_by_role("link", name="jobs-dlq").click()
    await expect(page.locator("a.job-link")).to_have_count(3)
    await page.get_by_label("Error type").fill("TimeoutError")
    await page.get_by_role("button", name="Filter").click()
    await expect(page.locator("a.job-link")).to_have_count(2)
    assert "error_type=TimeoutError" in page.url

    # When they open the first order's page, Then payload and error are there
    await page.locator(f'a.job-link[href*="/{card_1}?"]').click()
    await expect(page.get_by_role("heading", name="charge-card")).to_be_visible()
    await expect(page.locator("pre.payload")).to_contain_text('"order": 1')
    await expect(page.locator("table.grid")).to_contain_text("TimeoutError in charge-card")

    # When they replay it, Then it leaves the (still filtered) list with a message
    await page.get_by_role("button", name="Replay into jobs").click()
    await expect(page.locator(".flash-ok")).to_contain_text(f"Replayed dead letter {card_1}")
    await expect(page.locator("a.job-link")).to_have_count(1)
    assert await page.get_by_label("Error type").input_value() == "TimeoutError"

    # When they delete the other timeout (two clicks: Delete…, then Yes), Then it is gone too
    await page.locator("a.job-link").click()
    await page.locator("summary", has_text="Delete").click()
    await page.get_by_role("button", name="Yes, delete it").click()
    await expect(page.locator(".flash-ok")).to_have_text(f"Deleted dead letter {card_2}.")
    await expect(page.locator("a.job-link")).to_have_count(0)

    # And Redis agrees: the email is the only dead letter, the order is waiting in "jobs"
    assert [j.id for j in await dlq.get_dead_letter_jobs()] == [email]
    waiting = await queue.get_waiting(0, -1)
    assert [(j.name, j.data) for j in waiting] == [
        ("charge-card", {"error": "TimeoutError", "order": 1})
    ]


async def test_bulk_purge_goes_through_a_confirmation_that_states_the_count(
    served: str, page: Page, queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    # Given two failed emails and one failed charge in the DLQ
    charge, _, _ = await dead_letter(make_worker, queue, [
        ("charge-card", {"error": "TimeoutError"}),
        ("send-email", {"error": "ValueError"}),
        ("send-email", {"error": "ValueError"}),
    ])  # fmt: skip

    # When the operator filters by name and asks to purge the matches
    await page.goto(f"{served}/dashboard/queues/jobs-dlq/dead-letters?name=send-email")
    await page.get_by_role("link", name="Purge 2 matching…").click()

    # Then a confirmation states the count before anything is deleted
    await expect(page.get_by_role("heading")).to_have_text("Purge 2 dead letters from jobs-dlq?")
    assert await dlq.get_dead_letter_count() == 3

    # When they confirm, Then a progress page reloads itself until it says the purge is done
    await page.get_by_role("button", name="Purge 2 dead letters").click()
    assert "/dashboard/operations/" in page.url
    await expect(page.locator(".flash-ok")).to_have_text("Purged 2 dead letters.")
    await expect(page.locator('meta[http-equiv="refresh"]')).to_have_count(0)
    assert [j.id for j in await dlq.get_dead_letter_jobs()] == [charge]

    # When they go back, Then the filtered list is empty
    await page.get_by_role("link", name="Back to the list").click()
    assert "name=send-email" in page.url
    await expect(page.locator("a.job-link")).to_have_count(0)


async def test_operator_pages_by_cursor_sees_every_queue_and_finds_a_job_by_its_id(
    served: str, page: Page, queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    # Given twelve dead letters made by a real worker
    ids = await dead_letter(make_worker, queue, [(f"job-{i}", {"i": i}) for i in range(12)])
    newest_first = list(reversed(ids))

    # When the operator pages through ten at a time, Then Older and Newer move by cursor
    await page.goto(f"{served}/dashboard/queues/jobs-dlq/dead-letters?limit=10")
    await expect(page.locator("a.job-link")).to_have_count(10)
    await page.get_by_role("link", name="Older →").click()
    await expect(page.locator("a.job-link")).to_have_count(2)
    assert "older=" in page.url and "page=" not in page.url
    await expect(page.locator(".id").first).to_have_text(newest_first[10])
    await page.get_by_role("link", name="← Newer").click()
    await expect(page.locator("a.job-link")).to_have_count(10)
    await expect(page.locator(".id").first).to_have_text(newest_first[0])

    # When they open the view of every dead letter queue, Then the dead letters are there
    await page.get_by_role("link", name="All dead letters").click()
    await expect(
        page.get_by_role("heading", name="Dead letters in every dead letter queue")
    ).to_be_visible()
    await expect(page.locator("a.job-link")).to_have_count(12)

    # When they search for the id a job had before it died, Then its dead letter opens
    letter = await dlq.peek_dead_letter(ids[3])
    assert letter is not None and letter.dead_letter is not None
    await page.get_by_label("Dead letter or original job id").fill(
        letter.dead_letter.original_job_id
    )
    await page.get_by_role("button", name="Find").click()
    await expect(page.get_by_role("heading", name="job-3")).to_be_visible()
    assert page.url.endswith(f"/dashboard/queues/jobs-dlq/dead-letters/{ids[3]}")


async def test_signing_in_with_the_token_opens_the_dashboard(
    redis_url: str, prefix: str, page: Page
) -> None:
    async with serving(create_app(connection=redis_url, prefix=prefix, token=TOKEN)) as url:
        # When an operator without a session opens the dashboard, Then they must sign in
        await page.goto(url + "/dashboard")
        await expect(page.get_by_role("heading", name="Sign in")).to_be_visible()

        # When they paste a wrong token, Then they are told so
        await page.get_by_label("API token").fill("guess")
        await page.get_by_role("button", name="Sign in").click()
        await expect(page.locator(".flash-error")).to_contain_text("not one this server")

        # When they paste the right one, Then the overview opens, and the cookie is HttpOnly
        await page.get_by_label("API token").fill(TOKEN)
        await page.get_by_role("button", name="Sign in").click()
        await expect(page.get_by_role("heading", name="Queues")).to_be_visible()
        cookies = {c["name"]: c for c in await page.context.cookies()}
        assert cookies["lazarus_session"]["httpOnly"]
        assert cookies["lazarus_session"]["sameSite"] == "Strict"
        assert TOKEN not in cookies["lazarus_session"]["value"]
