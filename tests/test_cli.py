"""The CLI through click's runner (a real subprocess is in test_worker.py)."""

from __future__ import annotations

from click.testing import CliRunner

from lazarus.cli import main


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


def test_worker_command_reports_unreachable_redis_without_a_traceback() -> None:
    result = CliRunner().invoke(
        main, ["worker", "tests.procs:echo", "--queue", "q", "--redis-url", "redis://127.0.0.1:1/0"]
    )
    assert result.exit_code == 1
    assert "127.0.0.1:1" in result.output
    assert "Traceback" not in result.output
