"""A queue's schedules (repeatable jobs) in the dashboard: listed from the queue's page, and
removed one at a time by an operator, never by a viewer."""

from __future__ import annotations

import html

import httpx

from lazarus import Queue

from .conftest import csrf_of

SCHEDULES = "/dashboard/queues/jobs/schedules"


async def test_the_queue_page_links_its_schedules_which_list_each_one(
    client: httpx.AsyncClient, queue: Queue
) -> None:
    await queue.add(
        "report", {"kind": "daily"}, repeat={"pattern": "0 6 * * *", "tz": "Europe/Paris"}
    )
    await queue.add("ping", None, repeat={"every": 60_000, "limit": 5})

    assert (
        'href="/dashboard/queues/jobs/schedules">2 schedules'
        in (await client.get("/dashboard/queues/jobs")).text
    )
    page = await client.get(SCHEDULES)

    assert page.status_code == 200
    text = html.unescape(page.text)
    assert "0 6 * * *" in text and "Europe/Paris" in text
    assert "every 60000 ms" in text and "5 runs" in text
    for schedule in await queue.get_repeatable_jobs():
        assert schedule.key in text


async def test_an_operator_removes_one_schedule_and_keeps_the_other(
    client: httpx.AsyncClient, queue: Queue
) -> None:
    await queue.add("report", None, repeat={"every": 60_000})
    await queue.add("ping", None, repeat={"every": 30_000})
    doomed = next(s for s in await queue.get_repeatable_jobs() if s.name == "ping")
    csrf = await csrf_of(client, SCHEDULES)

    response = await client.post(f"{SCHEDULES}/remove", data={"csrf": csrf, "key": doomed.key})

    assert response.status_code == 303
    assert [s.name for s in await queue.get_repeatable_jobs()] == ["report"]
    shown = await client.get(response.headers["location"])
    assert f"Removed the schedule {doomed.key}." in html.unescape(shown.text)
    again = await client.post(f"{SCHEDULES}/remove", data={"csrf": csrf, "key": doomed.key})
    assert "no such schedule" in html.unescape((await client.get(again.headers["location"])).text)


async def test_a_viewer_sees_the_schedules_but_cannot_remove_one(
    viewer: httpx.AsyncClient, queue: Queue
) -> None:
    await queue.add("report", None, repeat={"every": 60_000})
    [schedule] = await queue.get_repeatable_jobs()
    assert (await viewer.get(SCHEDULES)).status_code == 200
    csrf = await csrf_of(viewer, SCHEDULES)
    response = await viewer.post(f"{SCHEDULES}/remove", data={"csrf": csrf, "key": schedule.key})
    assert response.status_code == 403
    assert len(await queue.get_repeatable_jobs()) == 1
