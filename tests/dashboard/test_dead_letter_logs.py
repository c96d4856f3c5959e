"""The dead letter page shows the job's progress and its logs."""

from __future__ import annotations

import asyncio
import html

import httpx

from lazarus import Job, Queue, UnrecoverableError

from .conftest import MakeWorker


async def dead_letter_of(queue: Queue, make_worker: MakeWorker, lines: int) -> str:
    async def process(job: Job) -> None:
        for i in range(lines):
            await job.log(f"step {i} <b>done</b>")
        await job.update_progress({"step": lines})
        raise UnrecoverableError("gave up")

    await queue.add("import")
    worker = make_worker(process, dead_letter_queue="jobs-dlq")
    arrived: asyncio.Queue[str] = asyncio.Queue()
    worker.on("deadLettered", lambda job, dl_id: arrived.put_nowait(dl_id))
    return await asyncio.wait_for(arrived.get(), 10)


async def test_dead_letter_page_shows_progress_and_logs_escaped(
    client: httpx.AsyncClient, queue: Queue, make_worker: MakeWorker
) -> None:
    dead_id = await dead_letter_of(queue, make_worker, 2)

    response = await client.get(f"/dashboard/queues/jobs-dlq/dead-letters/{dead_id}")

    assert response.status_code == 200
    assert "step 0 &lt;b&gt;done&lt;/b&gt;\nstep 1 &lt;b&gt;done&lt;/b&gt;" in response.text
    assert "<dt>Progress</dt>" in response.text and '"step"' in html.unescape(response.text)


async def test_dead_letter_page_shows_the_newest_lines_of_long_logs(
    client: httpx.AsyncClient, queue: Queue, make_worker: MakeWorker
) -> None:
    dead_id = await dead_letter_of(queue, make_worker, 205)

    response = await client.get(f"/dashboard/queues/jobs-dlq/dead-letters/{dead_id}")

    assert "The newest 200 of 205 lines." in response.text
    assert "step 204 " in response.text and "step 4 " not in response.text


async def test_dead_letter_page_without_logs_says_so(
    client: httpx.AsyncClient, queue: Queue, make_worker: MakeWorker
) -> None:
    dead_id = await dead_letter_of(queue, make_worker, 0)

    response = await client.get(f"/dashboard/queues/jobs-dlq/dead-letters/{dead_id}")

    assert "No log lines." in response.text
