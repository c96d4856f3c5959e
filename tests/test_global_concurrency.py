"""Global concurrency: at most n jobs of a queue active at once across every worker, enforced
where jobs are claimed (includes/claim.lua), with the room a finished job leaves waking a
worker that the cap refused (includes/enqueue.lua's wake_capped)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable

import pytest
import redis.asyncio as aioredis

from lazarus import Job, Queue, Worker, _scripts
from lazarus.sync import Queue as SyncQueue

from .conftest import wait_until

MakeWorker = Callable[..., Worker]


class Gate:
    """A processor whose jobs run until released, counting how many run at once."""

    def __init__(self) -> None:
        self.running = self.most = self.done = 0
        self.release = asyncio.Event()

    async def __call__(self, job: Job) -> None:
        self.running += 1
        self.most = max(self.most, self.running)
        try:
            await self.release.wait()
        finally:
            self.running -= 1
            self.done += 1

    def at(self, count: int) -> Callable[[], asyncio.Future[bool]]:
        async def reached() -> bool:
            return self.running >= count

        return reached  # type: ignore[return-value]


async def test_the_cap_holds_across_every_worker_and_every_job_runs(
    queue: Queue, make_worker: MakeWorker
) -> None:
    # Given a cap of 2 and two workers of 4 slots each
    await queue.set_global_concurrency(2)
    await queue.add_bulk([{"name": "n"}] * 12)
    running = most = 0

    async def work(job: Job) -> None:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0.02)  # the job's own work
        running -= 1

    make_worker(work, concurrency=4)
    make_worker(work, concurrency=4)

    async def completed() -> bool:
        return await queue.get_completed_count() == 12

    await wait_until(completed, timeout=20)
    # Then two ran at once, never more
    assert most == 2
    assert await queue.get_global_concurrency() == 2


async def test_a_job_that_finishes_makes_room_for_a_worker_the_cap_refused(
    queue: Queue, make_worker: MakeWorker, raw: aioredis.Redis
) -> None:
    # Given a cap of 1, a job running in worker A (of two queues: its outcomes claim no next
    # job), and worker B, refused, waiting for room on the marker for up to 30 s
    await queue.set_global_concurrency(1)
    gate = Gate()
    await queue.add("n", job_id="first")
    first_worker = make_worker(gate, [queue.name, "{jobs}-other"], concurrency=1,
                               block_timeout=30)  # fmt: skip
    await wait_until(gate.at(1))
    ran: list[str] = []

    async def record(job: Job) -> None:
        ran.append(job.id)

    make_worker(record, concurrency=1, block_timeout=30)
    await queue.add("n", job_id="second")

    async def refused() -> bool:  # B took the marker the add set, and its claim came back empty
        return await raw.zcard(queue.keys.marker) == 0

    await wait_until(refused)

    # When worker A stops after its job, so that no claim of its own takes the room either
    closing = asyncio.create_task(first_worker.close())
    gate.release.set()
    await closing

    # Then worker B, woken by the room the job left, runs the second job
    await wait_until(lambda: asyncio.sleep(0, ran == ["second"]), timeout=10)


async def test_raising_or_removing_the_cap_wakes_the_waiting_workers(
    queue: Queue, make_worker: MakeWorker, raw: aioredis.Redis
) -> None:
    await queue.set_global_concurrency(1)
    await queue.add_bulk([{"name": "n"}] * 4)
    gate = Gate()
    make_worker(gate, concurrency=2, block_timeout=30)
    make_worker(gate, concurrency=2, block_timeout=30)
    await wait_until(gate.at(1))

    await queue.set_global_concurrency(3)
    await wait_until(gate.at(3), timeout=10)

    await queue.remove_global_concurrency()
    await wait_until(gate.at(4), timeout=10)
    assert await queue.get_global_concurrency() is None
    assert gate.most == 4
    gate.release.set()


async def test_a_cap_lowered_below_the_running_jobs_lets_them_finish_and_starts_none(
    queue: Queue, make_worker: MakeWorker
) -> None:
    await queue.add_bulk([{"name": "n"}] * 5)
    gate = Gate()
    make_worker(gate, concurrency=3)
    await wait_until(gate.at(3))

    await queue.set_global_concurrency(1)
    gate.release.set()

    async def completed() -> bool:
        return await queue.get_completed_count() == 5

    await wait_until(completed, timeout=15)
    # The three running finished; the two left ran one at a time
    assert gate.done == 5


async def test_claims_stop_at_the_cap_and_leave_no_marker_for_a_worker_it_refuses(
    queue: Queue, raw: aioredis.Redis
) -> None:
    k = queue.keys
    await queue.add_bulk([{"name": "n"}] * 5)
    await queue.set_global_concurrency(2)
    keys = [*k.group, k.reply("w1", "claim")]
    args = [1_000_000, "w1", 30_000, 5, 1000]
    reply = await _scripts.load("claim_jobs")(raw, keys, [*args, uuid.uuid4().hex])
    assert len(reply) - 1 == 2
    assert await raw.llen(k.active) == 2

    await raw.delete(k.marker)  # as a worker's wait takes it
    reply = await _scripts.load("claim_jobs")(raw, keys, [*args, uuid.uuid4().hex])
    assert len(reply) - 1 == 0
    assert await raw.zcard(k.marker) == 0  # the jobs left would wake workers for nothing


async def test_an_outcome_that_claims_no_next_job_wakes_a_worker_for_the_room(
    queue: Queue, raw: aioredis.Redis
) -> None:
    k = queue.keys
    await queue.add_bulk([{"name": "n", "job_id": i} for i in ("a", "b")])
    await queue.set_global_concurrency(1)
    keys = [*k.group, k.reply("w1", "claim")]
    (_, (job_id, token, *_)) = await _scripts.load("claim_jobs")(
        raw, keys, [1_000_000, "w1", 30_000, 5, 1000, uuid.uuid4().hex]
    )
    await raw.delete(k.marker)

    await _scripts.load("complete_job")(
        raw, [*k.group, k.job(job_id), k.completed, k.reply("w1", "0")],
        [job_id, token, 1_000_005, "null", -1, -1, 0, 1000, 0, "w1", 30_000],
    )  # fmt: skip

    assert await raw.zcard(k.marker) == 1


@pytest.mark.parametrize("bad", [0, -1, 2**31, "2", 1.5, None, True])
async def test_a_bad_cap_names_the_field_and_writes_nothing(
    queue: Queue, raw: aioredis.Redis, bad: object
) -> None:
    with pytest.raises((TypeError, ValueError), match="concurrency"):
        await queue.set_global_concurrency(bad)  # type: ignore[arg-type]
    assert not await raw.exists(queue.keys.meta)
    assert not await raw.exists(queue.keys.marker)


def test_the_sync_queue_sets_and_removes_the_cap(redis_url: str, prefix: str) -> None:
    with SyncQueue("jobs", connection=redis_url, prefix=prefix) as queue:
        queue.set_global_concurrency(7)
        assert queue.get_global_concurrency() == 7
        queue.remove_global_concurrency()
        assert queue.get_global_concurrency() is None
