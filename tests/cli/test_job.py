"""``lazarus job``: retry, promote or remove one job of a queue; promote every delayed one."""

from __future__ import annotations

import pytest

from lazarus import Job, Queue
from tests.conftest import wait_until

from .conftest import Invoke, MakeWorker, parsed


async def test_promote_runs_a_delayed_job_now(queue: Queue, invoke: Invoke) -> None:
    await queue.pause()
    job = await queue.add("n", None, delay=3_600_000)

    document = parsed(await invoke("job", "promote", "jobs", job.id, "--json"))

    assert document == {"queue": "jobs", "id": job.id, "state": "waiting"}
    assert await queue.get_job_state(job.id) == "paused"  # waiting, in a paused queue
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
