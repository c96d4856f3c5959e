"""``lazarus job cancel QUEUE ID [--reason TEXT]``: a job that has not ended fails as
cancelled, by a real worker; an ended job, a missing one or a bad reason writes nothing."""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio as aioredis

from lazarus import Job, Queue
from tests.conftest import (
    dead_letter_of,
    job_snapshot,
    run_until_stopped,
    wait_for_state,
)

from .conftest import Invoke, MakeWorker, dead_letter, parsed


async def test_a_waiting_job_is_cancelled_and_a_worker_fails_it_without_running_it(
    queue: Queue, invoke: Invoke, make_worker: MakeWorker
) -> None:
    first = await queue.add("n", {"i": 1})
    second = await queue.add("n", {"i": 2}, delay=3_600_000)

    document = parsed(await invoke(
        "job", "cancel", "jobs", second.id, "--reason", "duplicate order", "--json"
    ))  # fmt: skip

    assert document == {
        "queue": "jobs", "id": second.id, "state": "waiting", "reason": "duplicate order",
    }  # fmt: skip
    ran: list[str] = []

    async def process(j: Job) -> None:
        ran.append(j.id)

    make_worker(process, concurrency=1, dead_letter_queue=None)
    await wait_for_state(queue, second.id, "failed")
    await wait_for_state(queue, first.id, "completed")
    assert ran == [first.id]
    failed = await queue.get_job(second.id)
    assert failed is not None
    assert (failed.error_type, failed.failed_reason) == ("JobCancelledError", "duplicate order")


async def test_a_paused_queue_s_job_is_told_paused_and_the_reason_defaults(
    queue: Queue, invoke: Invoke
) -> None:
    await queue.pause()
    added = await queue.add("n", None, priority=3)

    result = await invoke("job", "cancel", "jobs", added.id)

    assert result.exit_code == 0, result.output
    assert f"job {added.id} of jobs: paused: the next worker to claim it" in result.stdout
    assert await queue.get_job_state(added.id) == "paused"
    stored = await queue.get_job(added.id)
    assert stored is not None and stored.error_type is None  # no worker has claimed it yet


async def test_a_running_job_is_told_active_and_its_worker_stops_it(
    queue: Queue, dlq: Queue, invoke: Invoke, make_worker: MakeWorker
) -> None:
    added, stopped = await run_until_stopped(queue, make_worker, dead_letter_queue="jobs-dlq")

    result = await invoke("job", "cancel", "jobs", added.id, "--reason", "withdrawn")

    assert result.exit_code == 0, result.output
    told = f"job {added.id} of jobs: active: its worker stops it at its next lease renewal"
    assert told in result.stdout
    await asyncio.wait_for(stopped.wait(), 10)
    letter = await dead_letter_of(dlq, added.id)
    assert letter.dead_letter is not None
    assert (letter.dead_letter.reason, letter.dead_letter.failed_reason) == (
        "cancelled", "withdrawn",
    )  # fmt: skip


async def test_an_ended_job_a_missing_one_or_a_missing_queue_exits_1_and_writes_nothing(
    queue: Queue, dlq: Queue, invoke: Invoke, make_worker: MakeWorker, raw: aioredis.Redis
) -> None:
    (letter,) = await dead_letter(queue, make_worker, ("charge", {"n": 1}))
    done = await queue.add("ok", None)
    worker = make_worker(lambda j: None)
    await wait_for_state(queue, done.id, "completed")
    await worker.close()

    for target, job_id in ((queue, done.id), (dlq, letter)):
        before = await job_snapshot(raw, target, job_id)

        result = await invoke("job", "cancel", target.name, job_id)

        assert result.exit_code == 1, result.output
        assert "it has ended" in result.output and job_id in result.output
        assert await job_snapshot(raw, target, job_id) == before
    no_job = await invoke("job", "cancel", "jobs", "nope")
    no_queue = await invoke("job", "cancel", "nope", done.id)
    assert no_job.exit_code == 1 and "'nope'" in no_job.output
    assert no_queue.exit_code == 1 and "no queue 'nope'" in no_queue.output
    assert not await raw.exists(queue.keys.job("nope"))


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("--reason", ""), "'--reason': reason must not be empty"),
        (("--reason", "x" * 5000), "'--reason': reason must be at most 4096 bytes"),
        (("--reason", "\udcff"), "'--reason': reason has a lone surrogate"),
    ],
)
async def test_a_bad_reason_exits_2_naming_it_and_writes_nothing(
    queue: Queue, invoke: Invoke, raw: aioredis.Redis, args: tuple[str, ...], named: str
) -> None:
    added = await queue.add("n", None, delay=60_000)
    before = await job_snapshot(raw, queue, added.id)

    result = await invoke("job", "cancel", "jobs", added.id, *args)

    assert result.exit_code == 2, result.output
    assert named in result.output and "Traceback" not in result.output
    assert await job_snapshot(raw, queue, added.id) == before


async def test_a_malformed_id_exits_2_naming_it(queue: Queue, invoke: Invoke) -> None:
    await queue.add("n", None)  # registers "jobs"

    result = await invoke("job", "cancel", "jobs", "")

    assert result.exit_code == 2 and "'ID'" in result.output
