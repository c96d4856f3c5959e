"""Bulk replay and purge from the dashboard, through ASGI: a confirmation page that states the
filter and the count, a POST that starts the operation in the background, and a progress page
that reloads itself until the operation is over."""

from __future__ import annotations

import html
import re
from urllib.parse import parse_qs, urlsplit

import httpx
from fastapi import FastAPI

from lazarus import Queue

from ..conftest import wait_until
from .conftest import MakeWorker, csrf_of, dead_letter

BULK = "/dashboard/queues/jobs-dlq/bulk"
REFRESH = '<meta http-equiv="refresh" content="1">'


async def started(response: httpx.Response) -> tuple[str, dict[str, str]]:
    """The operation id and back-link parameters a bulk POST redirected to."""
    assert response.status_code == 303, response.text
    target = urlsplit(response.headers["location"])
    match = re.fullmatch(r"/dashboard/operations/([0-9a-f]{32})", target.path)
    assert match, target.path
    return match.group(1), {k: v[0] for k, v in parse_qs(target.query).items()}


async def finished_page(client: httpx.AsyncClient, operation_id: str) -> str:
    """The progress page once the operation is over (it then stops reloading itself)."""
    page = ""

    async def over() -> bool:
        nonlocal page
        page = (await client.get(f"/dashboard/operations/{operation_id}")).text
        return "finished</h1>" in page or "stopped</h1>" in page

    await wait_until(over, message=f"operation {operation_id} to finish")
    return page


async def test_bulk_confirmation_states_how_many_dead_letters_the_filter_matches(
    client: httpx.AsyncClient, queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    await dead_letter(make_worker, queue, [
        ("charge", {"error": "TimeoutError"}), ("charge", {"error": "TimeoutError"}),
        ("email", {"error": "ValueError"}),
    ])  # fmt: skip

    response = await client.get(f"{BULK}/purge?error_type=TimeoutError")

    assert response.status_code == 200
    page = html.unescape(response.text)
    assert "Purge 2 dead letters from jobs-dlq?" in page
    assert "<dt>Error type</dt><dd><code>TimeoutError</code></dd>" in page
    assert '<input type="hidden" name="error_type" value="TimeoutError">' in page
    assert await dlq.get_dead_letter_count() == 3  # nothing changed


async def test_bulk_confirmation_without_filter_warns_it_applies_to_every_dead_letter(
    client: httpx.AsyncClient, queue: Queue, make_worker: MakeWorker
) -> None:
    await dead_letter(make_worker, queue, [("a", {})])

    page = (await client.get(f"{BULK}/replay")).text

    assert "Replay 1 dead letter from jobs-dlq?" in page
    assert "this applies to <strong>every</strong> dead letter" in page


async def test_bulk_confirmation_of_a_text_filter_counts_only_when_asked(
    client: httpx.AsyncClient, queue: Queue, make_worker: MakeWorker
) -> None:
    # Given three dead letters, two of whose payloads mention "vip"
    await dead_letter(make_worker, queue, [("a", {"tier": "vip"}), ("b", {}), ("c", {"v": "vip"})])

    # When the purge of the "vip" ones is to be confirmed, then counted
    uncounted = html.unescape((await client.get(f"{BULK}/purge?payload_contains=vip")).text)
    counted = html.unescape((await client.get(f"{BULK}/purge?payload_contains=vip&count=1")).text)

    # Then the first page does not scan, and offers to; the second states the count
    assert "Purge the matching dead letters from jobs-dlq?" in uncounted
    assert 'class="count" href="/dashboard/queues/jobs-dlq/bulk/purge?' in uncounted
    assert "Purge every match" in uncounted
    assert "Purge 2 dead letters from jobs-dlq?" in counted


async def test_bulk_purge_starts_in_the_background_and_reports_when_done(
    client: httpx.AsyncClient, queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    # Given two timeouts and an email
    _, _, email = await dead_letter(make_worker, queue, [
        ("charge", {"error": "TimeoutError"}), ("charge", {"error": "TimeoutError"}),
        ("email", {"error": "ValueError"}),
    ])  # fmt: skip
    csrf = await csrf_of(client, f"{BULK}/purge?error_type=TimeoutError")

    # When the confirmation is posted
    response = await client.post(f"{BULK}/purge", data={"csrf": csrf,
                                                         "error_type": "TimeoutError"})  # fmt: skip

    # Then it redirects to the operation's progress page, which ends stating what was done
    operation_id, back = await started(response)
    assert back == {"error_type": "TimeoutError", "limit": "25"}
    page = await finished_page(client, operation_id)
    assert "Purged 2 dead letters." in page and REFRESH not in page
    assert "<code>error_type=TimeoutError</code>" in page
    redirected = (await client.get(response.headers["location"])).text
    assert 'href="/dashboard/queues/jobs-dlq/dead-letters?error_type=TimeoutError' in redirected
    assert [j.id for j in await dlq.get_dead_letter_jobs()] == [email]


async def test_bulk_replay_sends_every_match_back_to_its_source_queue(
    client: httpx.AsyncClient, queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    await dead_letter(make_worker, queue, [("a", {}), ("b", {})])
    csrf = await csrf_of(client, f"{BULK}/replay")

    refused = await client.post(f"{BULK}/replay", data={"csrf": csrf})
    assert "tick" in parse_qs(urlsplit(refused.headers["location"]).query)["flash"][0]
    assert await dlq.get_dead_letter_count() == 2

    everything = {"csrf": csrf, "all": "yes"}
    operation_id, _ = await started(await client.post(f"{BULK}/replay", data=everything))

    assert "Replayed 2 dead letters." in await finished_page(client, operation_id)
    assert await dlq.get_dead_letter_count() == 0
    assert sorted(j.name for j in await queue.get_waiting(0, -1)) == ["a", "b"]


async def test_progress_page_reloads_itself_while_the_operation_runs(
    app: FastAPI, client: httpx.AsyncClient, queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    # Given a replay of three dead letters at one every five seconds
    await dead_letter(make_worker, queue, [("a", {}), ("b", {}), ("c", {})])
    csrf = await csrf_of(client, f"{BULK}/replay")
    operation_id, _ = await started(
        await client.post(f"{BULK}/replay", data={"csrf": csrf, "rate": "0.2", "all": "yes"})
    )

    # When the first is done, Then the page shows the progress and reloads itself
    async def first_done() -> bool:
        return await dlq.get_dead_letter_count() == 2

    await wait_until(first_done, message="the first replay")
    running = (await client.get(f"/dashboard/operations/{operation_id}")).text
    assert REFRESH in running
    assert "Replaying dead letters from jobs-dlq…" in running
    assert "1 of 3 done so far, at most 0.2 per second" in running
    assert '<progress value="1" max="3">' in running

    # When the server stops, Then the page says another server will go on with it, and
    # goes on reloading
    await app.state.bulk.close()
    interrupted = (await client.get(f"/dashboard/operations/{operation_id}")).text
    assert "Its server stopped: the next server to look goes on with it." in interrupted
    assert REFRESH in interrupted

    # When the operator cancels it from the page, Then it says so, and stops reloading
    page = f"/dashboard/operations/{operation_id}"
    cancelled = await client.post(f"{page}/cancel", data={"csrf": await csrf_of(client, page)})
    assert cancelled.status_code == 303
    assert cancelled.headers["location"] == page
    stopped = await finished_page(client, operation_id)
    assert "cancelled (replayed 1 dead letter before that)" in stopped
    assert REFRESH not in stopped
    assert await dlq.get_dead_letter_count() == 2


async def test_bulk_post_with_a_bad_filter_or_rate_changes_nothing(
    client: httpx.AsyncClient, queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    await dead_letter(make_worker, queue, [("a", {})])
    csrf = await csrf_of(client, f"{BULK}/purge")

    bad_filter = await client.post(f"{BULK}/purge", data={"csrf": csrf, "since": "soon"})
    bad_rate = await client.post(f"{BULK}/purge", data={"csrf": csrf, "rate": "-3"})

    for response, message in ((bad_filter, "Purge failed: Since (UTC): not a date and time"),
                              (bad_rate, "Purge failed: Rate: must be a number")):  # fmt: skip
        assert response.status_code == 303
        params = {
            k: v[0] for k, v in parse_qs(urlsplit(response.headers["location"]).query).items()
        }
        assert params["kind"] == "error" and params["flash"].startswith(message)
    assert await dlq.get_dead_letter_count() == 1


async def test_an_unknown_operation_is_a_404_page(client: httpx.AsyncClient) -> None:
    for operation_id in ("0" * 32, "nope", "%7Bx%7D"):
        response = await client.get(f"/dashboard/operations/{operation_id}")
        assert response.status_code == 404, operation_id
        assert "There is no bulk operation" in html.unescape(response.text)


async def test_a_viewer_sees_no_cancel_and_cannot_post_one(
    app: FastAPI, client: httpx.AsyncClient, viewer: httpx.AsyncClient, queue: Queue,
    make_worker: MakeWorker,
) -> None:  # fmt: skip
    # Given a slow replay started by an operator
    await dead_letter(make_worker, queue, [("a", {}), ("b", {})])
    csrf = await csrf_of(client, f"{BULK}/replay")
    operation_id, _ = await started(
        await client.post(f"{BULK}/replay", data={"csrf": csrf, "rate": "0.05", "all": "yes"})
    )
    page = f"/dashboard/operations/{operation_id}"

    # When a viewer opens its page, and posts a cancel all the same
    shown = await viewer.get(page)
    refused = await viewer.post(f"{page}/cancel", data={"csrf": await csrf_of(viewer, page)})

    # Then the page shows no cancel, the post is refused, and the operation runs on
    assert shown.status_code == 200 and "Replaying dead letters" in shown.text
    assert "/cancel" not in shown.text
    assert refused.status_code == 403 and "needs the operator role" in refused.text
    assert app.state.bulk.running == [operation_id]
    assert "/cancel" in (await client.get(page)).text
