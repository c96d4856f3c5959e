"""A worker whose connections are killed over and over loses no outcome and orphans no job.

Redis drops a connection between running a script and sending its reply: the worker must not
run the script a second time (it would find its own lock released and drop the outcome, and
the job the first run claimed next would be orphaned until it stalled).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Callable

import redis.asyncio as aioredis
from redis.exceptions import ResponseError

from lazarus import Job, Queue, Worker

from .conftest import wait_until

HEALTHY, FLAKY, DOOMED = 400, 60, 30
KILL_EVERY = 0.02  # seconds


class Flaky(Exception):
    """What the processor raises."""


async def process(job: Job) -> str:
    await asyncio.sleep(0)  # give the killer a chance to land between calls
    kind = job.data["kind"]
    if kind == "doomed" or (kind == "flaky" and job.attempts_made == 0):
        raise Flaky(f"{kind} job {job.data['n']}")
    return "ok"


@contextlib.asynccontextmanager
async def killing(raw: aioredis.Redis, name: str) -> AsyncIterator[list[int]]:
    """Kill every connection called ``name`` every KILL_EVERY seconds; yields the kill count."""
    kills = [0]

    stop = asyncio.Event()

    async def kill_loop() -> None:
        while not stop.is_set():
            for client in await raw.client_list():
                if client.get("name") == name:
                    with contextlib.suppress(ResponseError):  # it may have gone already
                        kills[0] += int(await raw.execute_command("CLIENT KILL ID", client["id"]))
            # A fault injector's pace, not a wait for a state.
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), KILL_EVERY)

    task = asyncio.create_task(kill_loop())
    try:
        yield kills
    finally:
        stop.set()
        await task


async def test_killed_connections_cause_no_spurious_stall_and_no_lost_outcome(
    queue: Queue,
    dlq: Queue,
    raw: aioredis.Redis,
    redis_url: str,
    make_worker: Callable[..., Worker],
) -> None:
    jobs = [{"name": "n", "data": {"kind": "healthy", "n": i}} for i in range(HEALTHY)]
    jobs += [{"name": "n", "data": {"kind": "flaky", "n": i}, "attempts": 2} for i in range(FLAKY)]
    jobs += [
        {"name": "n", "data": {"kind": "doomed", "n": i}, "attempts": 2} for i in range(DOOMED)
    ]
    added = await queue.add_bulk(jobs)
    name = f"victim-{uuid.uuid4().hex[:8]}"
    separator = "&" if "?" in redis_url else "?"
    lost: list[str] = []

    async with killing(raw, name) as kills:
        worker = make_worker(
            process,
            connection=f"{redis_url}{separator}client_name={name}",
            concurrency=8,
            dead_letter_queue="jobs-dlq",
            lock_duration=5_000,
            stalled_interval=200,
        )
        worker.on("lost", lost.append)

        async def drained() -> bool:
            finished = await queue.get_completed_count() + await dlq.get_waiting_count()
            return finished == len(added)

        await wait_until(drained, timeout=60, message="every job completed or dead-lettered")
    await worker.close()

    assert kills[0] > 0
    assert await raw.llen(queue.keys.active) == 0
    assert await raw.zcard(queue.keys.leases) == 0
    for job in added:
        stored = await queue.get_job(job.id)
        if job.data["kind"] == "doomed":
            assert stored is None, f"{job.data} is still in the source queue"
            continue
        assert stored is not None
        assert await queue.get_job_state(job.id) == "completed"
        assert stored.stalled_counter == 0, f"{job.data} stalled"
        assert stored.attempts_made == (2 if job.data["kind"] == "flaky" else 1), job.data
    dead = await dlq.get_dead_letter_jobs()
    assert sorted(d.original_data["n"] for d in dead) == list(range(DOOMED))
    for letter in dead:
        meta = letter.dead_letter
        assert meta is not None
        assert meta.reason == "attempts_exhausted"
        assert meta.attempts_made == 2, letter.original_data
        assert [a.outcome for a in meta.attempts] == ["failed", "failed"], letter.original_data
    assert lost == []
