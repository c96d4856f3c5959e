"""Progress and logs: job.update_progress, job.log, queue.get_job_logs, and where they go."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
import redis.asyncio as aioredis

from lazarus import Job, JobNotFoundError, Queue, UnrecoverableError, Worker, _scripts

from .test_worker import on_count

MakeWorker = Callable[..., Worker]


async def events_named(raw: aioredis.Redis, queue: Queue, name: str) -> list[dict[str, str]]:
    return [f for _, f in await raw.xrange(queue.keys.events) if f["event"] == name]


async def test_a_processor_reports_progress_seen_in_the_job_and_as_events(
    queue: Queue, raw: aioredis.Redis, make_worker: MakeWorker
) -> None:
    seen: list[object] = []

    async def process(job: Job) -> None:
        await job.update_progress(40)
        await job.update_progress({"done": 3, "of": 4})
        seen.append(job.progress)

    job = await queue.add("n")
    worker = make_worker(process)
    await asyncio.wait_for(on_count(worker, "completed", 1).wait(), 10)

    stored = await queue.get_job(job.id)
    assert stored is not None and stored.progress == {"done": 3, "of": 4}
    assert seen == [{"done": 3, "of": 4}]
    events = await events_named(raw, queue, "progress")
    assert [(e["jobId"], e["data"]) for e in events] == [
        (job.id, "40"), (job.id, '{"done":3,"of":4}')
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("value", "error"), [("50%", TypeError), (True, TypeError), (float("nan"), ValueError)]
)
async def test_progress_must_be_a_number_or_a_dict(
    queue: Queue, raw: aioredis.Redis, value: object, error: type[Exception]
) -> None:
    job = await queue.add("n")

    with pytest.raises(error, match="progress"):
        await job.update_progress(value)

    assert await raw.hget(queue.keys.job(job.id), "progress") is None


async def test_progress_or_logs_of_a_missing_job_raise_job_not_found(queue: Queue) -> None:
    job = await queue.add("n")
    await queue.remove(job.id)

    with pytest.raises(JobNotFoundError):
        await job.update_progress(1)
    with pytest.raises(JobNotFoundError):
        await job.log("late")
    assert (await queue.get_job_logs(job.id)).count == 0


async def test_a_job_not_from_a_queue_cannot_write() -> None:
    from lazarus import JobOptions

    job = Job(id="x", name="n", original_data=None, opts=JobOptions(), queue_name="q",
              timestamp=0)  # fmt: skip

    with pytest.raises(RuntimeError, match="not bound"):
        await job.log("x")


async def test_logs_are_read_back_in_order_paged_and_newest_first(queue: Queue) -> None:
    job = await queue.add("n")
    for i in range(5):
        assert await job.log(f"line {i}") == i + 1

    every = await queue.get_job_logs(job.id)
    page = await queue.get_job_logs(job.id, 1, 2)
    newest = await queue.get_job_logs(job.id, 0, 1, asc=False)

    assert every.logs == [f"line {i}" for i in range(5)] and every.count == 5
    assert page.logs == ["line 1", "line 2"] and page.count == 5
    assert newest.logs == ["line 4", "line 3"]


async def test_logs_keep_the_newest_lines_and_cut_long_ones(queue: Queue) -> None:
    job = await queue.add("n")
    for i in range(6):
        kept = await queue.add_job_log(job.id, f"line {i}", keep_last=3)
    await job.log("x" * 20_000, keep_last=3)

    logs = await queue.get_job_logs(job.id)

    assert kept == 3
    assert logs.logs[:2] == ["line 4", "line 5"]
    assert len(logs.logs[2].encode()) <= 8 * 1024 and "bytes cut" in logs.logs[2]


@pytest.mark.parametrize(("line", "keep", "error"), [(5, 10, TypeError), ("x", 0, ValueError)])
async def test_bad_log_input_raises_before_writing(
    queue: Queue, line: object, keep: int, error: type[Exception]
) -> None:
    job = await queue.add("n")

    with pytest.raises(error):
        await job.log(line, keep_last=keep)  # type: ignore[arg-type]

    assert (await queue.get_job_logs(job.id)).count == 0


async def test_a_dead_letter_keeps_the_progress_and_logs_and_a_replay_gets_a_copy(
    queue: Queue, dlq: Queue, raw: aioredis.Redis, make_worker: MakeWorker
) -> None:
    async def process(job: Job) -> None:
        await job.log("fetched the order")
        await job.update_progress(50)
        raise UnrecoverableError("card declined")

    job = await queue.add("charge")
    worker = make_worker(process, dead_letter_queue="jobs-dlq")
    ids: list[str] = []
    worker.on("deadLettered", lambda j, dl_id: ids.append(dl_id))
    await asyncio.wait_for(on_count(worker, "deadLettered", 1).wait(), 10)
    await worker.close()

    dead = await dlq.peek_dead_letter(ids[0])
    assert dead is not None and dead.progress == 50
    assert (await dlq.get_job_logs(ids[0])).logs == ["fetched the order"]
    assert await raw.exists(queue.keys.logs(job.id)) == 0

    new_id = await dlq.replay_dead_letter(ids[0])

    assert (await queue.get_job_logs(new_id)).logs == ["fetched the order"]
    # the dead letter, which stays (processing) until the replay ends, keeps its own copy
    assert (await dlq.get_job_logs(ids[0])).logs == ["fetched the order"]


async def test_a_replay_that_fails_again_gives_its_logs_back_to_its_dead_letter(
    queue: Queue, dlq: Queue, raw: aioredis.Redis, make_worker: MakeWorker
) -> None:
    # Given a dead letter with a log line, replayed, and its replay logging a line of its own
    async def process(job: Job) -> None:
        await job.log(f"run {job.data['run']}")
        raise UnrecoverableError("card declined")

    worker = make_worker(process, dead_letter_queue="jobs-dlq")
    ids: list[str] = []
    worker.on("deadLettered", lambda j, dl_id: ids.append(dl_id))
    first, second = on_count(worker, "deadLettered", 1), on_count(worker, "deadLettered", 2)
    await queue.add("charge", {"run": 1})
    await asyncio.wait_for(first.wait(), 10)
    new_id = await dlq.replay_dead_letter(ids[0])

    # When the replay fails for good and goes back into the dead letter
    await asyncio.wait_for(second.wait(), 10)

    # Then the dead letter holds the lines of both runs, and the replay left no logs behind
    assert ids == [ids[0], ids[0]]
    assert (await dlq.get_job_logs(ids[0])).logs == ["run 1", "run 1"]
    assert await raw.exists(queue.keys.job(new_id), queue.keys.logs(new_id)) == 0


async def test_logs_go_with_the_job_removed_by_retention_or_by_hand(
    queue: Queue, raw: aioredis.Redis, make_worker: MakeWorker
) -> None:
    async def process(job: Job) -> None:
        await job.log("working")

    kept = await queue.add("n")
    await kept.log("waiting")
    retained = await queue.add("n", remove_on_complete=True)
    worker = make_worker(process, autorun=False)
    await queue.remove(kept.id)
    running = asyncio.create_task(worker.run())
    await asyncio.wait_for(on_count(worker, "completed", 1).wait(), 10)
    await worker.close()
    await running

    assert await raw.exists(queue.keys.logs(kept.id), queue.keys.logs(retained.id)) == 0


async def test_purging_a_dead_letter_deletes_its_logs(
    dlq: Queue, raw: aioredis.Redis, queue: Queue, make_worker: MakeWorker
) -> None:
    async def process(job: Job) -> None:
        await job.log("about to fail")
        raise UnrecoverableError("no")

    await queue.add("n")
    worker = make_worker(process, dead_letter_queue="jobs-dlq")
    ids: list[str] = []
    worker.on("deadLettered", lambda j, dl_id: ids.append(dl_id))
    await asyncio.wait_for(on_count(worker, "deadLettered", 1).wait(), 10)
    assert await raw.exists(dlq.keys.logs(ids[0])) == 1

    await dlq.purge_dead_letter(ids[0])

    assert await raw.exists(dlq.keys.logs(ids[0])) == 0


async def test_add_log_script_trims_to_keep_and_refuses_a_missing_job(
    queue: Queue, raw: aioredis.Redis
) -> None:
    job = await queue.add("n")
    keys = [queue.keys.job(job.id), queue.keys.logs(job.id)]
    script = _scripts.load("add_log")

    assert [await script(raw, keys, [f"l{i}", 2]) for i in range(3)] == [1, 2, 2]
    assert await raw.lrange(keys[1], 0, -1) == ["l1", "l2"]
    assert await script(raw, [queue.keys.job("gone"), queue.keys.logs("gone")], ["x", 2]) == -1
    assert await raw.exists(queue.keys.logs("gone")) == 0
