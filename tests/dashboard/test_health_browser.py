"""The health page of a dead letter queue in a real headless Chromium: reached from the dead
letter list, its charts drawn without a script and without a CSP violation."""

from __future__ import annotations

from playwright.async_api import ConsoleMessage, Page, expect

from lazarus import Queue

from .conftest import MakeWorker, dead_letter
from .test_browser import page, served  # noqa: F401 - the browser fixtures


async def test_operator_opens_the_health_page_of_a_dead_letter_queue(
    served: str,  # noqa: F811
    page: Page,  # noqa: F811
    queue: Queue,
    make_worker: MakeWorker,
) -> None:
    # Given three dead letters: two timeouts and a bad input
    await dead_letter(make_worker, queue, [
        ("charge-card", {"error": "TimeoutError"}),
        ("charge-card", {"error": "TimeoutError"}),
        ("send-email", {"error": "ValueError"}),
    ])  # fmt: skip
    violations: list[str] = []

    def console(message: ConsoleMessage) -> None:
        if "Content Security Policy" in message.text:
            violations.append(message.text)

    page.on("console", console)

    # When the operator goes from the dead letter list to its health page
    await page.goto(f"{served}/dashboard/queues/jobs-dlq/dead-letters")
    await page.get_by_role("link", name="Health of jobs-dlq").click()

    # Then the backlog, the bars by status and by error type and the alerts are shown
    await expect(page.get_by_role("heading", name="Health of jobs-dlq")).to_be_visible()
    await expect(page.locator("table.health")).to_contain_text("Backlog (pending)")
    await expect(page.locator('svg[aria-label="Dead letters by status"] rect.bar')).to_have_count(1)
    errors_chart = page.locator('svg[aria-label="Dead letters by error type"]')
    await expect(errors_chart.locator("rect.bar")).to_have_count(2)
    await expect(errors_chart).to_contain_text("TimeoutError")
    await expect(page.locator(".alerts li.ok")).to_have_count(3)
    assert violations == []
