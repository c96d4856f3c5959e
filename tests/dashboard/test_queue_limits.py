"""A queue's limits on its page: the global concurrency and the rate limit shown to everyone,
set and removed by an operator (POST /dashboard/queues/{name}/limits/concurrency and
/limits/rate), never by a viewer."""

from __future__ import annotations

import html

import httpx
import pytest
import redis.asyncio as aioredis
from fastapi import FastAPI

from lazarus import Job, Queue
from lazarus._keys import QueueKeys
from lazarus._limiter import RateLimit
from tests.conftest import wait_for_state

from .conftest import MakeWorker, csrf_of

PAGE = "/dashboard/queues/jobs"


async def post(client: httpx.AsyncClient, route: str, **form: str) -> httpx.Response:
    """Post the ``route`` form of the queue's page, as the page's CSRF value allows."""
    csrf = await csrf_of(client, PAGE)
    return await client.post(f"{PAGE}/limits/{route}", data={"csrf": csrf, **form})


async def done(client: httpx.AsyncClient, route: str, **form: str) -> str:
    """Post a form that succeeds; the text of the page it redirects to."""
    response = await post(client, route, **form)
    assert response.status_code == 303, response.text
    assert response.headers["location"].startswith(f"{PAGE}?")
    return html.unescape((await client.get(response.headers["location"])).text)


async def test_the_page_shows_the_limits_and_a_form_for_each(
    client: httpx.AsyncClient, queue: Queue
) -> None:
    await queue.add("n", None)

    bare = html.unescape((await client.get(PAGE)).text)
    await queue.set_global_concurrency(7)
    await queue.set_global_rate_limit(10, 2000)
    limited = html.unescape((await client.get(PAGE)).text)

    assert '<dd class="limit-concurrency">none</dd>' in bare
    assert '<dd class="limit-rate">none</dd>' in bare
    assert f'action="{PAGE}/limits/concurrency"' in bare
    assert f'action="{PAGE}/limits/rate"' in bare
    assert 'value="remove"' not in bare
    assert "at most 7 jobs active at once" in limited
    assert "at most 10 jobs started per 2000 ms" in limited
    assert "window ends" not in limited
    assert limited.count('value="remove"') == 2


async def test_an_operator_sets_and_removes_each_limit_and_each_change_is_audited(
    app: FastAPI, client: httpx.AsyncClient, queue: Queue, raw: aioredis.Redis
) -> None:
    await queue.add("n", None)

    capped = await done(client, "concurrency", limit="12")  # Enter: no action given
    assert "Set the global concurrency of jobs: at most 12 jobs active at once." in capped
    assert "flash-ok" in capped
    assert await queue.get_global_concurrency() == 12
    limited = await done(client, "rate", max="5", duration="1000", action="set")
    assert "Set the rate limit of jobs: at most 5 jobs started per 1000 ms." in limited
    assert await queue.get_global_rate_limit() == RateLimit(5, 1000)
    assert "at most 12 jobs active at once" in limited

    uncapped = await done(client, "concurrency", limit="", action="remove")
    assert "Removed the global concurrency of jobs." in uncapped
    unlimited = await done(client, "rate", action="remove")
    assert "Removed the rate limit of jobs and its window." in unlimited
    assert await queue.get_global_concurrency() is None
    assert await queue.get_global_rate_limit() is None
    assert not {"concurrency", "limiter:max"} & set(await raw.hkeys(queue.keys.meta))

    trail = await app.state.audit.read(limit=4)
    assert [(e.method, e.path, e.status) for e in trail] == [
        ("POST", f"{PAGE}/limits/rate", 303), ("POST", f"{PAGE}/limits/concurrency", 303),
    ] * 2  # fmt: skip
    assert '"limit": "12"' in trail[-1].detail and "csrf" not in trail[-1].detail


async def test_a_reached_window_shows_when_it_ends(
    client: httpx.AsyncClient, queue: Queue, make_worker: MakeWorker
) -> None:
    await queue.set_global_rate_limit(1, 60_000)
    added = await queue.add("n", None)

    async def ok(job: Job) -> None:
        return None

    worker = make_worker(ok)

    await wait_for_state(queue, added.id, "completed")
    await worker.close()

    page = html.unescape((await client.get(PAGE)).text)
    assert "at most 1 job started per 60000 ms; reached: the window ends in" in page


@pytest.mark.parametrize(
    ("route", "form", "says"),
    [
        ("concurrency", {}, "limit must be a whole number from 1 to 2147483647"),
        ("concurrency", {"limit": " "}, "limit must be a whole number"),
        ("concurrency", {"limit": "0"}, "limit must be a whole number"),
        ("concurrency", {"limit": "-3"}, "limit must be a whole number"),
        ("concurrency", {"limit": "2.5"}, "limit must be a whole number"),
        ("concurrency", {"limit": "²"}, "limit must be a whole number"),
        ("concurrency", {"limit": "2147483648"}, "limit must be a whole number"),
        ("concurrency", {"limit": "9" * 30}, "limit must be a whole number"),
        ("concurrency", {"limit": "5", "action": "drop"}, "action must be set or remove"),
        ("rate", {"max": "5"}, "duration must be a whole number of ms from 1 to 10000000000000"),
        ("rate", {"max": "x", "duration": "1000"}, "max must be a whole number from 1 to"),
        ("rate", {"max": "0", "duration": "0"},
         "max must be a whole number from 1 to 2147483647; duration must be a whole number"),
        ("rate", {"max": "5", "duration": "10000000000001"}, "duration must be a whole number"),
        ("rate", {"action": "remove!"}, "action must be set or remove"),
    ],
)  # fmt: skip
async def test_bad_input_re_renders_the_page_naming_the_field_and_writes_nothing(
    client: httpx.AsyncClient,
    queue: Queue,
    raw: aioredis.Redis,
    route: str,
    form: dict[str, str],
    says: str,
) -> None:
    await queue.add("n", None)
    await queue.set_global_concurrency(3)
    await queue.set_global_rate_limit(3, 500)
    meta = await raw.hgetall(queue.keys.meta)

    response = await post(client, route, **form)

    assert response.status_code == 400, response.text
    text = html.unescape(response.text)
    assert "flash-error" in text and f"Nothing was changed: {says}" in text
    assert "<h1>jobs</h1>" in text and "at most 3 jobs active at once" in text
    for field in ("limit", "max", "duration"):
        if form.get(field):
            typed = f'name="{field}" inputmode="numeric" pattern="[0-9]*" value="{form[field]}"'
            assert typed in text
    assert await raw.hgetall(queue.keys.meta) == meta


async def test_an_unknown_queue_or_a_form_without_csrf_writes_nothing(
    client: httpx.AsyncClient, queue: Queue, raw: aioredis.Redis, prefix: str
) -> None:
    await queue.add("n", None)
    meta = await raw.hgetall(queue.keys.meta)
    csrf = await csrf_of(client, PAGE)

    for route, form in (("concurrency", {"limit": "5"}), ("rate", {"max": "5", "duration": "9"})):
        unknown = await client.post(f"/dashboard/queues/nope/limits/{route}",
                                    data={"csrf": csrf, **form})  # fmt: skip
        forged = await client.post(f"{PAGE}/limits/{route}", data=form)
        assert unknown.status_code == 404 and "no queue called" in unknown.text
        assert forged.status_code == 403 and "CSRF token is missing or wrong" in forged.text

    assert await raw.hgetall(queue.keys.meta) == meta
    assert not await raw.exists(QueueKeys(prefix, "nope").meta)


async def test_a_viewer_sees_the_limits_but_has_no_form_and_cannot_post_one(
    viewer: httpx.AsyncClient, queue: Queue, raw: aioredis.Redis
) -> None:
    await queue.add("n", None)
    await queue.set_global_concurrency(4)
    meta = await raw.hgetall(queue.keys.meta)
    page = await viewer.get(PAGE)
    csrf = await csrf_of(viewer, PAGE)
    refused = [
        await viewer.post(f"{PAGE}/limits/concurrency", data={"csrf": csrf, "limit": "9"}),
        await viewer.post(f"{PAGE}/limits/rate", data={"csrf": csrf, "action": "remove"}),
    ]

    assert page.status_code == 200
    assert "at most 4 jobs active at once" in page.text
    assert "/limits/" not in page.text
    for response in refused:
        assert response.status_code == 403
        assert "needs the operator role" in response.text
    assert await raw.hgetall(queue.keys.meta) == meta
