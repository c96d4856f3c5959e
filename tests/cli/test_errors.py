"""Clean messages, not tracebacks: unknown queue or id, not a dead letter, Redis unreachable,
bad option values."""

from __future__ import annotations

from click.testing import CliRunner

from lazarus import Queue
from lazarus.cli import main

from .conftest import Invoke, MakeWorker, dead_letter


async def test_unknown_queue_is_named_and_exits_1(invoke: Invoke) -> None:
    for args in (("dlq", "list", "nosuch"), ("dlq", "stats", "nosuch"),
                 ("dlq", "replay", "nosuch", "--all", "--yes")):  # fmt: skip
        result = await invoke(*args)
        assert result.exit_code == 1, args
        assert "no queue 'nosuch' under prefix" in result.output
        assert "Traceback" not in result.output


async def test_unknown_id_is_named_and_exits_1(
    queue: Queue, make_worker: MakeWorker, invoke: Invoke
) -> None:
    await dead_letter(queue, make_worker, ("a", {}))

    for verb in ("show", "replay", "purge"):
        result = await invoke("dlq", verb, "jobs-dlq", "deadbeef")
        assert result.exit_code == 1, verb
        assert "no dead letter 'deadbeef' in 'jobs-dlq'" in result.output


async def test_a_job_that_is_not_a_dead_letter_is_refused(
    queue: Queue, make_worker: MakeWorker, invoke: Invoke
) -> None:
    # Given a dead letter queue, and a plain waiting job in the source queue
    await dead_letter(queue, make_worker, ("a", {}))
    job = await queue.add("plain", {})

    # When the operator points show and replay at the plain job
    show = await invoke("dlq", "show", "jobs", job.id)
    replay = await invoke("dlq", "replay", "jobs", job.id)

    # Then both say it is not a dead letter, and the job still waits
    for result in (show, replay):
        assert result.exit_code == 1
        assert f"job {job.id!r} in 'jobs' is not a dead letter" in result.output
    assert await queue.get_job_state(job.id) == "waiting"


def test_unreachable_redis_is_reported_with_its_address_and_exit_1() -> None:
    for args in (["queues"], ["dlq", "list", "jobs-dlq"], ["dlq", "purge", "q", "--all"]):
        result = CliRunner().invoke(main, [*args, "--redis-url", "redis://127.0.0.1:1/0"])
        assert result.exit_code == 1, args
        assert "cannot reach Redis at 127.0.0.1:1" in result.output
        assert "Traceback" not in result.output


def test_bad_since_is_a_usage_error_naming_the_option() -> None:
    result = CliRunner().invoke(main, ["dlq", "list", "jobs-dlq", "--since", "yesterday"])
    assert result.exit_code == 2
    assert "Invalid value for '--since'" in result.output


def test_since_after_until_is_a_usage_error_naming_both() -> None:
    result = CliRunner().invoke(
        main, ["dlq", "stats", "jobs-dlq", "--since", "1h", "--until", "2h"]
    )
    assert result.exit_code == 2
    assert "'--since' / '--until'" in result.output


def test_bad_queue_name_and_id_are_usage_errors() -> None:
    name = CliRunner().invoke(main, ["dlq", "list", "has space"])
    job_id = CliRunner().invoke(main, ["dlq", "show", "jobs-dlq", "{bad}"])
    assert name.exit_code == job_id.exit_code == 2
    assert "Invalid value for 'QUEUE'" in name.output
    assert "Invalid value for 'ID'" in job_id.output
