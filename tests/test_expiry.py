"""A job's expiry (``expires`` / ``expires_at`` of add): a job a worker claims after it fails
with JobExpiredError, without running and without retries, where the job's failures go; a
replay of it is a new job with a new window."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
import redis.asyncio as aioredis

from lazarus import Job, JobExpiredError, Queue
from lazarus._connection import now_ms
from lazarus.sync import Queue as SyncQueue
from lazarus.tasks import Tasks
from tests.conftest import dead_letter_of, keys_of, wait_for_state, wait_until


async def expired(queue: Queue, job_id: str) -> None:
    """Wait until job ``job_id``'s expiry, as stored, has passed."""
    stored = await queue.get_job(job_id)
    assert stored is not None and stored.expires_at is not None

    async def passed() -> bool:
        return now_ms() > stored.expires_at  # type: ignore[operator]

    await wait_until(passed, message=f"the expiry of {job_id}")


async def test_expires_is_stored_as_a_window_from_the_add(queue: Queue) -> None:
    before = now_ms()
    job = await queue.add("n", None, expires=timedelta(minutes=5))
    by_ms = await queue.add("n", None, expires=1_500, delay=1_000)
    at = datetime.now(timezone.utc) + timedelta(hours=1)
    by_moment = await queue.add("n", None, expires_at=at)

    stored = [await queue.get_job(j.id) for j in (job, by_ms, by_moment)]
    assert [s.opts.expires for s in stored if s is not None] == [
        300_000,
        1_500,
        pytest.approx(3_600_000, abs=2_000),
    ]
    first = stored[0]
    assert first is not None and first.expires_at == first.timestamp + 300_000
    assert before <= first.timestamp <= now_ms()
    last = stored[2]
    assert last is not None and last.expires_at is not None
    # The window is taken from the clock as the job is checked, and counted from its add's
    # timestamp, read a moment later: the moment lands within the add's own milliseconds
    assert 0 <= last.expires_at - int(at.timestamp() * 1000) <= 1_000
    plain = await queue.get_job((await queue.add("n", None)).id)
    assert plain is not None and plain.opts.expires is None and plain.expires_at is None


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"expires": 0}, ValueError, "expires must be between 1"),
        ({"expires": -1}, ValueError, "expires must be between 1"),
        ({"expires": timedelta(seconds=-1)}, ValueError, "expires must not be negative"),
        ({"expires": 1.5}, TypeError, "expires must be an int"),
        ({"expires": 10**14}, ValueError, "expires must be between 1"),
        ({"expires_at": datetime(2030, 1, 1)}, ValueError, "expires_at must be timezone-aware"),
        ({"expires_at": "tomorrow"}, TypeError, "expires_at must be a datetime"),
        (
            {"expires_at": datetime.now(timezone.utc) - timedelta(seconds=1)},
            ValueError,
            "expires_at has passed",
        ),
        (
            {"expires": 1_000, "expires_at": datetime.now(timezone.utc) + timedelta(hours=1)},
            ValueError,
            "give expires or expires_at",
        ),
        ({"expires": 1_000, "delay": 1_000}, ValueError, "the job would expire before it is due"),
        (
            {"expires": 60_000, "run_at": datetime.now(timezone.utc) + timedelta(hours=1)},
            ValueError,
            "the job would expire before it is due",
        ),
        ({"expires": 1_000, "repeat": {"every": 60_000}}, ValueError, "expires does not apply"),
    ],
)
async def test_a_bad_expiry_is_refused_naming_it_and_nothing_is_written(
    queue: Queue, raw: aioredis.Redis, prefix: str, options: dict[str, Any], error: type,
    message: str,
) -> None:  # fmt: skip
    before = await keys_of(raw, prefix)
    with pytest.raises(error, match=message):
        await queue.add("n", None, **options)
    if "repeat" not in options:  # add's own
        with pytest.raises(error, match=message):
            await queue.add_bulk([{"name": "ok", "data": 1}, {"name": "n", **options}])
    assert await keys_of(raw, prefix) == before


async def test_a_job_claimed_after_its_expiry_is_dead_lettered_without_running(
    queue: Queue, dlq: Queue, make_worker: Any
) -> None:
    ran: list[str] = []

    async def process(job: Job) -> str:
        ran.append(job.id)
        return "done"

    late = await queue.add("flash-sale", {"sku": 7}, attempts=5, expires=20)
    await expired(queue, late.id)
    fresh = await queue.add("flash-sale", {"sku": 8}, expires=timedelta(minutes=10))
    make_worker(process, concurrency=1, dead_letter_queue=dlq.name)

    letter = await dead_letter_of(dlq, late.id)
    await wait_for_state(queue, fresh.id, "completed")
    assert ran == [fresh.id]
    assert letter.dead_letter is not None
    assert letter.dead_letter.reason == "expired"
    assert letter.dead_letter.error_type == "JobExpiredError"
    assert "before it started" in (letter.dead_letter.failed_reason or "")
    assert len(letter.dead_letter.attempts) == 1  # not retried, whatever its attempts
    assert letter.original_data == {"sku": 7}


async def test_without_a_dead_letter_queue_it_fails(queue: Queue, make_worker: Any) -> None:
    job = await queue.add("n", None, expires=20)
    await expired(queue, job.id)
    make_worker(lambda _: None, concurrency=1)

    await wait_for_state(queue, job.id, "failed")
    stored = await queue.get_job(job.id)
    assert stored is not None and stored.error_type == "JobExpiredError"
    assert stored.attempts_made == 1


async def test_a_retry_due_after_the_expiry_does_not_run(
    queue: Queue, dlq: Queue, make_worker: Any
) -> None:
    runs: list[int] = []

    async def process(job: Job) -> None:
        runs.append(job.attempts_made)
        raise RuntimeError("the upstream is down")

    make_worker(process, concurrency=1, dead_letter_queue=dlq.name)
    # The first run is at once; the retry is due 1.5 s later, past the expiry
    job = await queue.add(
        "n", None, attempts=3, expires=1_000, backoff={"type": "fixed", "delay": 1_500}
    )

    letter = await dead_letter_of(dlq, job.id)
    assert runs == [0]
    assert letter.dead_letter is not None and letter.dead_letter.reason == "expired"
    assert [a.error_type for a in letter.dead_letter.attempts] == [
        "RuntimeError",
        "JobExpiredError",
    ]


async def test_a_replay_of_an_expired_job_runs_in_a_new_window(
    queue: Queue, dlq: Queue, make_worker: Any
) -> None:
    ran: list[Any] = []

    async def process(job: Job) -> None:
        ran.append(job.data)

    job = await queue.add("n", {"k": 1}, expires=1_000)
    await expired(queue, job.id)
    make_worker(process, concurrency=1, dead_letter_queue=dlq.name)
    letter = await dead_letter_of(dlq, job.id)
    assert ran == []

    replayed = await dlq.replay_dead_letter(letter.id)

    await wait_for_state(queue, replayed, "completed")
    assert ran == [{"k": 1}]
    again = await queue.get_job(replayed)
    assert again is not None and again.opts.expires == 1_000
    assert again.expires_at == again.timestamp + 1_000


async def test_tasks_and_the_sync_queue_take_an_expiry(
    queue: Queue, redis_url: str, prefix: str
) -> None:
    tasks = Tasks(queue)

    @tasks.task(expires=timedelta(seconds=30))
    async def notify(user: int) -> None: ...

    job = await notify.enqueue(7)
    stored = await queue.get_job(job.id)
    assert stored is not None and stored.opts.expires == 30_000

    with SyncQueue(queue.name, connection=redis_url, prefix=prefix) as sync:
        added = sync.add("n", None, expires_at=datetime.now(timezone.utc) + timedelta(minutes=1))
    read = await queue.get_job(added.id)
    assert read is not None and read.opts.expires is not None
    # A minute from the test's clock, rounded up to the millisecond from the add's own clock,
    # read a little later: 60,001 when the two reads fall in one millisecond
    assert 55_000 <= read.opts.expires <= 60_001


def test_the_error_says_when_the_job_expired() -> None:
    error = JobExpiredError.claimed_late(1_700_000_000_000, 1_700_000_000_250)
    assert str(error) == (
        "the job expired at 2023-11-14T22:13:20.000+00:00 before it started; "
        "a worker claimed it 250 ms later"
    )


async def test_retry_job_of_an_expired_job_gives_it_a_new_window(
    queue: Queue, make_worker: Any
) -> None:
    ran: list[str] = []

    async def process(job: Job) -> None:
        ran.append(job.id)

    job = await queue.add("n", None, expires=1_000)
    await expired(queue, job.id)
    make_worker(process, concurrency=1)
    await wait_for_state(queue, job.id, "failed")
    assert ran == []

    await queue.retry_job(job.id)

    await wait_for_state(queue, job.id, "completed")
    assert ran == [job.id]
    stored = await queue.get_job(job.id)
    assert stored is not None and stored.retried_on is not None
    assert stored.expires_at == stored.retried_on + 1_000 > stored.timestamp + 1_000
