"""The dead letters of every dead letter queue on one page, and the search box that finds a
dead letter by its own id or by its original job's id in any dead letter queue."""

from __future__ import annotations

import asyncio
import html

import httpx

from lazarus import Job, Queue

from .conftest import MakeWorker, dead_letter, fail, listed_ids

ALL = "/dashboard/dead-letters"


async def dead_letter_into(
    make_worker: MakeWorker, source: Queue, dlq: str, jobs: list[tuple[str, dict[str, str]]]
) -> list[Job]:
    """Dead-letter ``jobs`` from ``source`` into ``dlq``; the dead letters, newest first."""
    worker = make_worker(fail, source.name, dead_letter_queue=dlq)
    ids: list[str] = []
    done = asyncio.Event()

    def arrived(_job: Job, dead_letter_id: str) -> None:
        ids.append(dead_letter_id)
        if len(ids) == len(jobs):
            done.set()

    worker.on("deadLettered", arrived)
    for name, data in jobs:
        await source.add(name, data)
    await asyncio.wait_for(done.wait(), 10)
    await worker.close()
    async with Queue(dlq, connection=source.client, prefix=source.prefix) as target:
        return list(await target.get_dead_letter_jobs())


async def test_every_dead_letter_queue_is_listed_on_one_page_by_cursor(
    client: httpx.AsyncClient, queue: Queue, make_worker: MakeWorker
) -> None:
    # Given two dead letters in jobs-dlq, then one in mail-dlq
    mine = await dead_letter(make_worker, queue, [("charge", {}), ("refund", {})])
    [theirs] = await dead_letter_into(make_worker, queue, "mail-dlq", [("email", {})])

    # When every dead letter is listed, then only the emails
    first = (await client.get(f"{ALL}?limit=10")).text
    filtered = (await client.get(f"{ALL}?name=email")).text

    # Then they are all there, newest first, each with its dead letter queue, linked
    assert listed_ids(first) == [theirs.id, mine[1], mine[0]]
    assert f'href="/dashboard/queues/mail-dlq/dead-letters/{theirs.id}?' in first
    assert '<a href="/dashboard/queues/mail-dlq/dead-letters">mail-dlq</a>' in first
    assert "Dead letters in every dead letter queue" in first and "3 in all" in first
    assert "/bulk/" not in first  # bulk actions belong to one dead letter queue
    assert listed_ids(filtered) == [theirs.id]
    assert "3 in all · 1 match the filter" in html.unescape(filtered)


async def test_the_merged_list_pages_with_older_and_newer(
    client: httpx.AsyncClient, queue: Queue, make_worker: MakeWorker
) -> None:
    # Given eight dead letters in jobs-dlq and seven in mail-dlq, arriving in turns
    jobs_dlq = await dead_letter(make_worker, queue, [(f"a{i}", {}) for i in range(8)])
    mail = await dead_letter_into(make_worker, queue, "mail-dlq", [(f"m{i}", {}) for i in range(7)])
    newest_first = [j.id for j in mail] + list(reversed(jobs_dlq))

    # When the operator pages ten at a time, older then newer
    first = (await client.get(f"{ALL}?limit=10")).text
    older_link = html.unescape(first.split('<a rel="next" href="')[1].split('"')[0])
    second = (await client.get(older_link)).text
    newer_link = html.unescape(second.split('<a rel="prev" href="')[1].split('"')[0])
    back = (await client.get(newer_link)).text

    # Then the pages split the merged order, and going back shows the first page again
    assert listed_ids(first) == newest_first[:10]
    assert listed_ids(second) == newest_first[10:]
    assert listed_ids(back) == newest_first[:10]


async def test_the_search_box_finds_a_dead_letter_by_either_id_in_any_queue(
    client: httpx.AsyncClient, queue: Queue, make_worker: MakeWorker
) -> None:
    # Given a dead letter in mail-dlq whose job had its own id in "jobs"
    [letter] = await dead_letter_into(make_worker, queue, "mail-dlq", [("email", {})])
    assert letter.dead_letter is not None
    page = f"/dashboard/queues/mail-dlq/dead-letters/{letter.id}"

    # When the operator types the dead letter's id, then the original job's id
    by_id = await client.get("/dashboard/find", params={"id": letter.id})
    by_original = await client.get(
        "/dashboard/find", params={"id": f"  {letter.dead_letter.original_job_id} "}
    )
    unknown = await client.get("/dashboard/find", params={"id": "never-was"})
    not_an_id = await client.get("/dashboard/find", params={"id": "{x}"})

    # Then both lead to its page, and anything else says nothing has that id
    assert (by_id.status_code, by_id.headers["location"]) == (303, page)
    assert (by_original.status_code, by_original.headers["location"]) == (303, page)
    for response in (unknown, not_an_id):
        assert response.status_code == 404
        assert "no job with that id became a dead letter" in html.unescape(response.text)


async def test_every_page_has_the_search_box_and_the_link_to_every_dead_letter(
    client: httpx.AsyncClient,
) -> None:
    page = (await client.get("/dashboard")).text
    assert '<form method="get" action="/dashboard/find" class="find" role="search">' in page
    assert '<a href="/dashboard/dead-letters">All dead letters</a>' in page
