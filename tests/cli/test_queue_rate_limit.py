"""``lazarus queue rate-limit``: show, set and remove a queue's rate limit, and the current
window's ttl once the limit is reached."""

from __future__ import annotations

import redis.asyncio as aioredis

from lazarus import Job, Queue
from lazarus._keys import QueueKeys
from lazarus._limiter import RateLimit
from lazarus.job_options import MAX_DURATION_MS
from tests.conftest import wait_for_state

from .conftest import Invoke, MakeWorker, parsed


async def test_set_show_and_remove_the_rate_limit(queue: Queue, invoke: Invoke) -> None:
    await queue.add("n", None)  # the queue is known

    shown = await invoke("queue", "rate-limit", "jobs")
    assert shown.exit_code == 0, shown.output
    assert "'jobs': no rate limit" in shown.stdout
    assert parsed(await invoke("queue", "rate-limit", "jobs", "--json")) == {
        "queue": "jobs",
        "rateLimit": None,
    }

    set_ = await invoke("queue", "rate-limit", "jobs", "50", "1000")
    assert set_.exit_code == 0, set_.output
    assert "'jobs': at most 50 jobs started per 1000 ms" in set_.stdout
    assert "window ends" not in set_.stdout
    assert await queue.get_global_rate_limit() == RateLimit(50, 1000)
    assert parsed(await invoke("queue", "rate-limit", "jobs", "--json")) == {
        "queue": "jobs",
        "rateLimit": {"max": 50, "duration": 1000, "ttl": 0},
    }

    removed = await invoke("queue", "rate-limit", "jobs", "--remove")
    assert removed.exit_code == 0, removed.output
    assert "'jobs': no rate limit" in removed.stdout
    assert await queue.get_global_rate_limit() is None


async def test_a_reached_limit_shows_when_its_window_ends_and_remove_ends_the_window(
    queue: Queue, invoke: Invoke, make_worker: MakeWorker, raw: aioredis.Redis
) -> None:
    # Given a limit of one job a minute, and a worker that started one
    await queue.set_global_rate_limit(1, 60_000)
    done = await queue.add("n", None)

    async def ok(job: Job) -> None:
        return None

    worker = make_worker(ok)

    await wait_for_state(queue, done.id, "completed")
    await worker.close()

    # Then the limit is reached until the window ends
    limit = parsed(await invoke("queue", "rate-limit", "jobs", "--json"))["rateLimit"]
    assert (limit["max"], limit["duration"]) == (1, 60_000)
    assert 0 < limit["ttl"] <= 60_000
    text = (await invoke("queue", "rate-limit", "jobs")).stdout
    assert "'jobs': at most 1 job started per 60000 ms; reached: the window ends in" in text

    # And removing the limit removes its window too
    assert (await invoke("queue", "rate-limit", "jobs", "--remove")).exit_code == 0
    assert not await raw.exists(queue.keys.limiter)


async def test_bad_input_or_an_unknown_queue_writes_nothing(
    queue: Queue, invoke: Invoke, raw: aioredis.Redis, prefix: str
) -> None:
    await queue.add("n", None)
    await queue.set_global_rate_limit(3, 500)
    meta = await raw.hgetall(queue.keys.meta)

    for args, code, says in [
        (("jobs", "0", "1000"), 2, "'[MAX]'"),
        (("jobs", "x", "1000"), 2, "'[MAX]'"),
        (("jobs", str(2**31), "1000"), 2, "'[MAX]'"),
        (("jobs", "5", "0"), 2, "'[DURATION_MS]'"),
        (("jobs", "5", "1.5"), 2, "'[DURATION_MS]'"),
        (("jobs", "5", str(MAX_DURATION_MS + 1)), 2, "'[DURATION_MS]'"),
        (("jobs", "5"), 2, "give MAX and DURATION_MS together"),
        (("jobs", "5", "1000", "--remove"), 2, "or --remove, not both"),
        (("nope", "5", "1000"), 1, "no queue 'nope'"),
        (("nope", "--remove"), 1, "no queue 'nope'"),
    ]:
        result = await invoke("queue", "rate-limit", *args)
        assert result.exit_code == code, (args, result.output)
        assert says in result.output, (args, result.output)

    assert await raw.hgetall(queue.keys.meta) == meta
    assert await queue.get_global_rate_limit() == RateLimit(3, 500)
    assert not await raw.exists(QueueKeys(prefix, "nope").meta)
