"""The dead letter page's lifecycle: the timeline, flag / reopen / archive with a note, replay
with a changed payload into another queue, and the status filter of the list."""

from __future__ import annotations

import httpx

from lazarus import Queue

from .conftest import MakeWorker, csrf_of, dead_letter, listed_ids

LIST = "/dashboard/queues/jobs-dlq/dead-letters"


async def test_archive_with_a_note_shows_in_the_timeline_and_the_status_filter(
    client: httpx.AsyncClient, queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    [dl_id] = await dead_letter(make_worker, queue, [("charge", {})])
    csrf = await csrf_of(client, f"{LIST}/{dl_id}")

    response = await client.post(f"{LIST}/{dl_id}/status", data={
        "csrf": csrf, "action": "archive", "operator": "ada", "note": "customer refunded",
    })  # fmt: skip

    assert response.status_code == 303
    assert "Archived" in response.headers["location"]
    page = await client.get(f"{LIST}/{dl_id}")
    assert "customer refunded" in page.text and "operator:ada" in page.text
    assert 'action="' + f"{LIST}/{dl_id}/replay" + '"' not in page.text  # not replayable
    assert listed_ids((await client.get(LIST)).text) == []
    assert listed_ids((await client.get(f"{LIST}?status=archived")).text) == [dl_id]


async def test_a_refused_action_comes_back_as_an_error(
    client: httpx.AsyncClient, queue: Queue, make_worker: MakeWorker
) -> None:
    [dl_id] = await dead_letter(make_worker, queue, [("charge", {})])
    csrf = await csrf_of(client, f"{LIST}/{dl_id}")

    response = await client.post(f"{LIST}/{dl_id}/status", data={"csrf": csrf, "action": "reopen"})

    assert response.status_code == 303 and "kind=error" in response.headers["location"]


async def test_replay_with_a_changed_payload_into_another_queue(
    client: httpx.AsyncClient, queue: Queue, dlq: Queue, make_worker: MakeWorker,
    redis_url: str, prefix: str,
) -> None:  # fmt: skip
    [dl_id] = await dead_letter(make_worker, queue, [("charge", {"n": 1})])
    csrf = await csrf_of(client, f"{LIST}/{dl_id}")

    bad = await client.post(f"{LIST}/{dl_id}/replay-changed", data={"csrf": csrf, "data": "{nope"})
    good = await client.post(f"{LIST}/{dl_id}/replay-changed", data={
        "csrf": csrf, "data": '{"n": 2}', "queue": "review", "note": "fixed amount",
    })  # fmt: skip

    assert "kind=error" in bad.headers["location"]
    assert good.status_code == 303 and "kind=error" not in good.headers["location"]
    async with Queue("review", connection=redis_url, prefix=prefix) as review:
        [job] = await review.get_waiting()
    assert job.data == {"n": 2}
    page = await client.get(f"{LIST}/{dl_id}")
    assert "processing" in page.text and "fixed amount" in page.text
