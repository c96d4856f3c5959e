"""Priorities over OJS (L4-PRI): ``options.priority`` is an integer from -100 to 100 or one of
the named levels ``HIGH``, ``NORMAL``, ``LOW`` (3, 2, 1); a higher priority is fetched first,
first in first out within one priority."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from lazarus import Queue

from .test_input import stored


async def push(client: httpx.AsyncClient, priority: Any = None, **options: Any) -> str:
    """Push a job into 'mail' (with ``priority``, unless ``None``); its id."""
    if priority is not None:
        options["priority"] = priority
    body = {"type": "mail.send", "args": [], "options": {"queue": "mail", **options}}
    response = await client.post("/ojs/v1/jobs", json=body)
    assert response.status_code == 201, response.text
    job_id: str = response.json()["job"]["id"]
    return job_id


async def fetch_all(client: httpx.AsyncClient, count: int) -> list[str]:
    """The ids a worker's FETCH of ``count`` jobs from 'mail' claims, in order."""
    response = await client.post("/ojs/v1/workers/fetch", json={"queues": ["mail"], "count": count})
    assert response.status_code == 200, response.text
    return [job["id"] for job in response.json()["jobs"]]


async def test_a_fetch_hands_out_high_before_normal_before_low(client: httpx.AsyncClient) -> None:
    # Given jobs pushed lowest priority first
    low = await push(client, "LOW")
    normal = await push(client, "NORMAL")
    high = await push(client, "HIGH")

    # When a worker fetches them one at a time
    fetched = [one for _ in range(3) for one in await fetch_all(client, 1)]

    # Then the highest priority comes first
    assert fetched == [high, normal, low]


async def test_named_levels_are_the_numbers_three_two_and_one(client: httpx.AsyncClient) -> None:
    # Given a job at each named level and numbers around them
    four, high, three = await push(client, 4), await push(client, "HIGH"), await push(client, 3)
    normal, two = await push(client, "normal"), await push(client, 2)
    low, one, zero = await push(client, "Low"), await push(client, 1), await push(client, 0)

    # When a worker fetches them all
    fetched = await fetch_all(client, 8)

    # Then HIGH ranks with 3, NORMAL with 2, LOW with 1: first in first out within each
    assert fetched == [four, high, three, normal, two, low, one, zero]
    # and a job shows its priority as the number
    views = [(await client.get(f"/ojs/v1/jobs/{i}")).json()["job"] for i in (high, normal, low)]
    assert [view["priority"] for view in views] == [3, 2, 1]


async def test_higher_numbers_come_first_across_the_whole_range(
    client: httpx.AsyncClient,
) -> None:
    # Given jobs at the ends of the range, between them and at the default
    bottom, default = await push(client, -100), await push(client)
    negative, top, first_ten, second_ten = (
        await push(client, -1), await push(client, 100), await push(client, 10),
        await push(client, 10),
    )  # fmt: skip

    # When a worker fetches them all
    fetched = await fetch_all(client, 6)

    # Then they come highest first, equal ones in the order they were pushed
    assert fetched == [top, first_ten, second_ten, default, negative, bottom]


@pytest.mark.parametrize("priority", [101, -101, "URGENT", "", 2.5, True, None, [3], {"n": 3}])
async def test_a_bad_priority_is_refused_naming_it_and_writes_nothing(
    client: httpx.AsyncClient, raw: Any, prefix: str, mail: Queue, priority: Any
) -> None:
    # Given a queue holding one job
    await push(client)
    before = await stored(raw, prefix)

    # When a job is pushed with a priority that is not one
    body = {"type": "mail.send", "args": [], "options": {"queue": "mail", "priority": priority}}
    response = await client.post("/ojs/v1/jobs", json=body)

    # Then it is refused naming options.priority, and nothing is written
    assert response.status_code == 400, response.text
    assert response.json()["error"]["details"]["field"] == "options.priority"
    assert await stored(raw, prefix) == before
    assert (await mail.get_job_counts())["prioritized"] == 1
