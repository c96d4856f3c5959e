"""QueueEvents: callbacks and iteration over a queue's events stream."""

from __future__ import annotations

import asyncio

from lazarus import Queue, QueueEvents, Worker

from .conftest import wait_until


async def test_events_deliver_each_transition_with_its_job_id(
    queue: Queue, redis_url: str, prefix: str
) -> None:
    events = QueueEvents("jobs", connection=redis_url, prefix=prefix, block_ms=100)
    await events.wait_until_ready()
    seen: list[tuple[str, str]] = []
    events.on("*", lambda args, _id: seen.append((args["event"], args.get("jobId", ""))))
    completed: asyncio.Future[dict[str, str]] = asyncio.get_running_loop().create_future()
    events.on("completed", lambda args, _id: completed.done() or completed.set_result(args))

    job = await queue.add("n", {"v": 1})
    worker = Worker("jobs", lambda j: "ok", connection=redis_url, prefix=prefix, block_timeout=0.2)
    args = await asyncio.wait_for(completed, 10)
    await worker.close()
    await events.close()

    assert args["jobId"] == job.id
    assert args["returnvalue"] == '"ok"'
    assert ("waiting", job.id) in seen
    assert ("active", job.id) in seen


async def test_events_before_wait_until_ready_are_not_delivered(
    queue: Queue, redis_url: str, prefix: str
) -> None:
    early = await queue.add("early", None)
    events = QueueEvents("jobs", connection=redis_url, prefix=prefix, block_ms=100)
    await events.wait_until_ready()
    late = await queue.add("late", None)

    ids: list[str] = []
    async for _name, args, _event_id in events:
        ids.append(args["jobId"])
        if args["jobId"] == late.id:
            break
    await events.close()

    assert early.id not in ids
    assert ids == [late.id]


async def test_a_failing_listener_does_not_stop_the_others(
    queue: Queue, redis_url: str, prefix: str
) -> None:
    events = QueueEvents("jobs", connection=redis_url, prefix=prefix, block_ms=100)
    await events.wait_until_ready()
    got: list[str] = []

    def broken(args: dict[str, str], _id: str) -> None:
        raise RuntimeError("listener bug")

    events.on("waiting", broken)
    events.on("waiting", lambda args, _id: got.append(args["jobId"]))
    job = await queue.add("n", None)

    async def delivered() -> bool:
        return got == [job.id]

    await wait_until(delivered, 10, "the second listener")
    await events.close()
