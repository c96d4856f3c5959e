"""The dead letter browser's pages, through ASGI: "Older" and "Newer" links that carry
cursors (never page numbers), the total only when the store counts it without a scan, and a
"Count them" link otherwise."""

from __future__ import annotations

import html
import re
from urllib.parse import parse_qs, urlsplit

import httpx

from lazarus import Queue

from .conftest import MakeWorker, dead_letter, listed_ids

LIST = "/dashboard/queues/jobs-dlq/dead-letters"
LINK = re.compile(r'<a rel="(prev|next)" href="([^"]+)">')


def links(page: str) -> dict[str, str]:
    """The "Newer" (prev) and "Older" (next) links of a list page, unescaped."""
    return {rel: html.unescape(href) for rel, href in LINK.findall(page)}


async def test_older_and_newer_links_walk_the_list_by_cursor(
    client: httpx.AsyncClient, queue: Queue, make_worker: MakeWorker
) -> None:
    # Given 25 dead letters
    ids = await dead_letter(make_worker, queue, [(f"job-{i}", {"i": i}) for i in range(25)])
    newest_first = list(reversed(ids))

    # When the operator follows "Older" twice from the first page of ten
    first = (await client.get(f"{LIST}?limit=10")).text
    second = (await client.get(links(first)["next"])).text
    third = (await client.get(links(second)["next"])).text

    # Then each page holds the next ten, the last has no "Older", the first no "Newer"
    assert listed_ids(first) == newest_first[:10]
    assert listed_ids(second) == newest_first[10:20]
    assert listed_ids(third) == newest_first[20:]
    assert set(links(first)) == {"next"} and set(links(third)) == {"prev"}

    # When they go back with "Newer" from the last page, then again
    back = (await client.get(links(third)["prev"])).text
    top = (await client.get(links(back)["prev"])).text

    # Then they see the same pages again, and links carry cursors, never page numbers
    assert listed_ids(back) == newest_first[10:20]
    assert listed_ids(top) == newest_first[:10]
    for page in (first, second, third, back, top):
        for href in links(page).values():
            params = parse_qs(urlsplit(href).query)
            assert "page" not in params and params["limit"] == ["10"]
            assert set(params) & {"older", "newer"}
    assert set(links(top)) == {"next"}


async def test_newer_from_near_the_top_shows_the_newest_full_page(
    client: httpx.AsyncClient, queue: Queue, make_worker: MakeWorker
) -> None:
    # Given twelve dead letters, read ten at a time
    ids = await dead_letter(make_worker, queue, [(f"job-{i}", {}) for i in range(12)])
    first = (await client.get(f"{LIST}?limit=10")).text
    second = (await client.get(links(first)["next"])).text

    # When three more arrive and the operator goes back to "Newer"
    later = await dead_letter(make_worker, queue, [(f"new-{i}", {}) for i in range(3)])
    newer = (await client.get(links(second)["prev"])).text

    # Then they see the ten dead letters just above the page they were on
    assert listed_ids(newer) == list(reversed(ids + later))[3:13]
    # ... and "Newer" from there, with only three above, shows the newest ten
    top = (await client.get(links(newer)["prev"])).text
    assert listed_ids(top) == list(reversed(ids + later))[:10]
    assert "prev" not in links(top)


async def test_a_cursor_keeps_the_filter_and_survives_the_removal_of_its_dead_letter(
    client: httpx.AsyncClient, queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    # Given eleven charges and two refunds, the charges listed ten at a time
    ids = await dead_letter(
        make_worker, queue, [("charge", {"n": i}) for i in range(11)] + [("refund", {})] * 2
    )
    charges = list(reversed(ids[:11]))
    first = (await client.get(f"{LIST}?name=charge&limit=10")).text
    older = links(first)["next"]

    # When the last charge of the first page, where its cursor stands, is replayed, and the
    # operator then follows "Older"
    await dlq.replay_dead_letter(charges[9])
    second = (await client.get(older)).text

    # Then the first page held the newest ten charges, and the second holds the oldest one,
    # still filtered by name
    assert listed_ids(first) == charges[:10]
    assert parse_qs(urlsplit(older).query)["name"] == ["charge"]
    assert listed_ids(second) == charges[10:]
    assert 'name="name" value="charge"' in second


async def test_a_broken_cursor_is_a_400_with_a_way_back(
    client: httpx.AsyncClient, queue: Queue, make_worker: MakeWorker
) -> None:
    await dead_letter(make_worker, queue, [("a", {})])

    response = await client.get(f"{LIST}?older=not-a-cursor")

    assert response.status_code == 400
    assert "This page&#39;s link is out of date or broken" in response.text


async def test_a_text_filter_shows_the_page_without_a_total_until_counted(
    client: httpx.AsyncClient, queue: Queue, make_worker: MakeWorker
) -> None:
    # Given three dead letters, two of whose payloads hold "vip"
    await dead_letter(make_worker, queue, [("a", {"tier": "vip"}), ("b", {}), ("c", {"v": "vip"})])

    # When they are listed by payload text, then with count=1, then by an exact filter
    page = html.unescape((await client.get(f"{LIST}?payload_contains=vip")).text)
    counted = html.unescape((await client.get(f"{LIST}?payload_contains=vip&count=1")).text)
    exact = html.unescape((await client.get(f"{LIST}?name=a")).text)

    # Then the page has its rows but no total, and a link to count them; counting counts
    assert len(listed_ids(page)) == 2
    assert "the matches are not counted (that needs a scan)" in page
    assert f'<a class="count" href="{LIST}?payload_contains=vip&limit=25&count=1">' in page
    assert "Replay all matching…" in page
    assert "3 in the queue · 2 match the filter" in counted
    assert "3 in the queue · 1 match the filter" in exact and "Count them" not in exact
    assert "Replay 1 matching…" in exact
