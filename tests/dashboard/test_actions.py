"""Replay and delete of one dead letter, through ASGI: each is a CSRF-checked POST that
answers 303 back to the list with a message. (Bulk replay and purge: test_bulk.py.)"""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import httpx

from lazarus import Queue

from .conftest import MakeWorker, csrf_of, dead_letter, listed_ids

LIST = "/dashboard/queues/jobs-dlq/dead-letters"


def redirect_params(response: httpx.Response) -> tuple[str, dict[str, str]]:
    """The path and query parameters of a 303's Location."""
    assert response.status_code == 303, response.text
    target = urlsplit(response.headers["location"])
    return target.path, {k: v[0] for k, v in parse_qs(target.query).items()}


async def test_replay_sends_the_job_back_and_redirects_to_the_list_with_a_message(
    client: httpx.AsyncClient, queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    # Given two dead letters, viewed through a filter, ten per page
    keep, replay = await dead_letter(make_worker, queue, [("keep", {}), ("again", {})])
    csrf = await csrf_of(client, f"{LIST}/{replay}?name=again&limit=10")

    # When the replay form is posted with the list's filter and page
    response = await client.post(
        f"{LIST}/{replay}/replay", data={"csrf": csrf, "name": "again", "limit": "10"}
    )

    # Then the dead letter left the DLQ, the source queue has a new waiting job, and the
    # redirect goes to the filtered list with a message naming both ids
    path, params = redirect_params(response)
    assert path == LIST
    assert params["name"] == "again" and params["limit"] == "10"
    new_id = (await queue.get_waiting(0, -1))[0].id
    assert params["flash"] == f"Replayed dead letter {replay} as job {new_id}."
    assert [j.id for j in await dlq.get_dead_letter_jobs()] == [keep]
    page = (await client.get(response.headers["location"])).text
    assert f"Replayed dead letter {replay} as job {new_id}." in page
    assert listed_ids(page) == []


async def test_delete_removes_the_dead_letter(
    client: httpx.AsyncClient, queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    keep, gone = await dead_letter(make_worker, queue, [("keep", {}), ("gone", {})])
    csrf = await csrf_of(client, LIST)

    response = await client.post(f"{LIST}/{gone}/delete", data={"csrf": csrf})

    _, params = redirect_params(response)
    assert params["flash"] == f"Deleted dead letter {gone}."
    assert [j.id for j in await dlq.get_dead_letter_jobs()] == [keep]
    assert await queue.get_waiting(0, -1) == []


async def test_acting_on_a_dead_letter_that_is_gone_says_so(
    client: httpx.AsyncClient, queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    [dead_id] = await dead_letter(make_worker, queue, [("once", {})])
    csrf = await csrf_of(client, LIST)
    await dlq.purge_dead_letter(dead_id)  # another operator was quicker

    for action in ("replay", "delete"):
        response = await client.post(f"{LIST}/{dead_id}/{action}", data={"csrf": csrf})
        _, params = redirect_params(response)
        assert params["kind"] == "error"
        assert params["flash"] == (
            f"Dead letter {dead_id} is gone: someone replayed or deleted it first."
        )
