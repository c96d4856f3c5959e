"""``lazarus job``: retry, promote, change or remove one job of a queue; promote every
delayed one."""

from __future__ import annotations

import pytest
import redis.asyncio as aioredis

from lazarus import Job, Queue
from tests.conftest import job_snapshot, wait_until

from .conftest import Invoke, MakeWorker, dead_letter, parsed


async def test_promote_runs_a_delayed_job_now(queue: Queue, invoke: Invoke) -> None:
    await queue.pause()
    job = await queue.add("n", None, delay=3_600_000)

    document = parsed(await invoke("job", "promote", "jobs", job.id, "--json"))

    assert document == {"queue": "jobs", "id": job.id, "state": "paused"}  # waits, paused
    assert await queue.get_job_state(job.id) == "paused"
    again = await invoke("job", "promote", "jobs", job.id)
    assert again.exit_code == 1 and job.id in again.output


async def test_retry_moves_a_failed_job_back_to_waiting(
    queue: Queue, invoke: Invoke, make_worker: MakeWorker
) -> None:
    job = await queue.add("n", None)

    async def boom(_: Job) -> None:
        raise RuntimeError("boom")

    worker = make_worker(boom, dead_letter_queue=None)

    async def failed() -> bool:
        return await queue.get_job_state(job.id) == "failed"

    await wait_until(failed)
    await worker.close()
    await queue.pause()

    result = await invoke("job", "retry", "jobs", job.id)

    assert result.exit_code == 0, result.output
    assert f"job {job.id} of jobs: paused" in result.stdout
    assert await queue.get_failed_count() == 0


async def test_remove_deletes_a_waiting_job(queue: Queue, invoke: Invoke) -> None:
    job = await queue.add("n", None, delay=60_000)

    result = await invoke("job", "remove", "jobs", job.id)

    assert result.exit_code == 0 and "removed" in result.stdout
    assert await queue.get_job(job.id) is None


async def test_promote_all_runs_every_delayed_job_now_after_a_dry_run(
    queue: Queue, invoke: Invoke
) -> None:
    await queue.pause()
    jobs = [await queue.add("n", None, delay=3_600_000 + i) for i in range(3)]

    dry = await invoke("job", "promote-all", "jobs", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert "3 delayed jobs of jobs would be promoted" in dry.stdout
    assert await queue.get_delayed_count() == 3
    document = parsed(await invoke("job", "promote-all", "jobs", "--json"))

    assert document == {"queue": "jobs", "promoted": 3, "dryRun": False}
    assert [await queue.get_job_state(j.id) for j in jobs] == ["paused"] * 3
    await queue.add("n", None, delay=3_600_000)
    result = await invoke("job", "promote-all", "jobs")
    assert result.exit_code == 0 and "promoted 1 delayed job of jobs" in result.stdout


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("promote", "jobs", ""), "job_id"),
        (("retry", "nope", "1"), "no queue 'nope'"),
        (("promote-all", "nope"), "no queue 'nope'"),
        (("promote-all", ""), "QUEUE"),
    ],
)
async def test_bad_input_is_refused_naming_what_is_wrong(
    queue: Queue, invoke: Invoke, args: tuple[str, ...], named: str
) -> None:
    await queue.add("n", None)  # registers "jobs"

    result = await invoke("job", *args)

    assert result.exit_code in (1, 2) and named in result.output


# -- change -----------------------------------------------------------------------------------


async def test_change_sets_data_priority_and_delay_at_once(
    queue: Queue, invoke: Invoke, raw: aioredis.Redis
) -> None:
    added = await queue.add("n", {"v": 1}, delay=60_000)

    document = parsed(await invoke(
        "job", "change", "jobs", added.id, "--data", '{"v": 2}', "--priority", "3",
        "--delay", "3600000", "--json",
    ))  # fmt: skip

    assert document == {"queue": "jobs", "id": added.id, "state": "delayed",
                        "changed": ["data", "priority", "delay"]}  # fmt: skip
    stored = await queue.get_job(added.id)
    assert stored is not None and (stored.data, stored.priority) == ({"v": 2}, 3)
    due = await raw.zscore(queue.keys.delayed, added.id)
    assert due is not None and due >= added.timestamp + 3_600_000


async def test_change_places_a_waiting_job_by_its_new_priority_and_data_null_is_json_null(
    queue: Queue, invoke: Invoke, raw: aioredis.Redis
) -> None:
    await queue.pause()
    added = await queue.add("n", {"v": 1})

    result = await invoke("job", "change", "jobs", added.id, "--priority", "1", "--data", "null")

    assert result.exit_code == 0, result.output
    assert f"job {added.id} of jobs: paused (changed data, priority)" in result.stdout
    assert await raw.zscore(queue.keys.prioritized, added.id) is not None
    assert await raw.hget(queue.keys.job(added.id), "data") == "null"


@pytest.mark.parametrize(
    ("args", "exit_code", "named"),
    [
        ((), 2, "nothing to change: give --data, --priority or --delay"),
        (("--data", "{bad"), 2, "--data"),
        (("--data", "NaN", "--priority", "1"), 2, "'--data': data is nan"),
        (("--priority", "-1"), 2, "'--priority'"),
        (("--priority", "2097153"), 2, "'--priority'"),
        (("--priority", "1.5"), 2, "'--priority'"),
        (("--delay", "soon"), 2, "'--delay'"),
        (("--data", "1", "--priority", "1", "--delay", "5"), 1, "it is not delayed"),
    ],
)
async def test_change_refuses_bad_input_naming_it_and_writes_nothing(
    queue: Queue,
    invoke: Invoke,
    raw: aioredis.Redis,
    args: tuple[str, ...],
    exit_code: int,
    named: str,
) -> None:
    added = await queue.add("n", {"v": 1})
    before = await job_snapshot(raw, queue, added.id)

    result = await invoke("job", "change", "jobs", added.id, *args)

    assert result.exit_code == exit_code, result.output
    assert named in result.output and "Traceback" not in result.output
    assert await job_snapshot(raw, queue, added.id) == before


async def test_change_of_a_missing_job_a_missing_queue_or_a_dead_letter_fails(
    queue: Queue, dlq: Queue, invoke: Invoke, make_worker: MakeWorker, raw: aioredis.Redis
) -> None:
    (letter,) = await dead_letter(queue, make_worker, ("charge", {"n": 1}))
    before = await job_snapshot(raw, dlq, letter)

    no_job = await invoke("job", "change", "jobs", "nope", "--priority", "1")
    no_queue = await invoke("job", "change", "nope", "1", "--priority", "1")
    a_dead_letter = await invoke("job", "change", "jobs-dlq", letter, "--data", "{}")

    assert no_job.exit_code == 1 and "'nope'" in no_job.output
    assert no_queue.exit_code == 1 and "no queue 'nope'" in no_queue.output
    assert a_dead_letter.exit_code == 1 and letter in a_dead_letter.output
    assert not await raw.exists(queue.keys.job("nope"))
    assert await job_snapshot(raw, dlq, letter) == before
