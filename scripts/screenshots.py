"""Take the dashboard screenshots in docs/images/ with a real headless Chromium.

    .venv/bin/python scripts/screenshots.py

Starts a private redis-server (lazarus.embedded), makes dead letters with real workers whose
processors fail, serves the app with uvicorn on a free port, and saves one PNG per page:
the overview, the dead letter list (after a replay), a dead letter's page and a bulk
confirmation. Failures are back-dated over the last hour (the workers' clock is shifted
per job) so that the per-minute chart has something to show.
"""

from __future__ import annotations

import asyncio
import random
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import uvicorn
from playwright.async_api import Page, async_playwright

from lazarus import Job, Queue, UnrecoverableError, Worker, _execution
from lazarus.embedded import EmbeddedRedis
from lazarus.http.app import create_app
from lazarus.worker import WorkerEvent

OUT = Path(__file__).resolve().parent.parent / "docs" / "images"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-sync"]  # fmt: skip
PREFIX = "demo"
FAILURES: dict[str, Callable[[str], BaseException]] = {
    "TimeoutError": TimeoutError,
    "ConnectionRefusedError": ConnectionRefusedError,
    "ValueError": ValueError,
    "Unrecoverable": UnrecoverableError,
}


class Clock:
    """The workers' clock, shifted back by the minutes the job being processed asks for."""

    def __init__(self) -> None:
        self.offset_ms = 0
        self.real = _execution.now_ms

    def __call__(self) -> int:
        return self.real() - self.offset_ms


def processor(clock: Clock) -> Callable[[Job], Any]:
    async def fail(job: Job) -> None:
        if "error" not in job.data:
            return
        clock.offset_ms = int(job.data.get("minutes_ago", 0) * 60_000)
        raise FAILURES[job.data["error"]](job.data["message"])

    return fail


def payments(rng: random.Random) -> list[tuple[str, dict[str, Any], int]]:
    """Failed payments over the last hour, with an outage of the card gateway 15-22 min ago."""
    timeout = "card gateway did not answer in 5000 ms"
    jobs = []
    for minute in range(58, -1, -1):
        outage = 15 <= minute <= 22
        for _ in range(rng.randint(4, 9) if outage else rng.choice([0, 0, 0, 1, 1, 2])):
            order, ago, kind = (
                rng.randint(10_000, 99_999),
                minute + rng.random() * 0.9,
                rng.random(),
            )
            if outage or kind < 0.4:
                data = {"error": "TimeoutError", "message": timeout, "order": order,
                        "amount_cents": rng.randint(500, 90_000)}  # fmt: skip
                jobs.append(("charge-card", {**data, "minutes_ago": ago}, 1))
            elif kind < 0.7:
                data = {"error": "Unrecoverable", "order": order,
                        "message": "card declined: insufficient funds (do not retry)"}  # fmt: skip
                jobs.append(("charge-card", {**data, "minutes_ago": ago}, 1))
            else:
                data = {"error": "ValueError", "message": "refund amount must be positive",
                        "order": order, "amount_cents": -rng.randint(1, 999)}  # fmt: skip
                jobs.append(("refund", {**data, "minutes_ago": ago}, 1))
    # Attempts: 1 above, so that dead letters arrive in the order they were added. The newest
    # is not back-dated and has three attempts: the one the job page screenshot shows.
    jobs.append(("charge-card", {"error": "TimeoutError", "order": 48213, "customer": 90417,
                 "amount_cents": 12900, "currency": "EUR", "message": timeout}, 3))  # fmt: skip
    return jobs


def emails(rng: random.Random) -> list[tuple[str, dict[str, Any], int]]:
    """Receipts that could not be sent: the mail server refused connections."""
    refused = "smtp.example.com:587 refused the connection"
    jobs = []
    for i in range(9):
        data = {"error": "ConnectionRefusedError", "to": f"customer{i}@example.com",
                "message": refused, "minutes_ago": rng.uniform(0, 59)}  # fmt: skip
        jobs.append(("send-receipt", data, 1))
    return jobs


async def run_until(worker: Worker, event: WorkerEvent, count: int) -> None:
    """Let ``worker`` run until it has emitted ``event`` ``count`` times, then close it."""
    seen, done = [0], asyncio.Event()

    def tick(*_: object) -> None:
        seen[0] += 1
        if seen[0] == count:
            done.set()

    worker.on(event, tick)
    await asyncio.wait_for(done.wait(), 60)
    await worker.close()


async def fill(url: str) -> None:
    """Queues with completed, waiting and dead-lettered jobs."""
    rng, clock = random.Random(7), Clock()
    options: dict[str, Any] = {"connection": url, "prefix": PREFIX, "block_timeout": 0.2}
    _execution.now_ms = clock  # type: ignore[assignment]
    try:
        for source, jobs in (("payments", payments(rng)), ("emails", emails(rng))):
            async with Queue(source, connection=url, prefix=PREFIX) as queue:
                for name, data, attempts in sorted(jobs, key=lambda j: -j[1].get("minutes_ago", 0)):
                    await queue.add(name, data, attempts=attempts)
            # The shifted clock stamps locks too: a long lock keeps them valid meanwhile.
            worker = Worker(source, processor(clock), dead_letter_queue=f"{source}-dlq",
                            lock_duration=3 * 3_600_000, **options)  # fmt: skip
            await run_until(worker, "deadLettered", len(jobs))
    finally:
        _execution.now_ms = clock.real
    for source, count in (("payments", 240), ("emails", 130)):
        async with Queue(source, connection=url, prefix=PREFIX) as queue:
            await queue.add_bulk([{"name": "ok", "data": {"n": i}} for i in range(count)])
        await run_until(Worker(source, processor(clock), **options), "completed", count)
    async with Queue("reports", connection=url, prefix=PREFIX) as reports:
        for day in range(4):
            await reports.add("nightly-report", {"day": day})
        await reports.pause()


async def shoot(page: Page, base: str) -> None:
    """Visit each page and save its screenshot."""
    await page.goto(f"{base}/dashboard")
    await page.screenshot(path=OUT / "dashboard-overview.png", full_page=True)

    await page.goto(f"{base}/dashboard/queues/payments?state=completed")
    await page.screenshot(path=OUT / "dashboard-queue.png", full_page=True)

    await page.goto(
        f"{base}/dashboard/queues/payments-dlq/dead-letters?source_queue=payments&limit=10"
    )
    await page.locator("a.job-link").first.click()
    await page.locator("details.trace").first.evaluate("d => d.open = false")
    await page.screenshot(path=OUT / "dashboard-dead-letter.png", full_page=True)

    await page.get_by_role("button", name="Replay into payments").click()
    await page.screenshot(path=OUT / "dashboard-dead-letters.png", full_page=True)

    await page.get_by_label("Error type").fill("TimeoutError")
    await page.get_by_role("button", name="Filter").click()
    await page.get_by_role("link", name="Replay").first.click()
    await page.screenshot(path=OUT / "dashboard-bulk-confirm.png", full_page=True)


def serve(url: str) -> tuple[uvicorn.Server, threading.Thread, str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    app = create_app(connection=url, prefix=PREFIX, auth=False)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    return server, thread, f"http://127.0.0.1:{port}"


async def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with EmbeddedRedis() as redis:
        await fill(redis.url)
        server, thread, base = serve(redis.url)
        try:
            async with async_playwright() as pw:
                browser = await pw.chromium.launch(
                    executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
                )
                page = await browser.new_page(viewport={"width": 1366, "height": 860})
                await shoot(page, base)
                await browser.close()
        finally:
            server.should_exit = True
            thread.join(10)
    for png in sorted(OUT.glob("dashboard-*.png")):
        print(png.relative_to(OUT.parent.parent))


if __name__ == "__main__":
    asyncio.run(main())
