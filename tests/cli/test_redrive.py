"""``lazarus redrive``, ``lazarus health`` and ``lazarus alerts``."""

from __future__ import annotations

import asyncio
from pathlib import Path

import redis.asyncio as aioredis
from click.testing import CliRunner

from lazarus import Queue
from lazarus.cli import main

from ..conftest import keys_of
from .conftest import Invoke, MakeWorker, dead_letter, parsed


async def test_redrive_once_follows_the_rules_file(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, invoke: Invoke, tmp_path: Path
) -> None:
    await dead_letter(queue, make_worker, ("charge", {"error": "timeout"}), ("sms", {}))
    rules = tmp_path / "rules.toml"
    rules.write_text(
        '[[rule]]\nschedule = [0]\nmatch = { error_type = "TimeoutError" }\n'
        '[[rule]]\nstrategy = "manual"\n'
    )

    result = await invoke("redrive", "jobs-dlq", "--rules", str(rules), "--once")

    assert result.exit_code == 0, result.output
    assert "replayed 1, flagged manual 1, failed 0" in result.output
    assert [j.name for j in await queue.get_waiting()] == ["charge"]
    assert (await dlq.get_dead_letter_health()).by_status == {"manual": 1, "processing": 1}


async def test_a_bad_rules_file_is_a_usage_error_naming_the_rule(
    invoke: Invoke, tmp_path: Path
) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text('[[rule]]\nstrategy = "often"\n')

    result = await invoke("redrive", "jobs-dlq", "--rules", str(rules), "--once")

    assert result.exit_code == 2
    assert "rule[0]: strategy" in result.output


async def test_health_prints_the_measures_as_json(
    queue: Queue, make_worker: MakeWorker, invoke: Invoke
) -> None:
    await dead_letter(queue, make_worker, ("charge", {"error": "timeout"}))

    report = parsed(await invoke("health", "jobs-dlq", "--json"))

    assert report["backlog"] == 1
    assert report["errorTypes"] == {"TimeoutError": 1}


async def test_alerts_show_which_rules_fire(
    queue: Queue, make_worker: MakeWorker, invoke: Invoke, tmp_path: Path
) -> None:
    await dead_letter(queue, make_worker, ("charge", {}))
    rules = tmp_path / "rules.toml"
    rules.write_text("[[alert]]\nname = 'Any'\nmetric = 'backlog'\nop = '>'\nthreshold = 0\n")

    result = await invoke("alerts", "jobs-dlq", "--rules", str(rules))

    assert result.exit_code == 0, result.output
    assert result.output.startswith("FIRING  Any (warning): backlog = 1 > 0?")


def test_alerts_print_a_prometheus_rules_file_with_the_seed_defaults() -> None:
    result = CliRunner().invoke(main, ["alerts", "--prometheus-rules"])

    assert result.exit_code == 0, result.output
    assert result.output.startswith("groups:\n")
    assert "alert: DLQBacklogGrowing" in result.output
    assert "expr: lazarus_dlq_backlog > 10000" in result.output


async def test_redrive_runs_until_interrupted(
    queue: Queue, make_worker: MakeWorker, redis_url: str, prefix: str, tmp_path: Path
) -> None:
    import signal
    import sys

    from ..conftest import wait_until

    await dead_letter(queue, make_worker, ("charge", {}))
    rules = tmp_path / "rules.toml"
    rules.write_text("[[rule]]\nschedule = [0]\n")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "lazarus.cli", "redrive", "jobs-dlq", "--rules", str(rules),
        "--poll-interval", "0.05", "--redis-url", redis_url, "--prefix", prefix,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip

    async def replayed() -> bool:
        return await queue.get_waiting_count() == 1

    await wait_until(replayed, timeout=20, message="the job replayed by the subprocess")
    proc.send_signal(signal.SIGINT)
    out, _ = await asyncio.wait_for(proc.communicate(), 20)

    assert proc.returncode == 0
    assert b"redriving 'jobs-dlq' with 1 rules" in out


async def test_retention_shows_changes_and_applies_the_policy(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, invoke: Invoke
) -> None:
    await dead_letter(queue, make_worker, ("a", {}), ("b", {}), ("c", {}))

    shown = await invoke("retention", "jobs-dlq")
    assert shown.exit_code == 0, shown.output
    assert shown.output.startswith("max age P180D, max count 10000, prune by delete\n")
    assert "  failed     P90D then archive" in shown.output

    report = parsed(await invoke("retention", "jobs-dlq", "--max-count", "1", "--now", "--json"))

    assert report["pruned"] == 2 and report["policy"]["maxCount"] == 1
    assert (await dlq.get_retention_policy()).max_count == 1
    assert await dlq.get_dead_letter_count() == 1


async def test_a_bad_retention_value_is_a_usage_error_and_changes_nothing(
    dlq: Queue, invoke: Invoke
) -> None:
    result = await invoke("retention", "jobs-dlq", "--max-age", "six months")

    assert result.exit_code == 2
    assert "max_age" in result.output
    assert await dlq.client.exists(dlq.keys.dl_retention) == 0


async def test_retention_of_a_queue_that_does_not_exist_is_refused_and_stores_nothing(
    queue: Queue, make_worker: MakeWorker, invoke: Invoke, raw: aioredis.Redis, prefix: str
) -> None:
    # Given a dead letter queue, and a name no queue has
    await dead_letter(queue, make_worker, ("a", {}))
    before = await keys_of(raw, prefix)

    # When the operator sets, or only shows, the retention policy of that name
    results = [await invoke("retention", "jobs-dlqq", "--max-age", "P1D"),
               await invoke("retention", "jobs-dlqq")]  # fmt: skip

    # Then both say there is no such queue, and no policy key was written
    for result in results:
        assert result.exit_code == 1, result.output
        assert f"no queue 'jobs-dlqq' under prefix '{prefix}'" in result.output
    assert await keys_of(raw, prefix) == before
