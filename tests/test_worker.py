"""Worker: processing, ordering, retries, stalls, lost locks, crashes and shutdown."""

from __future__ import annotations

import asyncio
import collections
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import redis.asyncio as aioredis

from lazarus import Backoff, Job, Queue, UnrecoverableError, Worker, _scripts
from lazarus._connection import now_ms
from lazarus.embedded import EmbeddedRedis

from .conftest import wait_until

MakeWorker = Callable[..., Worker]


def on_count(worker: Worker, event: str, target: int) -> asyncio.Event:
    """An event set once the worker has emitted ``event`` ``target`` times."""
    done, seen = asyncio.Event(), [0]

    def count(*_: Any) -> None:
        seen[0] += 1
        if seen[0] >= target:
            done.set()

    worker.on(event, count)  # type: ignore[arg-type]
    return done


async def test_worker_completes_a_job_and_stores_its_return_value(
    queue: Queue, make_worker: MakeWorker
) -> None:
    job = await queue.add("double", {"n": 21})
    worker = make_worker(lambda j: {"result": j.data["n"] * 2}, autorun=False)
    done = on_count(worker, "completed", 1)

    running = asyncio.create_task(worker.run())
    await asyncio.wait_for(done.wait(), 10)

    stored = await queue.get_job(job.id)
    assert stored is not None
    assert stored.return_value == {"result": 42}
    assert stored.attempts_made == 1
    assert stored.processed_on is not None and stored.finished_on is not None
    assert await queue.get_job_state(job.id) == "completed"
    assert not running.done()


async def test_a_callback_taken_off_is_called_no_more_and_bad_ones_are_refused(
    queue: Queue, make_worker: MakeWorker
) -> None:
    # Given a worker with two callbacks on "completed", one of them taken off again
    worker = make_worker(lambda j: j.data, autorun=False)
    kept: list[str] = []
    dropped: list[str] = []

    def drop(job: Job, _result: Any) -> None:
        dropped.append(job.id)

    worker.on("completed", lambda job, _result: kept.append(job.id))
    worker.on("completed", drop)
    worker.off("completed", drop)
    worker.off("failed", print)  # never added: ignored

    # When two jobs complete
    ids = [(await queue.add("n", i)).id for i in range(2)]
    done = on_count(worker, "completed", 2)
    running = asyncio.create_task(worker.run())
    await asyncio.wait_for(done.wait(), 10)

    # Then only the callback left was called, and a callback that is none, or an event that
    # is none, is refused up front
    assert sorted(kept) == sorted(ids) and dropped == []
    with pytest.raises(TypeError, match="callback must be callable"):
        worker.on("completed", "print")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown worker event 'done'"):
        worker.off("done", print)  # type: ignore[arg-type]
    await worker.close()
    await running


async def test_a_workers_retention_applies_to_jobs_that_keep_everything(
    queue: Queue, make_worker: MakeWorker
) -> None:
    # Given three jobs that keep everything and one that keeps the newest five of its kind,
    # and a worker removing what completes and keeping one failed job
    plain = [(await queue.add("ok", i)).id for i in range(3)]
    own = (await queue.add("ok", 9, remove_on_complete=5)).id
    failing = [(await queue.add("bad", i)).id for i in range(2)]

    def run(job: Job) -> Any:
        if job.name == "bad":
            raise ValueError("no")
        return job.data

    worker = make_worker(run, remove_on_complete=True, remove_on_fail=1, autorun=False)
    finished = on_count(worker, "completed", 4)
    failed = on_count(worker, "failed", 2)
    running = asyncio.create_task(worker.run())
    await asyncio.wait_for(asyncio.gather(finished.wait(), failed.wait()), 10)

    # Then the jobs that keep everything went by the worker's rules, the other by its own
    assert await queue.get_completed_count() == 1
    assert [await queue.get_job(job_id) for job_id in plain] == [None, None, None]
    assert (await queue.get_job(own)) is not None
    assert [j.id for j in await queue.get_failed()] in ([failing[0]], [failing[1]])
    await worker.close()
    await running


async def test_a_worker_of_a_dead_letter_queue_keeps_what_it_completes_by_its_retention(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    # Given three dead letters (which carry no retention of their own)
    for i in range(3):
        await queue.add("charge", i)

    def reject(job: Job) -> None:
        raise UnrecoverableError("no")

    maker = make_worker(reject, dead_letter_queue=dlq.name)
    await wait_until(lambda: _dead_letters(dlq, 3), message="three dead letters")
    await maker.close()

    # When a worker of the dead letter queue that removes what completes runs them
    worker = make_worker(lambda job: "handled", dlq.name, remove_on_complete=True,
                         autorun=False)  # fmt: skip
    done = on_count(worker, "completed", 3)
    running = asyncio.create_task(worker.run())
    await asyncio.wait_for(done.wait(), 10)

    # Then none of them stays in the dead letter queue's completed set
    assert await dlq.get_completed_count() == 0
    assert await dlq.get_dead_letter_count() == 0
    await worker.close()
    await running


async def _dead_letters(dlq: Queue, count: int) -> bool:
    return await dlq.get_dead_letter_count() == count


def test_a_workers_retention_must_be_one_a_job_could_have(make_worker: MakeWorker) -> None:
    with pytest.raises(TypeError, match="remove_on_complete must be a bool, an int or a dict"):
        make_worker(print, remove_on_complete="yes", autorun=False)
    with pytest.raises(ValueError, match="remove_on_fail has unknown keys"):
        make_worker(print, remove_on_fail={"days": 3}, autorun=False)


async def test_sync_processor_runs_in_a_thread_and_async_in_the_loop(
    queue: Queue, make_worker: MakeWorker
) -> None:
    threads: list[str] = []
    loop_thread = threading.current_thread().name
    await queue.add("n", None)
    worker = make_worker(lambda j: threads.append(threading.current_thread().name))
    done = on_count(worker, "completed", 1)

    await asyncio.wait_for(done.wait(), 10)

    assert threads and threads[0] != loop_thread


async def test_jobs_run_in_fifo_order_with_one_slot(queue: Queue, make_worker: MakeWorker) -> None:
    await queue.add_bulk([{"name": "n", "data": i} for i in range(50)])
    order: list[int] = []

    async def record(job: Job) -> None:
        order.append(job.data)

    worker = make_worker(record, concurrency=1)
    await asyncio.wait_for(on_count(worker, "completed", 50).wait(), 20)

    assert order == list(range(50))


async def test_unprioritized_jobs_run_first_then_lowest_priority_number(
    queue: Queue, make_worker: MakeWorker
) -> None:
    await queue.add("p3", None, priority=3)
    await queue.add("p1", None, priority=1)
    await queue.add("none", None)
    await queue.add("p2", None, priority=2)
    await queue.add("p1-second", None, priority=1)
    order: list[str] = []

    async def record(job: Job) -> None:
        order.append(job.name)

    worker = make_worker(record, concurrency=1)
    await asyncio.wait_for(on_count(worker, "completed", 5).wait(), 10)

    assert order == ["none", "p1", "p1-second", "p2", "p3"]


async def test_delayed_job_does_not_run_before_it_is_due(
    queue: Queue, make_worker: MakeWorker
) -> None:
    job = await queue.add("later", None, delay=300)
    worker = make_worker(lambda j: None)

    await asyncio.wait_for(on_count(worker, "completed", 1).wait(), 10)

    stored = await queue.get_job(job.id)
    assert stored is not None and stored.processed_on is not None
    assert stored.processed_on >= stored.timestamp + 300


async def test_failing_job_is_retried_with_backoff_then_succeeds(
    queue: Queue, make_worker: MakeWorker
) -> None:
    calls: list[int] = []

    async def flaky(job: Job) -> str:
        calls.append(job.attempts_made)
        if len(calls) < 3:
            raise ConnectionError(f"transient {len(calls)}")
        return "ok"

    job = await queue.add("flaky", None, attempts=3, backoff={"type": "fixed", "delay": 100})
    worker = make_worker(flaky)
    await asyncio.wait_for(on_count(worker, "completed", 1).wait(), 10)

    stored = await queue.get_job(job.id)
    assert stored is not None
    assert calls == [0, 1, 2]
    assert stored.attempts_made == 3
    assert len(stored.stacktrace) == 2
    assert "transient 2" in stored.stacktrace[1]
    assert [a.error for a in stored.attempts] == ["transient 1", "transient 2"]
    assert stored.attempts[1].started_at - stored.attempts[0].finished_at >= 100
    assert stored.return_value == "ok"


def test_exponential_backoff_doubles_each_attempt() -> None:
    backoff = Backoff("exponential", 100)
    assert [backoff.wait_ms(n) for n in (1, 2, 3, 4)] == [100, 200, 400, 800]
    assert Backoff("fixed", 70).wait_ms(5) == 70


async def test_job_that_exhausts_its_attempts_fails_with_every_stacktrace(
    queue: Queue, make_worker: MakeWorker
) -> None:
    async def broken(job: Job) -> None:
        raise RuntimeError("always broken")

    job = await queue.add("broken", {"x": 1}, attempts=2)
    worker = make_worker(broken)
    await asyncio.wait_for(on_count(worker, "failed", 1).wait(), 10)

    stored = await queue.get_job(job.id)
    assert stored is not None
    assert await queue.get_job_state(job.id) == "failed"
    assert stored.failed_reason == "always broken"
    assert stored.error_type == "RuntimeError"
    assert stored.attempts_made == 2
    assert len(stored.stacktrace) == 2
    assert await queue.get_failed_count() == 1


async def test_unrecoverable_error_ends_retries_at_once(
    queue: Queue, make_worker: MakeWorker
) -> None:
    async def refuse(job: Job) -> None:
        raise UnrecoverableError("bad payload")

    job = await queue.add("n", None, attempts=5)
    worker = make_worker(refuse)
    await asyncio.wait_for(on_count(worker, "failed", 1).wait(), 10)

    stored = await queue.get_job(job.id)
    assert stored is not None and stored.attempts_made == 1
    assert await queue.get_job_state(job.id) == "failed"


async def test_a_thousand_jobs_at_concurrency_twenty_each_complete_exactly_once(
    queue: Queue, make_worker: MakeWorker
) -> None:
    jobs = await queue.add_bulk([{"name": "n", "data": i} for i in range(1000)])
    runs: collections.Counter[str] = collections.Counter()

    async def work(job: Job) -> None:
        runs[job.id] += 1
        await asyncio.sleep(0)

    worker = make_worker(work, concurrency=20)
    await asyncio.wait_for(on_count(worker, "completed", 1000).wait(), 60)

    assert set(runs) == {j.id for j in jobs}
    assert set(runs.values()) == {1}
    assert await queue.get_completed_count() == 1000


async def test_two_workers_share_a_queue_without_running_a_job_twice(
    queue: Queue, make_worker: MakeWorker
) -> None:
    await queue.add_bulk([{"name": "n", "data": i} for i in range(300)])
    runs: collections.Counter[int] = collections.Counter()

    async def work(job: Job) -> None:
        runs[job.data] += 1

    first, second = make_worker(work, concurrency=5), make_worker(work, concurrency=5)
    done = asyncio.Event()

    async def check(*_: Any) -> None:
        if await queue.get_completed_count() == 300:
            done.set()

    first.on("completed", check)
    second.on("completed", check)
    await asyncio.wait_for(done.wait(), 30)

    assert sorted(runs) == list(range(300))
    assert set(runs.values()) == {1}


async def test_worker_claims_nothing_while_the_queue_is_paused(
    queue: Queue, make_worker: MakeWorker
) -> None:
    await queue.pause()
    job = await queue.add("n", None)
    worker = make_worker(lambda j: None)
    claimed = await _scripts.load("claim_jobs")(
        queue.client,
        [*queue.keys.group, queue.keys.reply("probe", "claim")],
        [0, "probe", 1000, 5, 100, "probe-call"],
    )
    assert claimed[1:] == []

    await queue.resume()
    await asyncio.wait_for(on_count(worker, "completed", 1).wait(), 10)
    assert await queue.get_job_state(job.id) == "completed"


async def test_remove_on_complete_keeps_only_the_newest(
    queue: Queue, make_worker: MakeWorker
) -> None:
    await queue.add_bulk([{"name": "n", "data": i, "remove_on_complete": 2} for i in range(5)])
    gone = await queue.add("gone", None, remove_on_complete=True)

    async def next_millisecond(job: Job) -> None:
        # Finish times are in ms: each job ends on a later ms than the one before, so
        # "the newest two" is well defined.
        started = now_ms()
        while now_ms() == started:  # noqa: ASYNC110 - waiting for the clock itself
            await asyncio.sleep(0.0002)

    # Not claiming ahead: a job held ahead starts as the one before ends, and that one's
    # finish time, taken just after, could fall on the same ms as the next one's.
    worker = make_worker(next_millisecond, concurrency=1, claim_ahead=False)

    await asyncio.wait_for(on_count(worker, "completed", 6).wait(), 10)

    assert await queue.get_job(gone.id) is None
    kept = await queue.get_completed()
    assert sorted(j.data for j in kept) == [3, 4]


async def test_worker_that_lost_its_lock_cannot_complete_the_job(
    queue: Queue, make_worker: MakeWorker, raw: aioredis.Redis
) -> None:
    release = asyncio.Event()
    started = asyncio.Event()
    runs: list[int] = []

    async def slow(job: Job) -> str:
        runs.append(len(runs) + 1)
        started.set()
        await release.wait()
        return f"run {len(runs)}"

    job = await queue.add("n", None)
    worker = make_worker(slow, stalled_interval=60_000)
    lost = on_count(worker, "lost", 1)
    completed = on_count(worker, "completed", 1)
    await asyncio.wait_for(started.wait(), 10)
    # The lease expires (as if the worker had blocked) and a sweep takes the job back.
    await raw.zadd(queue.keys.leases, {job.id: 0})
    swept = await _scripts.load("sweep_stalled")(
        raw, [*queue.keys.group, queue.keys.failed], [1, 1, 100, "jobs", "", 10]
    )
    # The worker's own first sweep, at start-up, may run between the two calls above and
    # take the job back itself: either way it is waiting again, under no lock.
    assert swept[0] == [job.id] or await queue.get_job_state(job.id) == "waiting"

    release.set()
    await asyncio.wait_for(lost.wait(), 10)
    await asyncio.wait_for(completed.wait(), 10)

    # The first run's outcome was refused; the job ran again under a new lock.
    stored = await queue.get_job(job.id)
    assert stored is not None
    assert runs == [1, 2]
    assert stored.return_value == "run 2"
    assert [a.outcome for a in stored.attempts] == ["stalled"]


async def test_close_lets_the_running_job_finish(queue: Queue, make_worker: MakeWorker) -> None:
    started, release = asyncio.Event(), asyncio.Event()

    async def slow(job: Job) -> str:
        started.set()
        await release.wait()
        return "finished"

    job = await queue.add("n", None)
    worker = make_worker(slow)
    await asyncio.wait_for(started.wait(), 10)

    closing = asyncio.create_task(worker.close(timeout=10))
    release.set()
    await asyncio.wait_for(closing, 10)

    stored = await queue.get_job(job.id)
    assert stored is not None and stored.return_value == "finished"


@pytest.mark.timeout(60)
async def test_job_of_a_worker_killed_mid_job_is_recovered_by_another_worker(
    queue: Queue, make_worker: MakeWorker, raw: aioredis.Redis, redis_url: str, prefix: str
) -> None:
    marker = f"{prefix}:started"
    job = await queue.add("n", {"marker": marker})
    env = {**os.environ, "LAZARUS_REDIS_URL": redis_url}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "lazarus.cli",
            "worker",
            "tests.procs:mark_then_hang",
            "--queue",
            "jobs",
            "--prefix",
            prefix,
            "--lock-duration",
            "500",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        await wait_until(lambda: raw.exists(marker), 20, "the subprocess to start the job")
        assert await queue.get_job_state(job.id) == "active"
        process.send_signal(signal.SIGKILL)
        process.wait(10)
    finally:
        if process.poll() is None:
            process.kill()

    rescuer = make_worker(lambda j: "rescued", stalled_interval=100)
    await asyncio.wait_for(on_count(rescuer, "completed", 1).wait(), 20)

    stored = await queue.get_job(job.id)
    assert stored is not None
    assert stored.return_value == "rescued"
    assert stored.stalled_counter == 1
    assert [a.outcome for a in stored.attempts] == ["stalled"]


async def test_worker_subprocess_stops_gracefully_on_sigterm(
    queue: Queue, redis_url: str, prefix: str
) -> None:
    job = await queue.add("n", {"hello": "world"})
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "lazarus.cli",
            "worker",
            "tests.procs:echo",
            "--queue",
            "jobs",
            "--prefix",
            prefix,
        ],
        env={**os.environ, "LAZARUS_REDIS_URL": redis_url},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        await wait_until(
            lambda: _state_is(queue, job.id, "completed"), 20, "the subprocess to finish the job"
        )
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()

    assert process.returncode == 0, output
    assert "shutting down" in output


async def _state_is(queue: Queue, job_id: str, state: str) -> bool:
    return await queue.get_job_state(job_id) == state


async def test_worker_rides_out_a_redis_restart_without_losing_jobs() -> None:
    server = EmbeddedRedis().start()
    try:
        queue = Queue("jobs", connection=server.url)
        worker = Worker("jobs", lambda j: j.data, connection=server.url, block_timeout=0.2)
        errors = on_count(worker, "error", 1)
        done = on_count(worker, "completed", 2)
        await queue.add("n", 1)
        await wait_until(lambda: _count(queue, 1), 10, "the first job")

        server.stop()
        await asyncio.wait_for(errors.wait(), 20)
        server.start()
        await queue.add("n", 2)
        await asyncio.wait_for(done.wait(), 30)

        await worker.close(timeout=5)
        await queue.close()
    finally:
        server.stop()


async def _count(queue: Queue, n: int) -> bool:
    return await queue.get_completed_count() == n


def test_worker_rejects_bad_options(redis_url: str) -> None:
    with pytest.raises(ValueError, match="concurrency"):
        Worker("jobs", lambda j: None, connection=redis_url, concurrency=0, autorun=False)
    with pytest.raises(TypeError, match="processor"):
        Worker("jobs", "not callable", connection=redis_url, autorun=False)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_stalled_count"):
        Worker("jobs", lambda j: None, connection=redis_url, max_stalled_count=-1, autorun=False)


@pytest.mark.parametrize(
    ("options", "error", "field"),
    [
        ({"lock_duration": 10**30}, ValueError, "lock_duration"),
        ({"stalled_interval": 10**20}, ValueError, "stalled_interval"),
        ({"job_timeout": 10**20}, ValueError, "job_timeout"),
        ({"concurrency": 1_000_000}, ValueError, "concurrency"),
        ({"block_timeout": "5"}, ValueError, "block_timeout"),
        ({"block_timeout": float("nan")}, ValueError, "block_timeout"),
        ({"block_timeout": float("inf")}, ValueError, "block_timeout"),
        ({"block_timeout": -1}, ValueError, "block_timeout"),
        ({"shutdown_timeout": -5}, ValueError, "shutdown_timeout"),
        ({"max_events": "x"}, ValueError, "max_events"),
        ({"name": 123}, TypeError, "name"),
        ({"name": "two words"}, ValueError, "name"),
    ],
)
def test_worker_refuses_options_it_could_not_run_with_naming_them(
    redis_url: str, options: dict[str, Any], error: type[Exception], field: str
) -> None:
    with pytest.raises(error, match=field):
        Worker("jobs", lambda j: None, connection=redis_url, autorun=False, **options)


async def test_close_with_a_timeout_of_zero_hands_running_jobs_back_at_once(
    queue: Queue, make_worker: MakeWorker
) -> None:
    # Given a worker whose shutdown timeout is long, running a job that does not end
    started, release = asyncio.Event(), asyncio.Event()

    async def hold(job: Job) -> None:
        started.set()
        await release.wait()

    job = await queue.add("n", None)
    worker = make_worker(hold, shutdown_timeout=60)
    await asyncio.wait_for(started.wait(), 10)

    # When it is closed with a timeout of zero
    await asyncio.wait_for(worker.close(timeout=0), 10)

    # Then it did not wait out its shutdown timeout: the job is back in the queue
    assert await queue.get_job_state(job.id) == "waiting"


async def test_async_error_listeners_are_awaited(redis_url: str) -> None:
    worker = Worker(
        "jobs", lambda j: None, connection="redis://127.0.0.1:1/0", block_timeout=0.1, autorun=False
    )
    heard = asyncio.Event()

    async def listener(exc: BaseException) -> None:
        await asyncio.sleep(0)
        heard.set()

    worker.on("error", listener)
    worker._report_error(ConnectionError("down"))

    await asyncio.wait_for(heard.wait(), 5)
    await worker.close()


async def test_close_of_an_idle_worker_does_not_wait_out_the_blocking_timeout(
    queue: Queue, make_worker: MakeWorker
) -> None:
    await queue.add("n", None)
    worker = make_worker(lambda j: None, block_timeout=30)
    await asyncio.wait_for(on_count(worker, "completed", 1).wait(), 10)

    # Idle now, blocked on the marker for up to 30 s: close must not wait for that.
    await asyncio.wait_for(worker.close(), 5)


# The second queue shares the first's hash tag: a worker's queues must, on Redis Cluster.
@pytest.mark.parametrize("queues", [["jobs"], ["{jobs}-other", "jobs"]], ids=["one queue", "two"])
async def test_an_idle_worker_starts_a_claimed_job_before_it_blocks_again(
    queue: Queue, make_worker: MakeWorker, queues: list[str]
) -> None:
    # Given an idle worker, blocked on the marker
    blocking_at_start: list[bool] = []
    worker: Worker

    async def record(job: Job) -> None:  # run in the event loop, as the claim loop is
        blocking_at_start.append(worker._blocking)

    def blocked_after(runs: int) -> Callable[[], Awaitable[bool]]:
        async def check() -> bool:
            return worker._blocking and len(blocking_at_start) == runs

        return check

    # (with free slots left after a claim, the loop goes back to block at once; with two
    # queues, the job's is claimed last, so no other claim comes between)
    worker = make_worker(record, queues if len(queues) > 1 else queues[0], block_timeout=30,
                         concurrency=4)  # fmt: skip
    await wait_until(blocked_after(0), message="the worker blocks")

    # When jobs come one at a time
    for runs in (1, 2):
        await queue.add("n", None)
        await wait_until(blocked_after(runs), message="the job ran, and the worker blocks again")

    # Then each started before the worker sent its next blocking claim: that write is not
    # on the way from the claim to the processor
    assert blocking_at_start == [False, False]


async def test_leases_are_renewed_while_close_waits_for_running_jobs(
    queue: Queue, make_worker: MakeWorker, raw: aioredis.Redis
) -> None:
    started, release = asyncio.Event(), asyncio.Event()

    async def slow(job: Job) -> str:
        started.set()
        await release.wait()
        return "finished"

    job = await queue.add("n", None)
    worker = make_worker(slow, lock_duration=400, stalled_interval=200)
    await asyncio.wait_for(started.wait(), 10)
    closing = asyncio.create_task(worker.close(timeout=20))
    first = await raw.zscore(queue.keys.leases, job.id)
    assert first is not None

    async def renewed_past_the_first_expiry() -> bool:
        score = await raw.zscore(queue.keys.leases, job.id)
        return score is not None and score > first + 400

    # A lease not renewed during shutdown would expire and the sweep would count a stall.
    await wait_until(renewed_past_the_first_expiry, message="a renewal during close()")
    release.set()
    await asyncio.wait_for(closing, 10)

    stored = await queue.get_job(job.id)
    assert stored is not None and stored.return_value == "finished"
    assert stored.attempts_made == 1 and stored.attempts == []


async def test_close_leaves_no_wake_key_behind(
    queue: Queue, make_worker: MakeWorker, raw: aioredis.Redis, prefix: str
) -> None:
    await queue.add("n", None)
    worker = make_worker(lambda j: None, block_timeout=30)
    await asyncio.wait_for(on_count(worker, "completed", 1).wait(), 10)

    await asyncio.wait_for(worker.close(), 5)

    assert not [k async for k in raw.scan_iter(match=f"{prefix}:*:wake:*")]
    assert not worker.running


async def test_the_shortest_blocking_wait_still_times_out(raw: aioredis.Redis, prefix: str) -> None:
    from lazarus._claiming import _block_seconds

    assert _block_seconds(0.0001) == "0.0015"
    assert _block_seconds(5) == "5.0005"
    # Redis truncates to whole ms and 0 blocks forever: "0.001" can hang on Redis 6.2.
    reply = await asyncio.wait_for(
        raw.execute_command("BZPOPMIN", f"{prefix}:empty", _block_seconds(0.0001)), 5
    )
    assert reply is None


async def test_a_worker_with_more_slots_than_a_pool_has_connections_records_every_outcome(
    queue: Queue, make_worker: Callable[..., Worker]
) -> None:
    # redis-py's pool holds at most 100 connections by default: 150 slots finishing together
    # must share them rather than each take one.
    await queue.add_bulk([{"name": "n", "data": {"i": i}} for i in range(600)])
    errors: list[BaseException] = []
    completed: list[str] = []

    async def process(job: Job) -> None:
        await asyncio.sleep(0.001)

    worker = make_worker(process, concurrency=150)
    worker.on("error", errors.append)
    worker.on("completed", lambda job, _result: completed.append(job.id))

    async def all_completed() -> bool:
        return len(completed) == 600

    await wait_until(all_completed, timeout=60, message="600 jobs to complete")
    assert errors == []
    assert (await queue.get_job_counts())["completed"] == 600
