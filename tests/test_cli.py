"""The CLI through click's runner (a real subprocess is in test_worker.py)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from lazarus.cli import main

from .conftest import ON_CLUSTER


def test_worker_command_rejects_a_processor_without_a_colon() -> None:
    result = CliRunner().invoke(main, ["worker", "nocolon", "--queue", "q"])
    assert result.exit_code == 2
    assert "module:function" in result.output


def test_worker_command_rejects_an_unimportable_module() -> None:
    result = CliRunner().invoke(main, ["worker", "no_such_module_xyz:f", "--queue", "q"])
    assert result.exit_code == 2
    assert "cannot import" in result.output


def test_worker_command_requires_a_queue() -> None:
    result = CliRunner().invoke(main, ["worker", "tests.procs:echo"])
    assert result.exit_code == 2
    assert "--queue" in result.output


@pytest.mark.skipif(ON_CLUSTER, reason="a Redis Cluster has database 0 only")
def test_worker_command_reports_settings_redis_refuses_in_one_line(redis_url: str) -> None:
    # An unreachable Redis is waited for (it may start later); a refused setting is not.
    bad_database = redis_url.rsplit("/", 1)[0] + "/9999"
    result = CliRunner().invoke(main, ["worker", "tests.procs:echo", "--queue", "q",
                                       "--redis-url", bad_database])  # fmt: skip
    assert result.exit_code == 1
    assert "refused the connection settings" in result.output
    assert "DB index is out of range" in result.output
    assert "Traceback" not in result.output


def test_worker_command_refuses_processes_for_an_async_processor(redis_url: str) -> None:
    result = CliRunner().invoke(main, ["worker", "tests.procs:fail_as_told", "--queue", "q",
                                       "--processes", "2", "--redis-url", redis_url])  # fmt: skip
    assert result.exit_code == 2
    assert "processes needs a plain-function processor" in result.output


def test_worker_command_refuses_zero_processes() -> None:
    result = CliRunner().invoke(main, ["worker", "tests.procs:echo", "--queue", "q",
                                       "--processes", "0"])  # fmt: skip
    assert result.exit_code == 2
    assert "--processes" in result.output


def test_worker_command_refuses_a_dead_letter_queue_among_its_queues() -> None:
    result = CliRunner().invoke(main, ["worker", "tests.procs:echo", "--queue", "a",
                                       "--queue", "b", "--dead-letter-queue", "b"])  # fmt: skip
    assert result.exit_code == 2
    assert "must not be the worker's own queue" in result.output


def test_worker_command_checks_every_queue_name() -> None:
    result = CliRunner().invoke(main, ["worker", "tests.procs:echo", "--queue", "a",
                                       "--queue", "b c"])  # fmt: skip
    assert result.exit_code == 2
    assert "queue" in result.output and "whitespace" in result.output
