"""Job timeouts: a hung processor fails its attempt, frees its slot, and cannot keep a
worker alive after shutdown."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable

import pytest
import redis.asyncio as aioredis

from lazarus import Job, JobTimeoutError, Queue, Worker

from .conftest import wait_until
from .faults import collect, on_count

MakeWorker = Callable[..., Worker]


async def test_async_job_past_its_timeout_is_cancelled_retried_and_dead_lettered(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    # Given a job with a 100 ms timeout whose processor never finishes
    cancelled: list[str] = []

    async def hang(job: Job) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(job.id)
            raise

    job = await queue.add("n", None, attempts=2, timeout=100)
    worker = make_worker(hang, dead_letter_queue="jobs-dlq")
    retried = collect(worker, "retrying")
    dead = on_count(worker, "deadLettered", 1)

    # When the worker runs it
    await asyncio.wait_for(dead.wait(), 10)

    # Then both attempts were cancelled and recorded as timed out, the reason in the letter
    assert cancelled == [job.id, job.id]
    assert isinstance(retried[0][1], JobTimeoutError)
    [letter] = await dlq.get_dead_letter_jobs()
    meta = letter.dead_letter
    assert meta is not None and meta.reason == "attempts_exhausted"
    assert meta.error_type == "JobTimeoutError"
    assert meta.failed_reason == "job exceeded its timeout of 100 ms"
    assert [a.error_type for a in meta.attempts] == ["JobTimeoutError", "JobTimeoutError"]


async def test_worker_job_timeout_applies_unless_the_job_has_its_own(
    queue: Queue, make_worker: MakeWorker
) -> None:
    # Given a worker whose default timeout is 50 ms, and two jobs that take longer
    release = asyncio.Event()

    async def slow(job: Job) -> str:
        await release.wait()
        return "done"

    default = await queue.add("default", None)
    own = await queue.add("own", None, timeout=60_000)
    worker = make_worker(slow, concurrency=2, job_timeout=50)
    failed = on_count(worker, "failed", 1)

    # When the default one has timed out and the other is released
    await asyncio.wait_for(failed.wait(), 10)
    release.set()

    # Then only the one without a timeout of its own failed
    await wait_until(lambda: _state(queue, own.id, "completed"), message="the job with its own")
    failed_job = await queue.get_job(default.id)
    assert failed_job is not None and failed_job.error_type == "JobTimeoutError"
    stored = await queue.get_job(own.id)
    assert stored is not None and stored.opts.timeout == 60_000


async def test_a_processor_s_own_timeout_error_is_not_a_job_timeout(
    queue: Queue, make_worker: MakeWorker
) -> None:
    async def upstream(job: Job) -> None:
        raise TimeoutError("upstream did not answer")

    job = await queue.add("n", None, timeout=60_000)
    worker = make_worker(upstream)
    await asyncio.wait_for(on_count(worker, "failed", 1).wait(), 10)

    stored = await queue.get_job(job.id)
    assert stored is not None and stored.error_type == "TimeoutError"


async def test_thread_job_past_its_timeout_is_abandoned_and_frees_its_slot(
    queue: Queue, make_worker: MakeWorker, caplog: pytest.LogCaptureFixture
) -> None:
    # Given one slot and a plain-function job that blocks its thread past its timeout
    caplog.set_level(logging.WARNING, logger="lazarus.worker")
    release = threading.Event()

    def block(job: Job) -> str:
        if job.name == "hung":
            release.wait(60)
        return job.name

    hung = await queue.add("hung", None, timeout=100)
    after = await queue.add("after", None)
    worker = make_worker(block, concurrency=1)
    try:
        # When it times out
        failed = collect(worker, "failed")
        await wait_until(lambda: _state(queue, after.id, "completed"), message="the next job")

        # Then its attempt failed, and the next job ran in the freed slot while it hangs on
        assert [args[0].id for args in failed] == [hung.id]
        assert isinstance(failed[0][1], JobTimeoutError)
        assert not release.is_set()
        assert any("abandoned" in r.getMessage() for r in caplog.records)
    finally:
        release.set()


@pytest.mark.parametrize(
    ("options", "error", "field"),
    [
        ({"timeout": 0}, ValueError, "timeout"),
        ({"timeout": "5"}, TypeError, "timeout"),
        ({"timeout": True}, TypeError, "timeout"),
    ],
)
async def test_add_rejects_a_bad_timeout_before_writing(
    queue: Queue, raw: aioredis.Redis, prefix: str, options: dict[str, object],
    error: type[Exception], field: str,
) -> None:  # fmt: skip
    with pytest.raises(error, match=field):
        await queue.add("n", None, **options)  # type: ignore[arg-type]
    with pytest.raises(error, match=f"jobs\\[0\\]: {field}"):
        await queue.add_bulk([{"name": "n", **options}])
    assert [k async for k in raw.scan_iter(match=f"{prefix}:*")] == []


@pytest.mark.parametrize("value", [0, -5, 1.5, "100"])
def test_worker_rejects_a_bad_job_timeout(redis_url: str, value: object) -> None:
    with pytest.raises(ValueError, match="job_timeout"):
        Worker("jobs", lambda j: None, connection=redis_url, job_timeout=value, autorun=False)  # type: ignore[arg-type]


@pytest.mark.timeout(90)
async def test_worker_process_with_a_hung_thread_exits_after_its_shutdown_timeout(
    queue: Queue, raw: aioredis.Redis, redis_url: str, prefix: str
) -> None:
    # Given `lazarus worker` running a plain function that blocks its thread for good
    marker = f"{prefix}:started"
    job = await queue.add("n", {"marker": marker})
    process = subprocess.Popen(
        [sys.executable, "-m", "lazarus.cli", "worker", "tests.procs:mark_then_block",
         "--queue", "jobs", "--prefix", prefix, "--shutdown-timeout", "0.5"],
        env={**os.environ, "LAZARUS_REDIS_URL": redis_url},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        await wait_until(lambda: raw.exists(marker), 30, "the subprocess to start the job")

        # When it gets SIGTERM
        process.send_signal(signal.SIGTERM)
        output, _ = await asyncio.to_thread(process.communicate, timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()

    # Then it exits once its shutdown timeout is over, and the job is waiting again
    assert process.returncode == 0, output
    assert await queue.get_job_state(job.id) == "waiting"


async def _state(queue: Queue, job_id: str, state: str) -> bool:
    return await queue.get_job_state(job_id) == state
