"""Clean messages, not tracebacks: unknown queue or id, not a dead letter, Redis unreachable,
bad option values."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from lazarus import Queue
from lazarus.cli import main
from lazarus.cli.main import Commands
from lazarus.embedded import EmbeddedRedis

from ..conftest import ON_CLUSTER
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


def test_a_duration_reaching_back_past_the_year_1_is_a_usage_error_naming_the_option() -> None:
    for option, duration in (("--since", "99999999999d"), ("--until", "3000000d")):
        result = CliRunner().invoke(main, ["dlq", "list", "jobs-dlq", option, duration])

        assert result.exit_code == 2, result.output
        assert f"Invalid value for '{option}'" in _one_error_line(result)
        assert "before the year 1" in result.output


def test_since_after_until_is_a_usage_error_naming_both() -> None:
    result = CliRunner().invoke(
        main, ["dlq", "stats", "jobs-dlq", "--since", "1h", "--until", "2h"]
    )
    assert result.exit_code == 2
    assert "'--since' / '--until'" in result.output


def test_a_filter_value_the_filter_refuses_is_a_usage_error_naming_its_own_option() -> None:
    # (a lone surrogate: what a shell passes for a byte that is not UTF-8)
    for option in ("--error-type", "--name", "--contains"):
        result = CliRunner().invoke(main, ["dlq", "list", "jobs-dlq", option, "\udcff"])

        assert result.exit_code == 2, result.output
        line = _one_error_line(result)
        assert f"Invalid value for '{option}'" in line and "--since" not in line


def test_bad_queue_name_and_id_are_usage_errors() -> None:
    name = CliRunner().invoke(main, ["dlq", "list", "has space"])
    job_id = CliRunner().invoke(main, ["dlq", "show", "jobs-dlq", "{bad}"])
    assert name.exit_code == job_id.exit_code == 2
    assert "Invalid value for 'QUEUE'" in name.output
    assert "Invalid value for 'ID'" in job_id.output


# -- one line, never a traceback -----------------------------------------------------------


def _one_error_line(result: Result) -> str:
    """The single line the command printed on stderr, checked to be an error line."""
    assert "Traceback" not in result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: "), lines[0]
    return lines[0]


def test_worker_with_a_bad_queue_name_is_one_usage_line() -> None:
    result = CliRunner().invoke(main, ["worker", "tests.procs:echo", "--queue", "a b"])

    assert result.exit_code == 2
    assert "Invalid value for '--queue'" in _one_error_line(result)


def test_worker_whose_dead_letter_queue_is_its_own_queue_is_one_usage_line() -> None:
    result = CliRunner().invoke(
        main, ["worker", "tests.procs:echo", "--queue", "q", "--dead-letter-queue", "q"]
    )

    assert result.exit_code == 2
    assert "'--dead-letter-queue'" in _one_error_line(result)


def test_a_bad_prefix_is_one_usage_line_for_every_command() -> None:
    for args in (["worker", "tests.procs:echo", "--queue", "q"], ["queues"], ["dlq", "list", "q"]):
        result = CliRunner().invoke(main, [*args, "--prefix", "a{b"])
        assert result.exit_code == 2, args
        assert "Invalid value for '--prefix'" in _one_error_line(result), args


@pytest.mark.skipif(ON_CLUSTER, reason="a Redis Cluster has database 0 only")
def test_a_redis_database_that_does_not_exist_is_one_error_line(redis_url: str) -> None:
    # Given the test's Redis, but database 99 (Redis has 16 by default)
    url = redis_url.rsplit("/", 1)[0] + "/99"

    for args in (["queues"], ["dlq", "list", "q"], ["worker", "tests.procs:echo", "--queue", "q"]):
        result = CliRunner().invoke(main, [*args, "--redis-url", url])

        assert result.exit_code == 1, args
        assert "DB index is out of range" in _one_error_line(result), args


def test_a_unix_socket_that_is_not_there_is_one_error_line(tmp_path: Path) -> None:
    # (A worker waits for its Redis instead: see tests/test_worker_recovery.py.)
    url = f"unix://{tmp_path}/nothing.sock"

    for args in (["queues"], ["dlq", "list", "q"]):
        result = CliRunner().invoke(main, [*args, "--redis-url", url])

        assert result.exit_code == 1, args
        assert f"cannot reach Redis at {url}" in _one_error_line(result), args


async def test_a_unix_socket_url_reaches_redis_there(tmp_path: Path) -> None:
    # Given a Redis that listens on a unix socket only
    async with EmbeddedRedis(unix_socket=True) as server:
        # When a command is pointed at it
        result = await asyncio.to_thread(
            CliRunner().invoke, main, ["queues", "--json", "--redis-url", server.url]
        )

    # Then it connects (a unix URL once failed on a TCP-only option)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"queues": []}


def test_a_bad_redis_url_is_one_usage_line() -> None:
    for args in (["queues"], ["worker", "tests.procs:echo", "--queue", "q"]):
        result = CliRunner().invoke(main, [*args, "--redis-url", "http://example.invalid"])
        assert result.exit_code == 2, args
        assert "not a usable Redis URL" in _one_error_line(result), args


def test_a_processor_module_that_fails_to_import_is_one_usage_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a module in the working directory that raises while it is imported
    (tmp_path / "broken_processor_module.py").write_text("raise RuntimeError('at import')\n")
    monkeypatch.chdir(tmp_path)

    result = CliRunner().invoke(main, ["worker", "broken_processor_module:run", "--queue", "q"])

    assert result.exit_code == 2
    assert "RuntimeError: at import" in _one_error_line(result)


def test_an_unexpected_error_in_any_command_is_one_line_not_a_traceback() -> None:
    # Given a command, in lazarus's command group, that fails in a way nothing anticipated
    @click.group(cls=Commands)
    def group() -> None:
        pass

    @group.command()
    def explode() -> None:
        raise RuntimeError("something\nunforeseen")

    # When it runs, then one line names the error and the exit code is 1
    result = CliRunner().invoke(group, ["explode"])

    assert result.exit_code == 1
    assert _one_error_line(result) == "Error: RuntimeError: something unforeseen"
