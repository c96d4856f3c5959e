"""Workers that end on their own: ``burst=True`` once their queues have nothing ready to run,
``max_jobs=n`` once they have started n jobs. Every wait is bounded: a worker that never ends
fails its test instead of hanging it."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from typing import Any

import pytest
import redis.asyncio as aioredis

from lazarus import Job, Queue, Worker
from lazarus._connection import now_ms
from lazarus._schedule import occurrence_id
from lazarus.workers import list_workers

from .conftest import wait_until

MakeWorker = Callable[..., Worker]
ENDS_WITHIN = 20.0  # seconds a worker that should end on its own is given


async def run_to_end(worker: Worker) -> int | None:
    """``worker.run()``, failing the test if the worker does not end on its own."""
    try:
        return await asyncio.wait_for(worker.run(), ENDS_WITHIN)
    except asyncio.TimeoutError:
        pytest.fail(f"the worker did not end on its own within {ENDS_WITHIN} s")


async def counts(queue: Queue) -> dict[str, int]:
    return {state: n for state, n in (await queue.get_job_counts()).items() if n}


async def test_a_burst_worker_runs_every_waiting_job_then_closes_itself(
    queue: Queue, make_worker: MakeWorker
) -> None:
    # Given 20 waiting jobs
    await queue.add_bulk([{"name": "n", "data": i} for i in range(20)])
    seen: list[int] = []

    async def record(job: Job) -> int:
        seen.append(job.data)
        await asyncio.sleep(0.002)
        return int(job.data)

    # When a burst worker of 4 slots runs
    worker = make_worker(record, concurrency=4, burst=True, autorun=False)
    ran = await run_to_end(worker)

    # Then it ran each of them once, completed them all, and left as close() leaves
    assert ran == 20 == worker.jobs_started
    assert sorted(seen) == list(range(20))
    assert await counts(queue) == {"completed": 20}
    assert not worker.running
    assert await list_workers(queue.client, queue.keys) == []


async def test_a_burst_worker_on_an_empty_queue_ends_at_once(
    queue: Queue, make_worker: MakeWorker
) -> None:
    worker = make_worker(lambda job: None, burst=True, autorun=False, block_timeout=30)

    # block_timeout=30: a worker that blocked on the queue would outlast the bound
    assert await run_to_end(worker) == 0
    assert await list_workers(queue.client, queue.keys) == []


async def test_a_burst_worker_runs_due_delayed_jobs_and_leaves_later_ones(
    queue: Queue, make_worker: MakeWorker
) -> None:
    # Given a job due already and one due in a minute
    due = await queue.add("due", None, delay=20)
    later = await queue.add("later", None, delay=60_000)
    await wait_until(lambda: _past(due.timestamp + 20), message="the first job to be due")

    # When a burst worker runs
    worker = make_worker(lambda job: job.name, burst=True, autorun=False)
    ran = await run_to_end(worker)

    # Then it ran the due one and did not wait for the other
    assert ran == 1
    assert await queue.get_job_state(due.id) == "completed"
    assert await queue.get_job_state(later.id) == "delayed"


async def _past(ms: int) -> bool:
    return now_ms() > ms


async def test_a_burst_worker_runs_retries_without_backoff_and_leaves_retries_with_one(
    queue: Queue, make_worker: MakeWorker
) -> None:
    # Given a job that fails once, retried at once, and one that fails once, retried in a minute
    at_once = await queue.add("at_once", None, attempts=2)
    backed_off = await queue.add("backed_off", None, attempts=2,
                                 backoff={"type": "fixed", "delay": 60_000})  # fmt: skip

    def fail_first(job: Job) -> str:
        if job.attempts_made == 0:
            raise RuntimeError("first attempt fails")
        return "ok"

    # When a burst worker runs
    worker = make_worker(fail_first, burst=True, autorun=False)
    ran = await run_to_end(worker)

    # Then the first retry ran in the burst; the backed-off one waits in delayed
    assert ran == 3
    assert await queue.get_job_state(at_once.id) == "completed"
    assert await queue.get_job_state(backed_off.id) == "delayed"


async def test_a_burst_worker_waiting_for_delayed_jobs_runs_one_due_later(
    queue: Queue, make_worker: MakeWorker
) -> None:
    # Given a job due in 300 ms
    later = await queue.add("later", None, delay=300)

    # When a burst worker that waits for delayed jobs runs
    worker = make_worker(lambda job: job.name, burst=True, burst_waits_for_delayed=True,
                         autorun=False, block_timeout=30)  # fmt: skip

    # Then it waited for the job to fall due (block_timeout=30: on the due time, not a poll)
    # and ran it before it ended
    assert await run_to_end(worker) == 1
    assert await queue.get_job_state(later.id) == "completed"


async def test_a_burst_worker_not_waiting_for_delayed_jobs_leaves_one_due_later(
    queue: Queue, make_worker: MakeWorker
) -> None:
    # Given a job due in 3 s (well after the worker's start-up, however slow the machine)
    later = await queue.add("later", None, delay=3_000)

    # When a burst worker without burst_waits_for_delayed runs
    worker = make_worker(lambda job: job.name, burst=True, autorun=False)

    # Then it ends without it
    assert await run_to_end(worker) == 0
    assert await queue.get_job_state(later.id) == "delayed"


async def test_a_burst_worker_waiting_for_delayed_jobs_runs_retries_to_the_last_attempt(
    queue: Queue, make_worker: MakeWorker, dlq: Queue
) -> None:
    # Given a job that always fails, with three attempts 200 ms apart
    job = await queue.add("flaky", None, attempts=3, backoff={"type": "fixed", "delay": 200})

    def fail(job: Job) -> None:
        raise RuntimeError(f"attempt {job.attempts_made + 1} fails")

    # When a burst worker that waits for delayed jobs runs
    worker = make_worker(fail, burst=True, burst_waits_for_delayed=True, autorun=False,
                         dead_letter_queue=dlq.name)  # fmt: skip

    # Then it ran every attempt, and the job was dead-lettered before the worker ended
    assert await run_to_end(worker) == 3
    assert await queue.get_job(job.id) is None
    assert await counts(queue) == {}
    (dead,) = (await dlq.search_dead_letters()).jobs
    assert dead.dead_letter is not None
    assert (dead.dead_letter.original_job_id, dead.dead_letter.attempts_made) == (job.id, 3)


@pytest.mark.parametrize("job_ids", ["repeat", "uuid7"])
async def test_a_burst_worker_waiting_for_delayed_jobs_does_not_wait_for_a_schedule(
    queue: Queue, make_worker: MakeWorker, job_ids: str
) -> None:
    # Given a schedule every minute (its next occurrence delayed) and a job due in 300 ms
    await queue.add("tick", None, repeat={"every": 60_000, "job_ids": job_ids})
    later = await queue.add("later", None, delay=300)

    # When a burst worker that waits for delayed jobs runs
    worker = make_worker(lambda job: job.name, burst=True, burst_waits_for_delayed=True,
                         autorun=False)  # fmt: skip
    ran = await run_to_end(worker)

    # Then it ran the delayed job and ended without waiting for the schedule's occurrence
    # (which may have fallen due meanwhile, on the minute, and run: its next is pending)
    assert ran >= 1
    assert await queue.get_job_state(later.id) == "completed"
    (schedule,) = await queue.get_repeatable_jobs()
    pending = occurrence_id(schedule.key, schedule.next, job_ids)
    assert await queue.get_job_state(pending) == "delayed"


async def test_a_burst_worker_on_a_paused_queue_ends_and_leaves_its_jobs(
    queue: Queue, make_worker: MakeWorker
) -> None:
    await queue.add_bulk([{"name": "n", "data": i} for i in range(3)])
    await queue.pause()

    worker = make_worker(lambda job: None, burst=True, autorun=False, block_timeout=30)

    assert await run_to_end(worker) == 0
    assert await counts(queue) == {"paused": 3}


async def test_a_burst_worker_waits_out_the_rate_limit_of_waiting_jobs(
    queue: Queue, make_worker: MakeWorker
) -> None:
    # Given five jobs and a limit of two per 200 ms: the worker meets it with jobs waiting
    await queue.add_bulk([{"name": "n", "data": i} for i in range(5)])

    # When a burst worker runs
    worker = make_worker(lambda job: None, burst=True, autorun=False, concurrency=5,
                         limiter={"max": 2, "duration": 200})  # fmt: skip

    # Then it does not take the limit for an empty queue: it runs all five
    assert await run_to_end(worker) == 5
    assert await counts(queue) == {"completed": 5}


async def test_a_burst_worker_waits_for_room_another_worker_holds_under_a_global_concurrency(
    queue: Queue, make_worker: MakeWorker
) -> None:
    # Given a queue of global concurrency 1, whose room a worker holds with a job it runs
    await queue.set_global_concurrency(1)
    release = asyncio.Event()

    async def gated(job: Job) -> None:
        await release.wait()

    holder = make_worker(gated, max_jobs=1)
    held = await queue.add("held", None)
    await wait_until(lambda: _is(queue, held.id, "active"), message="the held job to run")
    await queue.add_bulk([{"name": "n", "data": i} for i in range(3)])

    # When a burst worker starts, finds the room taken and waits for it
    worker = make_worker(lambda job: None, burst=True, autorun=False, concurrency=3)
    burst = asyncio.create_task(run_to_end(worker))
    await wait_until(_blocked(worker, burst), message="the burst worker to wait for room")
    release.set()

    # Then it runs the three jobs once the holder's job is done
    assert await burst == 3
    assert await counts(queue) == {"completed": 4}
    assert not holder.running


async def _is(queue: Queue, job_id: str, state: str) -> bool:
    return await queue.get_job_state(job_id) == state


def _blocked(worker: Worker, run: asyncio.Task[Any]) -> Callable[[], Any]:
    async def check() -> bool:
        if run.done():
            pytest.fail(f"the burst worker ended with {run.result()} jobs instead of waiting")
        return worker._blocking

    return check


async def test_a_burst_worker_of_several_queues_drains_them_all(
    redis_url: str, prefix: str, make_worker: MakeWorker
) -> None:
    queues = [Queue(name, connection=redis_url, prefix=prefix) for name in ("{b}-hi", "{b}-lo")]
    try:
        for queue in queues:
            await queue.add_bulk([{"name": "n", "data": i} for i in range(4)])
        worker = make_worker(lambda job: job.queue_name, [q.name for q in queues],
                             burst=True, autorun=False, concurrency=2)  # fmt: skip

        assert await run_to_end(worker) == 8
        for queue in queues:
            assert await counts(queue) == {"completed": 4}
    finally:
        for queue in queues:
            await queue.close()


async def test_max_jobs_ends_the_worker_and_leaves_jobs_claimed_ahead_waiting(
    queue: Queue, make_worker: MakeWorker, raw: aioredis.Redis
) -> None:
    # Given 30 short jobs: slots of 5 ms jobs claim their next job ahead
    jobs = await queue.add_bulk([{"name": "n", "data": i} for i in range(30)])

    async def short(job: Job) -> None:
        await asyncio.sleep(0.005)

    # When a worker of two slots may start seven jobs
    worker = make_worker(short, concurrency=2, max_jobs=7, autorun=False)
    ran = await run_to_end(worker)

    # Then it started seven, completed them, and every other job is back in the wait list,
    # none lost, none running, none started
    assert ran == 7
    assert await counts(queue) == {"completed": 7, "waiting": 23}
    assert await raw.llen(queue.keys.active) == 0
    waiting = set(await raw.lrange(queue.keys.wait, 0, -1))
    completed = set(await raw.zrange(queue.keys.completed, 0, -1))
    assert waiting | completed == {job.id for job in jobs}
    assert await list_workers(queue.client, queue.keys) == []


async def test_max_jobs_hands_back_a_job_that_an_outcome_claimed_as_the_last_one_started(
    queue: Queue, make_worker: MakeWorker
) -> None:
    # Given five jobs, the first two of which end together: the outcome calls of both slots
    # go out at once, each claiming its slot's next job before either is started
    await queue.add_bulk([{"name": "n", "data": i} for i in range(5)])
    together, started = asyncio.Event(), [0]

    async def pair_then_quick(job: Job) -> None:
        if job.data < 2:
            started[0] += 1
            if started[0] == 2:
                together.set()
            await together.wait()

    # When a worker of two slots may start three jobs
    worker = make_worker(pair_then_quick, concurrency=2, max_jobs=3, autorun=False)
    ran = await run_to_end(worker)

    # Then the fourth job, claimed by the second outcome, went back unrun
    assert ran == 3
    assert await counts(queue) == {"completed": 3, "waiting": 2}


async def test_a_burst_worker_with_max_jobs_stops_at_the_first_that_comes(
    queue: Queue, make_worker: MakeWorker
) -> None:
    await queue.add_bulk([{"name": "n", "data": i} for i in range(2)])

    worker = make_worker(lambda job: None, burst=True, max_jobs=5, autorun=False)

    assert await run_to_end(worker) == 2


async def test_a_burst_worker_started_by_autorun_is_awaited_through_run(
    queue: Queue, make_worker: MakeWorker
) -> None:
    await queue.add_bulk([{"name": "n", "data": i} for i in range(3)])

    worker = make_worker(lambda job: None, burst=True)  # started at once, in this loop

    assert await run_to_end(worker) == 3
    await worker.close()  # closing a worker that closed itself does nothing more
    assert await counts(queue) == {"completed": 3}


async def test_a_burst_worker_with_processes_ends_after_its_jobs(
    queue: Queue, make_worker: MakeWorker
) -> None:
    from .procs import echo

    await queue.add_bulk([{"name": "n", "data": i} for i in range(4)])

    worker = make_worker(echo, burst=True, autorun=False, processes=1, concurrency=2)

    assert await run_to_end(worker) == 4
    assert await counts(queue) == {"completed": 4}


async def test_a_worker_without_burst_or_max_jobs_counts_nothing(
    make_worker: MakeWorker,
) -> None:
    assert make_worker(lambda job: None, autorun=False).jobs_started is None


@pytest.mark.parametrize(
    ("options", "error", "text"),
    [
        ({"burst": "yes"}, TypeError, "burst must be a bool"),
        ({"burst": 1}, TypeError, "burst must be a bool"),
        ({"max_jobs": 0}, ValueError, "max_jobs must be an int >= 1"),
        ({"max_jobs": True}, ValueError, "max_jobs must be an int >= 1"),
        ({"max_jobs": 2.5}, ValueError, "max_jobs must be an int >= 1"),
        ({"burst_waits_for_delayed": True}, ValueError, "burst_waits_for_delayed applies to"),
        (
            {"burst_waits_for_delayed": True, "max_jobs": 3},
            ValueError,
            "burst_waits_for_delayed applies to",
        ),
        (
            {"burst": True, "burst_waits_for_delayed": 1},
            TypeError,
            "burst_waits_for_delayed must be a bool",
        ),
    ],
)
async def test_burst_and_max_jobs_are_checked(
    options: dict[str, Any], error: type, text: str
) -> None:
    # In a running event loop, with autorun: refused before the worker connects or starts
    with pytest.raises(error, match=text):
        Worker("jobs", lambda job: None, connection="redis://127.0.0.1:1/0", **options)


@pytest.mark.parametrize(("flags", "delayed"), [((), 0), (("--wait-delayed",), 1)])
async def test_lazarus_worker_burst_exits_0_once_the_queue_is_drained(
    queue: Queue, redis_url: str, prefix: str, flags: tuple[str, ...], delayed: int
) -> None:
    # Given three waiting jobs (and, for --wait-delayed, one due in 2 s: still delayed when
    # the process has started)
    await queue.add_bulk([{"name": "n", "data": i} for i in range(3)])
    for _ in range(delayed):
        await queue.add("later", None, delay=2_000)

    # When `lazarus worker --burst` runs in a process of its own
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "lazarus.cli", "worker", "tests.procs:echo", "--queue", "jobs",
        "--prefix", prefix, "--burst", *flags, "--concurrency", "2",
        env={**os.environ, "LAZARUS_REDIS_URL": redis_url},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(), 60)
    except asyncio.TimeoutError:
        process.kill()
        await process.wait()
        pytest.fail("lazarus worker --burst did not exit once the queue was drained")

    # Then it exits 0, says how many jobs it ran, and every job completed
    assert process.returncode == 0, stderr.decode()
    assert f"burst over: {3 + delayed} jobs started" in stdout.decode()
    assert await counts(queue) == {"completed": 3 + delayed}


def test_lazarus_worker_refuses_a_max_jobs_below_1() -> None:
    from click.testing import CliRunner

    from lazarus.cli.main import main

    result = CliRunner().invoke(
        main, ["worker", "tests.procs:echo", "--queue", "q", "--max-jobs", "0"]
    )

    assert result.exit_code == 2
    assert "--max-jobs" in result.output


def test_lazarus_worker_refuses_wait_delayed_without_burst() -> None:
    from click.testing import CliRunner

    from lazarus.cli.main import main

    result = CliRunner().invoke(
        main, ["worker", "tests.procs:echo", "--queue", "q", "--wait-delayed"]
    )

    assert result.exit_code == 2
    assert "--wait-delayed" in result.output
