"""One worker, several queues: strict priority, weights, shared slots and stall sweeps."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable

import pytest
import redis.asyncio as aioredis

from lazarus import Job, Queue, Worker, _scripts
from lazarus._connection import now_ms

from .conftest import wait_until

MakeWorker = Callable[..., Worker]


@pytest.fixture
async def queues(redis_url: str, prefix: str) -> list[Queue]:
    made = [Queue(name, connection=redis_url, prefix=prefix) for name in ("high", "low")]
    yield made  # type: ignore[misc]
    for queue in made:
        await queue.close()


async def test_strict_priority_drains_the_first_queue_before_the_next(
    queues: list[Queue], make_worker: MakeWorker
) -> None:
    high, low = queues
    order: list[str] = []
    await low.add_bulk([{"name": "l"}] * 3)
    await high.add_bulk([{"name": "h"}] * 3)

    async def record(job: Job) -> None:
        order.append(job.queue_name)
        if len(order) == 4:  # a high job arriving while low ones run goes first
            await high.add("h")

    make_worker(record, [high, low], concurrency=1)
    await wait_until(lambda: _done(queues, 7), message="every job to run")

    assert order == ["high"] * 3 + ["low", "high", "low", "low"]


async def _done(queues: list[Queue], n: int) -> bool:
    return sum([await q.get_completed_count() for q in queues]) == n


async def test_weights_serve_every_queue_while_all_have_work(
    queues: list[Queue], make_worker: MakeWorker
) -> None:
    high, low = queues
    await high.add_bulk([{"name": "h"}] * 60)
    await low.add_bulk([{"name": "l"}] * 60)
    seen: list[str] = []
    forty = asyncio.Event()

    async def record(job: Job) -> None:
        seen.append(job.queue_name)
        if len(seen) == 40:
            forty.set()

    worker = make_worker(record, ["high", "low"], concurrency=1, weights={"high": 3, "low": 1})
    await asyncio.wait_for(forty.wait(), 20)
    await worker.close()

    assert set(seen[:40]) == {"high", "low"}


async def test_the_slots_are_shared_by_all_the_queues(
    queues: list[Queue], make_worker: MakeWorker
) -> None:
    high, low = queues
    await high.add_bulk([{"name": "h"}] * 5)
    await low.add_bulk([{"name": "l"}] * 5)
    running, most = [0], [0]
    release = asyncio.Event()

    async def hold(job: Job) -> None:
        running[0] += 1
        most[0] = max(most[0], running[0])
        await release.wait()
        running[0] -= 1

    make_worker(hold, ["high", "low"], concurrency=3)
    await wait_until(lambda: _count(running, 3), message="three jobs to run")
    release.set()
    await wait_until(lambda: _done(queues, 10), message="every job to run")

    assert most[0] == 3


async def _count(box: list[int], n: int) -> bool:
    return box[0] == n


async def test_a_stalled_job_of_any_queue_is_swept_and_run_again(
    queues: list[Queue], raw: aioredis.Redis, make_worker: MakeWorker
) -> None:
    _, low = queues
    job = await low.add("l")
    claim = [*low.keys.group, low.keys.reply("ghost", "claim")]
    await _scripts.load("claim_jobs")(raw, claim, [now_ms(), "ghost", 50, 1, 100,
                                                  uuid.uuid4().hex])  # fmt: skip

    make_worker(lambda j: "ran", ["high", "low"], stalled_interval=100)

    assert await job.wait_until_finished(timeout=10) == "ran"
    stored = await low.get_job(job.id)
    assert stored is not None and stored.stalled_counter == 1


@pytest.mark.parametrize(
    ("names", "options", "error", "fragment"),
    [
        ([], {}, TypeError, "non-empty list"),
        (["a", "a"], {}, ValueError, "twice"),
        (["a", "b c"], {}, ValueError, "queue_name"),
        (["a", "b"], {"weights": {"c": 1}}, ValueError, "not one of"),
        (["a", "b"], {"weights": {"a": 0}}, ValueError, "weights"),
        (["a", "b"], {"dead_letter_queue": "b"}, ValueError, "dead_letter_queue"),
    ],
)
def test_bad_queue_lists_are_refused(
    redis_url: str, names: list[str], options: dict[str, object], error: type, fragment: str
) -> None:
    with pytest.raises(error, match=fragment):
        Worker(names, lambda j: None, connection=redis_url, autorun=False, **options)  # type: ignore[arg-type]


@pytest.mark.timeout(60)
async def test_the_worker_command_processes_every_queue_it_is_given(
    queues: list[Queue], redis_url: str, prefix: str
) -> None:
    jobs = [await queue.add("n", {"from": queue.name}) for queue in queues]
    process = subprocess.Popen(
        [sys.executable, "-m", "lazarus.cli", "worker", "tests.procs:echo", "--queue", "high",
         "--queue", "low", "--prefix", prefix, "--redis-url", redis_url],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        results = [await job.wait_until_finished(timeout=30) for job in jobs]
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(20)

    assert results == [{"from": "high"}, {"from": "low"}]
