"""The fault-injection suite: ``make chaos`` (``pytest tests/chaos -m chaos``).

Each scenario gets its own redis-server and worker processes (the ``scenario`` fixture), and
records its findings with ``scenario.finish(findings)``: one row of the reliability table,
printed as soon as the scenario ends and again, as a whole table, at the end of the run.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from .harness import FINDINGS, Scenario
from .report import table


@pytest.fixture
async def scenario(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Scenario]:
    run = Scenario(request.node.name, tmp_path, request.config)
    try:
        yield run
    finally:
        await run.close()


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    findings = config.stash.get(FINDINGS, [])
    if not findings:
        return
    terminalreporter.section("reliability table (docs/reliability.md)")
    terminalreporter.write_line(table(findings))
    for item in findings:
        terminalreporter.write_line(f"{item.scenario}:")
        terminalreporter.write_line(item.detail())
