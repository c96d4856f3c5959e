"""A worker rides out Redis trouble: late start-up, memory pressure, vanished jobs."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable

import pytest
import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import OutOfMemoryError

from lazarus import Job, Queue, RedisUnavailableError, Worker, _scripts
from lazarus._connection import now_ms
from lazarus.embedded import EmbeddedRedis

from .conftest import wait_until
from .faults import busy, collect, free_port, on_count, out_of_memory, private_redis

MakeWorker = Callable[..., Worker]


@pytest.fixture
async def server() -> AsyncIterator[EmbeddedRedis]:
    with private_redis() as instance:
        yield instance


@pytest.fixture
async def admin(server: EmbeddedRedis) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(server.url, decode_responses=True)
    yield client
    await client.aclose()


@pytest.mark.timeout(60)
async def test_worker_started_before_redis_starts_processing_once_redis_answers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Given a worker pointed at a port where nothing listens yet
    caplog.set_level(logging.INFO, logger="lazarus.worker")
    port = free_port()
    worker = Worker("jobs", lambda job: job.data * 2, connection=f"redis://127.0.0.1:{port}/0",
                    block_timeout=0.2)  # fmt: skip
    errors = collect(worker, "error")
    three_errors = on_count(worker, "error", 3)
    done = on_count(worker, "completed", 1)
    await asyncio.wait_for(three_errors.wait(), 30)

    # When Redis starts there and a job is added
    with private_redis(port=port) as server:
        async with Queue("jobs", connection=server.url) as queue:
            job = await queue.add("double", 21)
            await asyncio.wait_for(done.wait(), 30)

            # Then the job ran, every failure was an error event, and the log said so once
            stored = await queue.get_job(job.id)
            assert stored is not None and stored.return_value == 42
        await worker.close(timeout=5)
    assert all(isinstance(args[0], RedisConnectionError) for args in errors)
    start_up = [r for r in caplog.records if "start-up" in r.getMessage()]
    assert [r.levelname for r in start_up] == ["WARNING", "INFO"]
    assert str(port) in start_up[0].getMessage()
    assert "works again" in start_up[1].getMessage()


@pytest.mark.timeout(60)
async def test_worker_whose_registry_write_fails_out_of_memory_starts_once_memory_is_free(
    server: EmbeddedRedis, admin: aioredis.Redis
) -> None:
    # Given a Redis out of memory when the worker starts
    async with Queue("jobs", connection=server.url) as queue:
        async with out_of_memory(admin):
            worker = Worker("jobs", lambda job: "ok", connection=server.url, block_timeout=0.2)
            errors = collect(worker, "error")
            failed_once = on_count(worker, "error", 1)
            await asyncio.wait_for(failed_once.wait(), 20)
        # When memory is freed and a job is added
        done = on_count(worker, "completed", 1)
        await queue.add("n", None)

        # Then the worker registered its queue and processed the job
        await asyncio.wait_for(done.wait(), 30)
        await worker.close(timeout=5)
    assert isinstance(errors[0][0], OutOfMemoryError)


@pytest.mark.parametrize(
    ("server_args", "path", "message"),
    [
        (["--requirepass", "secret"], ":wrong@127.0.0.1:{port}/0", "invalid username-password"),
        ([], "127.0.0.1:{port}/9999", "DB index is out of range"),
    ],
    ids=["wrong password", "bad database index"],
)
async def test_worker_with_settings_redis_refuses_fails_fast_in_one_line(
    server_args: list[str], path: str, message: str
) -> None:
    with private_redis(extra_args=server_args) as server:
        url = "redis://" + path.format(port=server.port)
        worker = Worker("jobs", lambda job: None, connection=url, autorun=False)
        errors = collect(worker, "error")

        with pytest.raises(RedisUnavailableError, match="refused the connection settings") as info:
            await asyncio.wait_for(worker.run(), 20)

        assert "\n" not in str(info.value)
        assert message in str(info.value) and f"127.0.0.1:{server.port}" in str(info.value)
        await wait_until(lambda: _true(errors), message="the error event")
        await worker.close()


async def _true(items: list[object]) -> bool:
    return bool(items)


async def test_outcome_refused_while_redis_is_busy_is_recorded_once_it_answers(
    server: EmbeddedRedis, admin: aioredis.Redis
) -> None:
    # Given a job running. (Memory pressure cannot refuse an outcome: each outcome script
    # starts by removing the job from the active list, and Redis lets a script that freed
    # memory go on. A long script makes Redis refuse every call with BUSY instead.)
    started, release = asyncio.Event(), asyncio.Event()
    runs: list[str] = []

    async def slow(job: Job) -> str:
        runs.append(job.id)
        started.set()
        await release.wait()
        return "done"

    async with Queue("jobs", connection=server.url) as queue:
        job = await queue.add("n", None)
        worker = Worker("jobs", slow, connection=server.url, block_timeout=0.2)
        errors = collect(worker, "error")
        refused = on_count(worker, "error", 1)
        done = on_count(worker, "completed", 1)
        await asyncio.wait_for(started.wait(), 10)

        # When it finishes while Redis answers BUSY to everything, until the script ends
        async with busy(server, admin):
            release.set()
            await asyncio.wait_for(refused.wait(), 20)

        # Then the outcome is recorded: the slot survived and the job ran once
        await asyncio.wait_for(done.wait(), 20)
        stored = await queue.get_job(job.id)
        assert stored is not None and stored.return_value == "done"
        assert runs == [job.id]
        assert any("BUSY" in str(args[0]) for args in errors)
        await worker.close(timeout=5)


async def test_job_removed_while_running_is_reported_lost_and_the_slot_goes_on(
    queue: Queue, make_worker: MakeWorker, raw: aioredis.Redis
) -> None:
    # Given a job running
    started, release = asyncio.Event(), asyncio.Event()

    async def slow(job: Job) -> str:
        if job.name == "first":
            started.set()
            await release.wait()
        return job.name

    first = await queue.add("first", None)
    worker = make_worker(slow, concurrency=1)
    lost = collect(worker, "lost")
    completed = collect(worker, "completed")
    await asyncio.wait_for(started.wait(), 10)

    # When its hash is deleted behind the worker's back, and it finishes
    await raw.delete(queue.keys.job(first.id))
    release.set()
    await wait_until(lambda: _true(lost), message="the lost event")

    # Then it is reported lost, and the same slot runs the next job
    second = await queue.add("second", None)
    await wait_until(lambda: _true(completed), message="the next job")
    assert lost == [(first.id,)]
    assert [args[0].id for args in completed] == [second.id]


@pytest.mark.timeout(60)
async def test_lease_renewal_and_stall_sweep_go_on_through_a_memory_pressure_episode(
    server: EmbeddedRedis, admin: aioredis.Redis
) -> None:
    # Given a job running, and another one held by a worker that died (its lease runs out
    # during the episode)
    started, release = asyncio.Event(), asyncio.Event()

    async def slow(job: Job) -> str:
        started.set()
        await release.wait()
        return "done"

    async with Queue("jobs", connection=server.url) as queue:
        running = await queue.add("running", None)
        worker = Worker("jobs", slow, connection=server.url, concurrency=1, lock_duration=1000,
                        stalled_interval=200, block_timeout=0.2)  # fmt: skip
        await asyncio.wait_for(started.wait(), 10)
        orphan = await queue.add("orphan", None)
        await _scripts.load("claim_jobs")(
            queue.client, [*queue.keys.group, queue.keys.reply("dead-worker", "claim")],
            [now_ms(), "dead-worker", 1500, 1, 100, "call-1"],
        )  # fmt: skip
        assert await queue.get_job_state(orphan.id) == "active"

        # When Redis refuses every write that could grow memory, for longer than a lease
        async with out_of_memory(admin):
            with pytest.raises(OutOfMemoryError):
                await admin.set("probe", "x")
            entered = now_ms()

            async def renewed_twice() -> bool:
                score = await queue.client.zscore(queue.keys.leases, running.id)
                return score is not None and score > entered + 1000 + 600

            # Then this worker's lease is renewed all along (renewal grows nothing), and the
            # orphan is swept back to waiting
            await wait_until(renewed_twice, 20, "renewals during the episode")
            await wait_until(lambda: _state(queue, orphan.id, "waiting"), 20, "the sweep")

        release.set()
        done = on_count(worker, "completed", 2)
        await asyncio.wait_for(done.wait(), 20)
        stored = await queue.get_job(running.id)
        assert stored is not None and stored.attempts == [] and stored.stalled_counter == 0
        await worker.close(timeout=5)


async def _state(queue: Queue, job_id: str, state: str) -> bool:
    return await queue.get_job_state(job_id) == state


@pytest.mark.timeout(60)
async def test_an_idle_worker_closes_while_redis_refuses_writes(
    server: EmbeddedRedis, admin: aioredis.Redis
) -> None:
    # Given an idle worker, blocked waiting for work
    worker = Worker("jobs", lambda job: None, connection=server.url, block_timeout=5)

    async def blocking() -> bool:
        return worker._blocking

    await wait_until(blocking, message="the blocking claim")
    # When it is closed while Redis refuses writes (its wake-up key cannot be written)
    async with out_of_memory(admin):
        # Then close() returns, without waiting out the block or raising
        await asyncio.wait_for(worker.close(timeout=5), 3)
    assert not worker.running


async def test_a_slot_that_lost_its_job_leaves_the_leases_of_its_next_run_to_renew(
    queue: Queue, make_worker: MakeWorker, raw: aioredis.Redis
) -> None:
    # Given a job run by one slot whose lease lapses (its event loop stalled, say), swept back
    # by another worker, and run again by another slot of the same worker
    releases = [asyncio.Event(), asyncio.Event()]
    started: list[int] = []

    async def run(job: Job) -> int:
        started.append(job.attempts_started)
        await releases[len(started) - 1].wait()
        return len(started)

    job = await queue.add("n", None)
    worker = make_worker(run, concurrency=3, lock_duration=1000, stalled_interval=300,
                         claim_ahead=False)  # fmt: skip
    await wait_until(lambda: _at_least(started, 1), message="the first run")
    await raw.zadd(queue.keys.leases, {job.id: 0})
    sweep = _scripts.load("sweep_stalled")
    await sweep(raw, [*queue.keys.group, queue.keys.failed],
                [now_ms(), 1, queue.max_events, queue.name, "", 100, 0, 4000])  # fmt: skip
    await wait_until(lambda: _at_least(started, 2), message="the second run")
    leased = await raw.zscore(queue.keys.leases, job.id)

    # When the first run ends (its outcome refused: the job is the second run's now)
    releases[0].set()

    # Then the second run's lease is renewed still, and the job runs twice only, completed
    async def renewed() -> bool:
        return (await raw.zscore(queue.keys.leases, job.id) or 0) > (leased or 0)

    await wait_until(renewed, message="the second run's lease renewed")
    releases[1].set()
    await wait_until(lambda: _state_is(queue, job.id, "completed"), message="completed")
    assert started == [1, 2]
    await worker.close()


async def _at_least(started: list[int], count: int) -> bool:
    return len(started) >= count


async def _state_is(queue: Queue, job_id: str, state: str) -> bool:
    return await queue.get_job_state(job_id) == state
