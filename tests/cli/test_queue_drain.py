"""``lazarus queue drain``: count, confirm (or --yes), remove the jobs that wait to run."""

from __future__ import annotations

import pytest

from lazarus import Job, Queue
from lazarus.cli import _options

from .conftest import Invoke, MakeWorker, dead_letter, parsed


async def three_waiting_and_one_delayed(queue: Queue) -> tuple[list[Job], Job]:
    """Two waiting jobs and one prioritized in a paused queue (nothing runs them), and one
    delayed by an hour."""
    await queue.pause()
    ready = [await queue.add("n", None), await queue.add("n", None),
             await queue.add("n", None, priority=1)]  # fmt: skip
    return ready, await queue.add("n", None, delay=3_600_000)


async def test_a_dry_run_counts_and_removes_nothing(queue: Queue, invoke: Invoke) -> None:
    await three_waiting_and_one_delayed(queue)

    result = await invoke("queue", "drain", "jobs", "--dry-run")
    with_delayed = await invoke("queue", "drain", "jobs", "--dry-run", "--delayed")

    assert result.exit_code == 0, result.output
    assert "3 jobs waiting and prioritized in 'jobs'" in result.stdout
    assert "dry run: 3 jobs would be drained; nothing was removed" in result.stdout
    assert "4 jobs waiting, prioritized and delayed" in with_delayed.stdout
    assert (await queue.get_job_counts())["paused"] == 3
    assert await queue.get_delayed_count() == 1


async def test_without_yes_and_without_a_terminal_the_drain_is_refused(
    queue: Queue, invoke: Invoke
) -> None:
    await three_waiting_and_one_delayed(queue)

    result = await invoke("queue", "drain", "jobs", "--json")

    assert result.exit_code == 1
    assert "refusing to drain 3 jobs from 'jobs' without confirmation" in result.output
    assert "--yes" in result.output and "Traceback" not in result.output
    assert (await queue.get_job_counts())["paused"] == 3


async def test_with_yes_it_drains_what_waits_then_with_delayed_the_delayed_jobs(
    queue: Queue, invoke: Invoke
) -> None:
    ready, later = await three_waiting_and_one_delayed(queue)

    document = parsed(await invoke("queue", "drain", "jobs", "--yes", "--json"))

    assert document == {"queue": "jobs", "delayed": False, "dryRun": False, "matched": 3,
                        "drained": 3}  # fmt: skip
    assert [await queue.get_job(j.id) for j in ready] == [None, None, None]
    assert await queue.get_job_state(later.id) == "delayed"
    result = await invoke("queue", "drain", "jobs", "--delayed", "-y")
    assert result.exit_code == 0, result.output
    assert "drained 1 job from 'jobs'" in result.stdout
    assert await queue.get_job(later.id) is None


async def test_at_a_terminal_the_operator_is_asked_and_no_keeps_every_job(
    queue: Queue, invoke: Invoke, monkeypatch: pytest.MonkeyPatch
) -> None:
    await three_waiting_and_one_delayed(queue)
    monkeypatch.setattr(_options, "stdin_is_interactive", lambda: True)

    declined = await invoke("queue", "drain", "jobs", input="n\n")

    assert declined.exit_code == 1
    assert "Drain 3 jobs from 'jobs'? [y/N]" in declined.output and "Aborted" in declined.output
    assert (await queue.get_job_counts())["paused"] == 3
    accepted = await invoke("queue", "drain", "jobs", input="y\n")
    assert accepted.exit_code == 0, accepted.output
    assert (await queue.get_job_counts())["paused"] == 0


async def test_the_dead_letters_of_a_dead_letter_queue_stay(
    queue: Queue, dlq: Queue, invoke: Invoke, make_worker: MakeWorker
) -> None:
    await dead_letter(queue, make_worker, ("charge", {"n": 1}))
    await dlq.pause()
    await dlq.add("n", None)  # a plain job in the dead letter queue

    document = parsed(await invoke("queue", "drain", "jobs-dlq", "--yes", "--json"))

    assert (document["matched"], document["drained"]) == (1, 1)
    assert await dlq.get_dead_letter_count() == 1


@pytest.mark.parametrize(
    ("args", "exit_code", "named"),
    [(("nope", "--yes"), 1, "no queue 'nope'"), (("", "--yes"), 2, "QUEUE")],
)
async def test_a_missing_queue_or_a_bad_name_drains_nothing(
    queue: Queue, invoke: Invoke, args: tuple[str, ...], exit_code: int, named: str
) -> None:
    await queue.add("n", None, delay=3_600_000)

    result = await invoke("queue", "drain", *args, "--delayed")

    assert result.exit_code == exit_code and named in result.output
    assert await queue.get_delayed_count() == 1
