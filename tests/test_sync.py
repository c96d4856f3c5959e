"""lazarus.sync: the queue and dead letter operations from code without an event loop."""

from __future__ import annotations

import asyncio
import inspect
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

import lazarus
from lazarus import DeadLetterFilter, Job, UnrecoverableError, sync
from tests.conftest import wait_until


def _lazarus_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("lazarus-sync-")]


def test_every_async_method_has_a_synchronous_twin() -> None:
    # Given the public coroutine methods of the async classes
    for async_cls, sync_cls in (
        (lazarus.Queue, sync.Queue),
        (lazarus.DeadLetterView, sync.DeadLetterView),
    ):
        public = {
            name
            for name, member in inspect.getmembers(async_cls)
            if not name.startswith("_")
            and (inspect.iscoroutinefunction(member) or inspect.isasyncgenfunction(member))
        }
        # Then the sync class has each of them, not as a coroutine function
        for name in public:
            twin = getattr(sync_cls, name, None)
            assert twin is not None, f"{sync_cls.__name__}.{name} is missing"
            assert not inspect.iscoroutinefunction(twin), name


def test_a_module_level_queue_serves_many_threads(redis_url: str, prefix: str) -> None:
    # Given one queue shared by a web app's request threads
    queue = sync.Queue("web", connection=redis_url, prefix=prefix)
    try:
        # When 8 threads add 25 jobs each, as request handlers do
        def handle(worker: int) -> list[str]:
            return [queue.add("signup", {"w": worker, "i": i}).id for i in range(25)]

        with ThreadPoolExecutor(max_workers=8) as pool:
            ids = [job_id for batch in pool.map(handle, range(8)) for job_id in batch]
        # Then every job is stored, and can be read back from yet another thread
        assert queue.get_job_counts()["waiting"] == 200
        job = queue.get_job(ids[-1])
        assert job is not None and job.data == {"w": 7, "i": 24}
    finally:
        queue.close()


def test_calls_work_inside_and_between_event_loops_of_the_caller(
    redis_url: str, prefix: str
) -> None:
    # Given a queue used the way a Flask view using asyncio.run per request would
    queue = sync.Queue("loops", connection=redis_url, prefix=prefix)

    async def view(n: int) -> str:
        return queue.add("page", {"n": n}).id  # a blocking call inside someone's loop

    try:
        # When each request runs in an event loop of its own, which is then closed
        for n in range(3):
            asyncio.run(view(n))
        queue.add("plain", {"n": 3})
        # Then no call found a closed loop, and all four jobs are there
        assert [j.data["n"] for j in queue.get_waiting()] == [3, 2, 1, 0]
    finally:
        queue.close()


def test_bad_input_raises_the_async_error_and_writes_nothing(redis_url: str, prefix: str) -> None:
    queue = sync.Queue("checks", connection=redis_url, prefix=prefix)
    try:
        with pytest.raises(ValueError, match="attempts"):
            queue.add("job", {}, attempts=0)
        with pytest.raises(ValueError, match=r"jobs\[1\]"):
            queue.add_bulk([{"name": "ok"}, {"name": ""}])
        assert queue.get_job_counts()["waiting"] == 0
    finally:
        queue.close()


def test_close_stops_the_loop_thread_and_later_calls_raise(redis_url: str, prefix: str) -> None:
    # Given a queue that has been used (its loop thread started)
    queue = sync.Queue("closing", connection=redis_url, prefix=prefix)
    queue.add("job")
    assert "lazarus-sync-queue-closing" in _lazarus_threads()
    # When it is closed
    queue.close()
    # Then its thread is gone and it refuses further calls
    assert "lazarus-sync-queue-closing" not in _lazarus_threads()
    with pytest.raises(RuntimeError, match="closed"):
        queue.get_job_counts()
    queue.close()  # closing twice is harmless


def test_a_forked_child_uses_connections_of_its_own(redis_url: str, prefix: str) -> None:
    # Given a queue whose loop and connections were made in the parent
    queue = sync.Queue("forked", connection=redis_url, prefix=prefix)
    try:
        queue.add("parent")
        # When a forked child (a pre-forking web server's worker) adds a job
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            code = 1
            try:
                queue.add("child", job_id="from-child")
                code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        # Then the child succeeded, and the parent's queue still works
        assert os.waitstatus_to_exitcode(status) == 0
        assert queue.get_job("from-child") is not None
        assert queue.get_job_counts()["waiting"] == 2
    finally:
        queue.close()


async def test_dead_letter_operations_run_synchronously(
    redis_url: str, prefix: str, make_worker: Any
) -> None:
    # Given two jobs dead-lettered by a worker
    async def refuse(job: Job) -> None:
        raise UnrecoverableError(f"bad {job.data}")

    async with lazarus.Queue("jobs", connection=redis_url, prefix=prefix) as source:
        await source.add_bulk([{"name": "a", "data": 1}, {"name": "b", "data": 2}])
    dlq = sync.Queue("jobs-dlq", connection=redis_url, prefix=prefix)
    make_worker(refuse, dead_letter_queue="jobs-dlq")

    async def two_dead() -> bool:
        return await asyncio.to_thread(dlq.get_dead_letter_count) == 2

    await wait_until(two_dead, message="two dead letters")

    def operate() -> tuple[int, list[tuple[str, str]], int, int]:
        matched = dlq.count_dead_letters(DeadLetterFilter(name="a"))
        rows = list(dlq.iter_dead_letter_ids())
        dlq.purge_dead_letter(rows[0][0])
        left = dlq.get_dead_letter_count()
        return matched, rows, left, dlq.replay_all_dead_letters()

    try:
        # When an operator script counts, walks, purges and replays them
        matched, rows, left, replayed = await asyncio.to_thread(operate)
        # Then each operation did what its async twin does
        assert matched == 1
        assert [source for _, source in rows] == ["jobs", "jobs"]
        assert (left, replayed) == (1, 1)
        view = sync.DeadLetterView(redis_url, prefix=prefix)
        assert await asyncio.to_thread(view.dead_letter_queues) == ["jobs-dlq"]
        await asyncio.to_thread(view.close)
    finally:
        await asyncio.to_thread(dlq.close)


def test_list_queues_runs_without_a_loop(redis_url: str, prefix: str) -> None:
    with sync.Queue("listed", connection=redis_url, prefix=prefix) as queue:
        queue.add("job")
        assert sync.list_queues(redis_url, prefix=prefix) == ["listed"]
