"""Tables at 80 columns: the columns that matter most, wrapped text, and ``--wide``."""

from __future__ import annotations

import asyncio

from click.testing import CliRunner, Result

from lazarus import Queue
from lazarus.cli import main

from .conftest import MakeWorker, dead_letter

LONG = "the card issuer declined the charge because the account is frozen pending review"


async def run_at(redis_url: str, prefix: str, columns: int, *args: str) -> Result:
    runner = CliRunner(env={"COLUMNS": str(columns)})
    full = [*args, "--redis-url", redis_url, "--prefix", prefix]
    result = await asyncio.to_thread(runner.invoke, main, full)
    assert result.exit_code == 0, result.output
    return result


async def test_dlq_list_at_80_columns_shows_id_name_and_wrapped_reason(
    queue: Queue, make_worker: MakeWorker, redis_url: str, prefix: str
) -> None:
    # Given a dead letter whose failed reason is longer than a line
    (dl_id,) = await dead_letter(queue, make_worker, ("charge", {"message": LONG}))
    # When it is listed in an 80-column terminal
    result = await run_at(redis_url, prefix, 80, "dlq", "list", "jobs-dlq")
    lines = result.stdout.splitlines()
    # Then no line is wider than 80, the id is whole, and the reason is all there, wrapped
    assert max(len(line) for line in lines) <= 80
    header = lines[1]
    for title in ("id", "name", "failed reason"):
        assert title in header
    assert "dead-lettered at" not in header
    assert dl_id in result.stdout
    assert " ".join(" ".join(lines).split()).count("account is frozen pending review") == 1
    assert "more columns with --wide" in result.stdout


async def test_wide_shows_every_column_whatever_the_terminal(
    queue: Queue, make_worker: MakeWorker, redis_url: str, prefix: str
) -> None:
    await dead_letter(queue, make_worker, ("charge", {"message": LONG}))
    result = await run_at(redis_url, prefix, 80, "dlq", "list", "jobs-dlq", "--wide")
    header = next(line for line in result.stdout.splitlines() if "failed reason" in line)
    for title in ("id", "name", "source queue", "reason", "error type", "attempts",
                  "dead-lettered at"):  # fmt: skip
        assert title in header
    assert LONG in result.stdout  # unwrapped, on one line
    assert "--wide" not in result.stdout


async def test_queues_at_80_columns_fit_and_keep_the_counts_that_matter(
    queue: Queue, make_worker: MakeWorker, redis_url: str, prefix: str
) -> None:
    await dead_letter(queue, make_worker, ("charge", {"n": 1}))
    result = await run_at(redis_url, prefix, 80, "queues")
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    for title in ("queue", "waiting", "active", "failed", "dead letters"):
        assert title in lines[1]
    wide = await run_at(redis_url, prefix, 80, "queues", "--wide")
    assert "oldest dead letter" in wide.stdout
