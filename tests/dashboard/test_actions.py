"""Replay and delete of one dead letter, and bulk replay / purge after a confirmation page,
through ASGI: each is a CSRF-checked POST that answers 303 back to the list with a message."""

from __future__ import annotations

import html
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
    # Given two dead letters, viewed through a filter on page 1
    keep, replay = await dead_letter(make_worker, queue, [("keep", {}), ("again", {})])
    csrf = await csrf_of(client, f"{LIST}/{replay}?name=again")

    # When the replay form is posted with the list's filter
    response = await client.post(
        f"{LIST}/{replay}/replay", data={"csrf": csrf, "name": "again", "page": "1"}
    )

    # Then the dead letter left the DLQ, the source queue has a new waiting job, and the
    # redirect goes to the filtered list with a message naming both ids
    path, params = redirect_params(response)
    assert path == LIST
    assert params["name"] == "again" and params["page"] == "1"
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
    await dlq.purge_dead_letter(dead_id)  # another operator was quicker
    csrf = await csrf_of(client, LIST)

    for action in ("replay", "delete"):
        response = await client.post(f"{LIST}/{dead_id}/{action}", data={"csrf": csrf})
        _, params = redirect_params(response)
        assert params["kind"] == "error"
        assert params["flash"] == (
            f"Dead letter {dead_id} is gone: someone replayed or deleted it first."
        )


async def test_bulk_confirmation_states_how_many_dead_letters_the_filter_matches(
    client: httpx.AsyncClient, queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    await dead_letter(make_worker, queue, [
        ("charge", {"error": "TimeoutError"}), ("charge", {"error": "TimeoutError"}),
        ("email", {"error": "ValueError"}),
    ])  # fmt: skip

    response = await client.get("/dashboard/queues/jobs-dlq/bulk/purge?error_type=TimeoutError")

    assert response.status_code == 200
    page = html.unescape(response.text)
    assert "Purge 2 dead letters from jobs-dlq?" in page
    assert "<dt>Error type</dt><dd><code>TimeoutError</code></dd>" in page
    assert '<input type="hidden" name="error_type" value="TimeoutError">' in page
    assert await dlq.get_dead_letter_count() == 3  # a dry run: nothing changed


async def test_bulk_confirmation_without_filter_warns_it_applies_to_every_dead_letter(
    client: httpx.AsyncClient, queue: Queue, make_worker: MakeWorker
) -> None:
    await dead_letter(make_worker, queue, [("a", {})])

    page = (await client.get("/dashboard/queues/jobs-dlq/bulk/replay")).text

    assert "Replay 1 dead letter from jobs-dlq?" in page
    assert "this applies to <strong>every</strong> dead letter" in page


async def test_bulk_purge_deletes_exactly_the_matching_dead_letters(
    client: httpx.AsyncClient, queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    _, _, email = await dead_letter(make_worker, queue, [
        ("charge", {"error": "TimeoutError"}), ("charge", {"error": "TimeoutError"}),
        ("email", {"error": "ValueError"}),
    ])  # fmt: skip
    csrf = await csrf_of(client, "/dashboard/queues/jobs-dlq/bulk/purge?error_type=TimeoutError")

    response = await client.post(
        "/dashboard/queues/jobs-dlq/bulk/purge", data={"csrf": csrf, "error_type": "TimeoutError"}
    )

    _, params = redirect_params(response)
    assert params["flash"] == "Purged 2 dead letters."
    assert params["error_type"] == "TimeoutError"
    assert [j.id for j in await dlq.get_dead_letter_jobs()] == [email]


async def test_bulk_replay_sends_every_match_back_to_its_source_queue(
    client: httpx.AsyncClient, queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    await dead_letter(make_worker, queue, [("a", {}), ("b", {})])
    csrf = await csrf_of(client, "/dashboard/queues/jobs-dlq/bulk/replay")

    response = await client.post("/dashboard/queues/jobs-dlq/bulk/replay", data={"csrf": csrf})

    _, params = redirect_params(response)
    assert params["flash"] == "Replayed 2 dead letters."
    assert await dlq.get_dead_letter_count() == 0
    assert sorted(j.name for j in await queue.get_waiting(0, -1)) == ["a", "b"]


async def test_bulk_post_with_a_bad_filter_changes_nothing(
    client: httpx.AsyncClient, queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    await dead_letter(make_worker, queue, [("a", {})])
    csrf = await csrf_of(client, LIST)

    response = await client.post(
        "/dashboard/queues/jobs-dlq/bulk/purge", data={"csrf": csrf, "since": "soon"}
    )

    _, params = redirect_params(response)
    assert params["kind"] == "error"
    assert params["flash"].startswith("Purge failed: Since (UTC): not a date and time")
    assert await dlq.get_dead_letter_count() == 1
