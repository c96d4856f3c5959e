"""A queue's pages in a real headless Chromium: failed jobs found, retried one by one and in
bulk, delayed jobs run now one by one and in bulk, a delayed job's priority and delay changed
from its page, and auto-refresh switched on, all within the script-free
Content-Security-Policy."""

from __future__ import annotations

from playwright.async_api import Page, expect

from lazarus import Job, Queue

from ..conftest import wait_until
from .conftest import MakeWorker
from .test_browser import page, served  # noqa: F401 - fixtures


async def test_operator_retries_failed_jobs_from_the_queue_page(
    served: str,  # noqa: F811
    page: Page,  # noqa: F811
    queue: Queue,
    make_worker: MakeWorker,
) -> None:
    # Given three jobs that failed for good on a queue without a dead letter queue
    await queue.add_bulk([{"name": "charge", "data": {"n": n}} for n in range(3)])

    async def boom(job: Job) -> None:
        raise RuntimeError(f"card {job.data['n']} declined")

    worker = make_worker(boom)

    async def failed() -> bool:
        return await queue.get_failed_count() == 3

    await wait_until(failed)
    await worker.close()
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text))

    # When the operator opens the queue from the overview and picks the failed jobs
    await page.goto(served + "/dashboard")
    await expect(page.locator("tbody tr", has_text="jobs").locator(".badge.idle")).to_have_text(
        "no workers"
    )
    await page.get_by_role("link", name="jobs", exact=True).click()
    await page.locator("nav.tabs a", has_text="failed").click()
    rows = page.locator("table.jobs tbody tr")
    await expect(rows).to_have_count(3)
    await expect(rows.first).to_contain_text("declined")

    # When they retry one, Then it leaves the failed jobs with a message
    await rows.first.get_by_role("button", name="Retry").click()
    await expect(page.locator(".flash-ok")).to_contain_text("waits again")
    await expect(rows).to_have_count(2)

    # When they retry the rest in bulk (confirming first), Then none is left failed
    await page.get_by_role("link", name="Retry 2 failed…").click()
    await page.get_by_role("button", name="Retry 2 jobs").click()
    await expect(page.locator(".flash-ok")).to_have_text("Retried 2 failed jobs.")
    assert await queue.get_failed_count() == 0
    assert (await queue.get_job_counts())["waiting"] == 3

    # When they switch auto-refresh on, Then the page carries a meta refresh, and the policy
    # blocked nothing
    await page.get_by_role("link", name="5 s").click()
    await expect(page.locator('meta[http-equiv="refresh"]')).to_have_attribute("content", "5")
    assert [e for e in errors if "Content Security Policy" in e] == []


async def test_operator_runs_delayed_jobs_now_from_the_queue_page(
    served: str,  # noqa: F811
    page: Page,  # noqa: F811
    queue: Queue,
) -> None:
    # Given three jobs delayed by an hour on a paused queue (so that they stay waiting)
    await queue.pause()
    await queue.add_bulk([{"name": "report", "data": {"n": n}, "delay": 3_600_000}
                          for n in range(3)])  # fmt: skip
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text))

    # When the operator opens the delayed jobs of the queue
    await page.goto(served + "/dashboard/queues/jobs")
    await expect(page.get_by_role("link", name="Run 3 delayed now…")).to_have_count(0)
    await page.locator("nav.tabs a", has_text="delayed").click()
    rows = page.locator("table.jobs tbody tr")
    await expect(rows).to_have_count(3)

    # When they run one now, Then it leaves the delayed jobs with a message
    await rows.first.get_by_role("button", name="Run now").click()
    await expect(page.locator(".flash-ok")).to_contain_text("is paused now")
    await expect(rows).to_have_count(2)

    # When they run the rest now in bulk (confirming first), Then the waiting jobs show, and
    # none is left delayed
    await page.get_by_role("link", name="Run 2 delayed now…").click()
    await expect(page.locator("form p")).to_contain_text("Run 2 delayed jobs of jobs now?")
    await page.get_by_role("button", name="Run 2 jobs now").click()
    await expect(page.locator(".flash-ok")).to_have_text("Promoted 2 delayed jobs.")
    await expect(page.locator("nav.tabs .tab.current")).to_contain_text("waiting")
    await expect(rows).to_have_count(3)
    assert await queue.get_delayed_count() == 0
    assert [e for e in errors if "Content Security Policy" in e] == []


async def test_operator_changes_a_delayed_jobs_priority_and_delay_from_its_page(
    served: str,  # noqa: F811
    page: Page,  # noqa: F811
    queue: Queue,
) -> None:
    # Given a job delayed by an hour on a paused queue
    await queue.pause()
    job = await queue.add("report", {"n": 1}, delay=3_600_000)
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text))

    # When the operator opens its page and gives it priority 2, due in a minute
    await page.goto(served + f"/dashboard/queues/jobs/jobs/{job.id}")
    await page.get_by_label("Priority").fill("2")
    await page.get_by_label("Due in").fill("60")
    await page.get_by_role("button", name="Change").click()

    # Then the page says so, shows the new priority, and the job holds both
    await expect(page.locator(".flash-ok")).to_have_text(
        "Changed the priority and the delay: the job is delayed now."
    )
    priority = page.locator("dl.facts dt", has_text="Priority").locator("xpath=following::dd[1]")
    await expect(priority).to_have_text("2")
    stored = await queue.get_job(job.id)
    assert stored is not None and stored.priority == 2
    due = await queue.client.zscore(queue.keys.delayed, job.id)
    assert due is not None and due < job.timestamp + 3_600_000
    assert [e for e in errors if "Content Security Policy" in e] == []
