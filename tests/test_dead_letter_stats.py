"""Dead letter statistics, per-minute rate, running counters and the queue registry."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from lazarus import (
    DeadLetterError,
    DeadLetterFilter,
    Job,
    Queue,
    UnrecoverableError,
    Worker,
    list_queues,
)

MakeWorker = Callable[..., Worker]


async def dead_letter_all(
    queue: Queue, make_worker: MakeWorker, specs: list[tuple[str, str]]
) -> None:
    """Add one job per (name, error) and let a worker dead-letter each of them."""
    await queue.add_bulk([{"name": name, "data": {"error": error}} for name, error in specs])

    async def fail(job: Job) -> None:
        if job.data["error"] == "discard":
            raise DeadLetterError("not worth retrying")
        if job.data["error"] == "timeout":
            raise TimeoutError("upstream timed out")
        raise UnrecoverableError("bad input")

    worker = make_worker(fail, concurrency=5, dead_letter_queue="jobs-dlq")
    done, seen = asyncio.Event(), [0]

    def count(*_: object) -> None:
        seen[0] += 1
        if seen[0] == len(specs):
            done.set()

    worker.on("deadLettered", count)
    await asyncio.wait_for(done.wait(), 20)
    await worker.close()  # nothing processes what the test replays


async def test_stats_group_dead_letters_by_name_error_source_and_reason(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    await dead_letter_all(
        queue, make_worker,
        [("email", "timeout"), ("email", "timeout"), ("sms", "bad"), ("sms", "discard")],
    )  # fmt: skip

    stats = await dlq.get_dead_letter_stats()
    timeouts = await dlq.get_dead_letter_stats(DeadLetterFilter(error_type="TimeoutError"))

    assert stats.total == 4
    assert stats.by_name == {"email": 2, "sms": 2}
    assert stats.by_error_type == {"TimeoutError": 2, "UnrecoverableError": 1, "DeadLetterError": 1}
    assert stats.by_source_queue == {"jobs": 4}
    assert stats.by_reason == {"attempts_exhausted": 2, "unrecoverable": 1, "discarded": 1}
    assert stats.oldest is not None and stats.newest is not None
    assert stats.oldest <= stats.newest
    # The first to arrive; concurrent workers stamp times a little out of arrival order.
    oldest_arrival = await dlq.get_oldest_dead_letter_at()
    assert oldest_arrival is not None
    assert stats.oldest <= oldest_arrival <= stats.newest
    assert timeouts.total == 2
    assert timeouts.by_name == {"email": 2}


async def test_rate_counts_dead_letters_in_the_current_minute(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    await dead_letter_all(queue, make_worker, [("a", "bad"), ("b", "bad"), ("c", "bad")])
    newest = (await dlq.get_dead_letter_stats()).newest
    assert newest is not None

    rate = await dlq.get_dead_letter_rate(60, now=newest)

    assert len(rate) == 60
    assert rate[-1] == (newest // 60_000 * 60_000, 3)
    assert sum(count for _, count in rate) == 3


@pytest.mark.parametrize("now", ["x", 1.5, True, -1, 10**30])
async def test_a_now_that_is_no_time_in_ms_is_refused_naming_it(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, now: object
) -> None:
    # Given a dead letter
    await dead_letter_all(queue, make_worker, [("a", "bad")])

    # When the rate, the health or a prune is asked for at that time
    for call in (
        lambda: dlq.get_dead_letter_rate(5, now=now),  # type: ignore[arg-type]
        lambda: dlq.get_dead_letter_health(now=now),  # type: ignore[arg-type]
        lambda: dlq.prune_dead_letters(now=now),  # type: ignore[arg-type]
    ):
        # Then each names now
        with pytest.raises((TypeError, ValueError), match=r"^now must be"):
            await call()

    # And the prune removed nothing
    assert await dlq.get_dead_letter_count() == 1


async def test_counters_track_dead_lettered_replayed_and_purged(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    await dead_letter_all(queue, make_worker, [("a", "bad"), ("b", "timeout"), ("c", "timeout")])

    await dlq.replay_all_dead_letters(DeadLetterFilter(name="a"))
    await dlq.purge_dead_letters()
    counters = await dlq.get_dead_letter_counters()

    assert counters.dead_lettered == {
        ("jobs", "unrecoverable"): 1,
        ("jobs", "attempts_exhausted"): 2,
    }
    assert counters.replayed == 1
    assert counters.purged == 2


async def test_empty_dead_letter_queue_has_empty_stats(dlq: Queue) -> None:
    stats = await dlq.get_dead_letter_stats()
    assert stats.total == 0
    assert stats.oldest is None
    assert await dlq.get_oldest_dead_letter_at() is None
    assert (await dlq.get_dead_letter_counters()).replayed == 0


async def test_list_queues_names_every_queue_written_to(redis_url: str, prefix: str) -> None:
    for name in ("zeta", "alpha"):
        queue = Queue(name, connection=redis_url, prefix=prefix)
        await queue.add("n", None)
        await queue.close()

    assert await list_queues(redis_url, prefix=prefix) == ["alpha", "zeta"]
