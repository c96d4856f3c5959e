"""``lazarus queue concurrency``: show, set and remove a queue's global concurrency."""

from __future__ import annotations

import redis.asyncio as aioredis

from lazarus import Queue
from lazarus._keys import QueueKeys

from .conftest import Invoke, parsed


async def test_set_show_and_remove_the_cap(queue: Queue, invoke: Invoke) -> None:
    await queue.add("n", None)  # the queue is known

    shown = await invoke("queue", "concurrency", "jobs")
    assert shown.exit_code == 0, shown.output
    assert "'jobs': no global concurrency" in shown.stdout

    set_ = await invoke("queue", "concurrency", "jobs", "20")
    assert "'jobs': at most 20 active jobs" in set_.stdout
    assert await queue.get_global_concurrency() == 20
    assert parsed(await invoke("queue", "concurrency", "jobs", "--json")) == {
        "queue": "jobs",
        "concurrency": 20,
    }

    removed = await invoke("queue", "concurrency", "jobs", "--remove")
    assert "no global concurrency" in removed.stdout
    assert await queue.get_global_concurrency() is None


async def test_a_bad_limit_or_an_unknown_queue_writes_nothing(
    queue: Queue, invoke: Invoke, raw: aioredis.Redis, prefix: str
) -> None:
    await queue.add("n", None)
    await queue.set_global_concurrency(3)

    for args, code in ((("jobs", "0"), 2), (("jobs", "x"), 2), (("jobs", "5", "--remove"), 2),
                       (("nope", "5"), 1)):  # fmt: skip
        result = await invoke("queue", "concurrency", *args)
        assert result.exit_code == code, result.output

    assert await queue.get_global_concurrency() == 3
    assert not await raw.exists(QueueKeys(prefix, "nope").meta)
