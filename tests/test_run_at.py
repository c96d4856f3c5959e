"""When a job is due: ``delay`` as a timedelta, ``run_at`` as a timezone-aware datetime, on
add, add_bulk, the typed tasks and the delay changes."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
import redis.asyncio as aioredis

from lazarus import Job, Queue
from lazarus.tasks import Tasks
from tests.conftest import keys_of, wait_for_state


def ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


async def due_of(raw: aioredis.Redis, queue: Queue, job_id: str) -> int:
    score = await raw.zscore(queue.keys.delayed, job_id)
    assert score is not None, f"job {job_id} is not delayed"
    return int(score)


async def test_a_job_added_with_run_at_is_due_then(queue: Queue, raw: aioredis.Redis) -> None:
    run_at = datetime.now(timezone.utc) + timedelta(hours=2)

    job = await queue.add("report", {"n": 1}, run_at=run_at)

    assert await queue.get_job_state(job.id) == "delayed"
    assert ms(run_at) <= await due_of(raw, queue, job.id) <= ms(run_at) + 1_000


async def test_run_at_in_another_zone_names_the_same_moment(
    queue: Queue, raw: aioredis.Redis
) -> None:
    tokyo = timezone(timedelta(hours=9))
    run_at = (datetime.now(timezone.utc) + timedelta(minutes=30)).astimezone(tokyo)

    job = await queue.add("report", None, run_at=run_at)

    assert ms(run_at) <= await due_of(raw, queue, job.id) <= ms(run_at) + 1_000


async def test_a_timedelta_delay_is_milliseconds(queue: Queue, raw: aioredis.Redis) -> None:
    before = ms(datetime.now(timezone.utc))

    job = await queue.add("report", None, delay=timedelta(minutes=5, microseconds=1))

    # Rounded up to the millisecond: never earlier than asked.
    due = await due_of(raw, queue, job.id)
    assert before + 300_001 <= due <= ms(datetime.now(timezone.utc)) + 300_001
    assert job.opts.delay == 300_001


async def test_a_job_runs_at_run_at_not_before(queue: Queue, make_worker: Any) -> None:
    run_at = datetime.now(timezone.utc) + timedelta(milliseconds=400)
    started: list[int] = []

    async def record(job: Job) -> None:
        started.append(ms(datetime.now(timezone.utc)))

    make_worker(record)
    job = await queue.add("report", None, run_at=run_at)

    await wait_for_state(queue, job.id, "completed")
    finished = await queue.get_job(job.id)
    assert finished is not None and finished.processed_on is not None
    assert finished.processed_on >= ms(run_at)
    assert started and started[0] >= ms(run_at)


async def test_a_run_at_that_has_passed_runs_now(queue: Queue) -> None:
    job = await queue.add("report", None, run_at=datetime.now(timezone.utc) - timedelta(days=1))

    assert await queue.get_job_state(job.id) == "waiting"
    assert job.opts.delay == 0


@pytest.mark.parametrize(
    ("options", "error", "words"),
    [
        ({"run_at": datetime(2030, 1, 1, 12, 0)}, ValueError, "run_at must be timezone-aware"),
        ({"run_at": 1_900_000_000_000}, TypeError, "run_at must be a datetime, not int"),
        ({"run_at": "2030-01-01T00:00:00Z"}, TypeError, "run_at must be a datetime, not str"),
        (
            {"run_at": datetime(2030, 1, 1, tzinfo=timezone.utc), "delay": 5_000},
            ValueError,
            "give delay or run_at, not both",
        ),
        ({"delay": timedelta(seconds=-1)}, ValueError, "delay must not be negative"),
        ({"delay": timedelta(days=365 * 400)}, ValueError, "delay must be between 0 and"),
        (
            {"run_at": datetime(9999, 1, 1, tzinfo=timezone.utc)},
            ValueError,
            "run_at must be at most",
        ),
        (
            {"run_at": datetime(2030, 1, 1, tzinfo=timezone.utc), "repeat": {"every": 1_000}},
            ValueError,
            "run_at does not apply to a repeatable job",
        ),
    ],
)
async def test_bad_due_times_name_the_field_and_write_nothing(
    queue: Queue, raw: aioredis.Redis, prefix: str, options: dict[str, Any], error: type,
    words: str,
) -> None:  # fmt: skip
    with pytest.raises(error, match=words):
        await queue.add("report", None, **options)

    assert await keys_of(raw, prefix) == set()


async def test_add_bulk_takes_run_at_per_job_and_checks_every_one_first(
    queue: Queue, raw: aioredis.Redis, prefix: str
) -> None:
    soon = datetime.now(timezone.utc) + timedelta(hours=1)
    with pytest.raises(ValueError, match=r"jobs\[1\]: run_at must be timezone-aware"):
        await queue.add_bulk([
            {"name": "a", "run_at": soon},
            {"name": "b", "run_at": datetime(2030, 1, 1)},
        ])  # fmt: skip
    assert await keys_of(raw, prefix) == set()

    first, second = await queue.add_bulk([
        {"name": "a", "run_at": soon},
        {"name": "b", "delay": timedelta(hours=3)},
    ])  # fmt: skip

    assert ms(soon) <= await due_of(raw, queue, first.id) <= ms(soon) + 1_000
    assert await due_of(raw, queue, second.id) >= ms(soon) + 2 * 3_600_000


async def test_a_task_takes_run_at_like_any_option(queue: Queue, raw: aioredis.Redis) -> None:
    tasks = Tasks(queue)

    @tasks.task()
    async def remind(who: str) -> None: ...

    run_at = datetime.now(timezone.utc) + timedelta(days=1)
    job = await remind.enqueue_with({"run_at": run_at}, "ada")

    assert ms(run_at) <= await due_of(raw, queue, job.id) <= ms(run_at) + 1_000


async def test_a_delay_change_takes_a_timedelta(queue: Queue, raw: aioredis.Redis) -> None:
    job = await queue.add("report", None, delay=timedelta(days=1))
    before = ms(datetime.now(timezone.utc))

    await queue.change_job_delay(job.id, timedelta(seconds=90))

    due = await due_of(raw, queue, job.id)
    assert before + 90_000 <= due <= ms(datetime.now(timezone.utc)) + 90_000

    with pytest.raises(ValueError, match="delay must not be negative"):
        await queue.change_job_delay(job.id, timedelta(seconds=-5))
    assert await due_of(raw, queue, job.id) == due
