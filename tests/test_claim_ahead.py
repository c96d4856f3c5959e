"""Claiming ahead: a slot whose jobs are short holds its next job while the current one runs,
never runs more jobs at once than its concurrency, and gives a held job back when its slot
stays busy or the worker stops."""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import redis.asyncio as aioredis

from lazarus import Job, Queue, Worker, _ahead, _scripts
from lazarus._keys import QueueKeys

from .conftest import wait_until
from .faults import busy, private_redis

MakeWorker = Callable[..., Worker]


class Scene:
    """Three jobs for a concurrency-1 worker: ``first`` is short (so its slot claims ahead),
    ``slow`` runs until ``release`` is set, and ``held`` is claimed ahead meanwhile. ``ran``
    lists who ran each job (the tag of ``processor``)."""

    def __init__(self, jobs: list[Job]) -> None:
        self.first, self.slow, self.held = jobs
        self.release = asyncio.Event()
        self.ran: dict[str, list[str]] = collections.defaultdict(list)

    @classmethod
    async def add(cls, queue: Queue) -> Scene:
        return cls(await queue.add_bulk([{"name": n, "data": None} for n in "abc"]))

    def processor(self, tag: str = "worker") -> Callable[[Job], Awaitable[None]]:
        async def run(job: Job) -> None:
            self.ran[job.id].append(tag)
            if job.id == self.first.id:
                await asyncio.sleep(0.005)
            elif job.id == self.slow.id:
                await self.release.wait()

        return run


async def _state_is(queue: Queue, job_id: str, state: str) -> bool:
    return await queue.get_job_state(job_id) == state


async def test_a_slot_of_short_jobs_holds_the_next_one_while_one_runs(
    queue: Queue, make_worker: MakeWorker
) -> None:
    jobs = await queue.add_bulk([{"name": "n", "data": i} for i in range(30)])
    ids = [job.id for job in jobs]
    running, most = [0], [0]
    seen_ahead: list[int] = []

    async def short(job: Job) -> None:
        running[0] += 1
        most[0] = max(most[0], running[0])
        await asyncio.sleep(0.005)
        # The next job is claimed (active) before this one ends: the slot holds it.
        index = job.data
        if index + 1 < len(ids) and await queue.get_job_state(ids[index + 1]) == "active":
            seen_ahead.append(index)
        running[0] -= 1

    worker = make_worker(short, concurrency=1)
    completed = asyncio.Event()
    count = collections.Counter[str]()

    def done(job: Job, _: object) -> None:
        count[job.id] += 1
        if len(count) == len(ids):
            completed.set()

    worker.on("completed", done)
    await asyncio.wait_for(completed.wait(), 20)

    assert most[0] == 1  # concurrency 1: never two processors at once
    assert set(count) == set(ids) and set(count.values()) == {1}
    assert len(seen_ahead) >= len(ids) // 2  # the next job was held while most jobs ran
    for job_id in ids:
        stored = await queue.get_job(job_id)
        assert stored is not None and stored.attempts_made == 1


async def test_without_claim_ahead_no_job_is_claimed_before_its_slot_is_free(
    queue: Queue, make_worker: MakeWorker
) -> None:
    jobs = await queue.add_bulk([{"name": "n", "data": i} for i in range(10)])
    ids = [job.id for job in jobs]
    ahead: list[int] = []

    async def short(job: Job) -> None:
        await asyncio.sleep(0.005)
        index = job.data
        if index + 1 < len(ids) and await queue.get_job_state(ids[index + 1]) == "active":
            ahead.append(index)

    worker = make_worker(short, concurrency=1, claim_ahead=False)
    completed = asyncio.Event()
    worker.on("completed", lambda job, _: job.data == len(ids) - 1 and completed.set())
    await asyncio.wait_for(completed.wait(), 20)

    assert ahead == []


def test_claim_ahead_must_be_a_bool() -> None:
    with pytest.raises(TypeError, match="claim_ahead must be a bool"):
        Worker("jobs", lambda job: None, claim_ahead="yes", autorun=False)  # type: ignore[arg-type]


async def test_a_job_held_ahead_goes_back_to_the_queue_when_its_slot_stays_busy(
    queue: Queue, make_worker: MakeWorker, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_ahead, "HOLD", 0.3)
    scene = await Scene.add(queue)
    slow, held = scene.slow, scene.held
    ran, release = scene.ran, scene.release
    busy = make_worker(scene.processor("busy"), concurrency=1)
    # The slot runs the slow job and holds the third; once that has waited HOLD, it is back
    # in the queue, under no lock.
    await wait_until(lambda: _state_is(queue, slow.id, "active"), message="the slow job runs")
    await wait_until(lambda: _state_is(queue, held.id, "active"), message="the third is held")
    await wait_until(lambda: _state_is(queue, held.id, "waiting"), message="the third goes back")
    assert ran[held.id] == []

    other = make_worker(scene.processor("other"), concurrency=1)
    done = asyncio.Event()
    other.on("completed", lambda job, _: job.id == held.id and done.set())
    await asyncio.wait_for(done.wait(), 10)
    release.set()
    await wait_until(lambda: _state_is(queue, slow.id, "completed"), message="the slow job ends")

    assert ran[held.id] == ["other"]  # taken by the free worker while the slot was busy
    assert ran[slow.id] == ["busy"]
    stored = await queue.get_job(held.id)
    assert stored is not None and stored.attempts_made == 1
    await busy.close(timeout=5)


async def test_a_job_held_ahead_when_the_worker_stops_goes_back_to_the_queue(
    queue: Queue, make_worker: MakeWorker, monkeypatch: pytest.MonkeyPatch, raw: aioredis.Redis,
    prefix: str,
) -> None:  # fmt: skip
    monkeypatch.setattr(_ahead, "HOLD", 60.0)  # only the shutdown gives it back
    scene = await Scene.add(queue)
    slow, held = scene.slow, scene.held
    worker = make_worker(scene.processor(), concurrency=1)
    await wait_until(lambda: _state_is(queue, held.id, "active"), message="the third is held")
    closing = asyncio.create_task(worker.close(timeout=10))
    scene.release.set()
    await asyncio.wait_for(closing, 10)

    assert scene.ran[held.id] == []  # the held job never started
    assert await queue.get_job_state(slow.id) == "completed"
    assert await queue.get_job_state(held.id) == "waiting"
    stored = await queue.get_job(held.id)
    assert stored is not None and stored.attempts_made == 0
    assert await raw.zscore(QueueKeys(prefix, "jobs").leases, held.id) is None  # no lease left


async def test_jobs_running_and_held_when_close_times_out_both_go_back(
    queue: Queue, make_worker: MakeWorker, monkeypatch: pytest.MonkeyPatch, raw: aioredis.Redis,
    prefix: str,
) -> None:  # fmt: skip
    monkeypatch.setattr(_ahead, "HOLD", 60.0)
    first, slow, held = await queue.add_bulk([{"name": n, "data": None} for n in "abc"])

    async def run(job: Job) -> None:
        if job.id == first.id:
            await asyncio.sleep(0.005)
        elif job.id == slow.id:
            await asyncio.Event().wait()  # until shutdown cancels it

    worker = make_worker(run, concurrency=1)
    await wait_until(lambda: _state_is(queue, held.id, "active"), message="the third is held")
    await asyncio.wait_for(worker.close(timeout=0.2), 10)

    assert await queue.get_job_state(slow.id) == "waiting"  # cut short, handed back
    assert await queue.get_job_state(held.id) == "waiting"  # never started, handed back
    assert await raw.zcard(QueueKeys(prefix, "jobs").leases) == 0


async def test_a_held_job_redis_cannot_take_back_stays_with_its_slot_and_runs_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:  # Redis busy (a long script) when the hold runs out: the hand-back is refused
    monkeypatch.setattr(_ahead, "HOLD", 0.3)
    caplog.set_level(logging.WARNING, logger="lazarus.worker")
    with private_redis() as server:
        admin = aioredis.Redis.from_url(server.url, decode_responses=True)
        queue = Queue("jobs", connection=server.url)
        scene = await Scene.add(queue)
        held = scene.held

        async def refused() -> bool:
            return any(f"cannot hand job {held.id} back" in r.getMessage() for r in caplog.records)

        worker = Worker("jobs", scene.processor(), connection=server.url, concurrency=1)
        try:
            await wait_until(lambda: _state_is(queue, held.id, "active"), message="held")
            # Its hold runs out while Redis answers BUSY to everything: the job cannot go back.
            async with busy(server, admin):
                await wait_until(refused, message="a refused hand-back")
            scene.release.set()
            await wait_until(lambda: _state_is(queue, held.id, "completed"), message="it ran")

            assert scene.ran[held.id] == ["worker"]  # in its own slot, once
            stored = await queue.get_job(held.id)
            assert stored is not None and stored.attempts_made == 1
            assert [attempt.outcome for attempt in stored.attempts] == []  # never stalled
        finally:
            await worker.close(timeout=5)
            await queue.close()
            await admin.aclose()


async def test_a_held_job_whose_hand_back_reply_is_lost_is_not_run_by_its_slot_too(
    queue: Queue, make_worker: MakeWorker, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a slot holding a job ahead while its slow job runs, and a connection that loses
    # the reply of the first hand-back once Redis has run it
    monkeypatch.setattr(_ahead, "HOLD", 0.3)
    load, lost = _scripts.load, asyncio.Event()

    def losing(name: str) -> Any:
        script = load(name)
        if name != "release_job":
            return script

        async def call(*args: Any) -> Any:
            reply = await script(*args)
            if not lost.is_set():
                lost.set()
                raise TimeoutError
            return reply

        return call

    monkeypatch.setattr(_scripts, "load", losing)
    scene = await Scene.add(queue)
    held = scene.held
    worker = make_worker(scene.processor(), concurrency=1)

    # When its hold runs out and the hand-back's reply is lost, before the slow job ends
    await asyncio.wait_for(lost.wait(), 10)
    scene.release.set()

    # Then the job is not run by that slot as well as by the claim that takes it back: once
    await wait_until(lambda: _state_is(queue, held.id, "completed"), message="it ran")
    await wait_until(lambda: _state_is(queue, scene.slow.id, "completed"), message="slow")
    await worker.close(timeout=5)
    assert scene.ran[held.id] == ["worker"]
    stored = await queue.get_job(held.id)
    assert stored is not None and stored.attempts_made == 1
