"""``lazarus schedules``."""

from __future__ import annotations

from lazarus import Queue

from .conftest import Invoke, parsed


async def test_schedules_lists_every_schedule_of_the_queue(queue: Queue, invoke: Invoke) -> None:
    await queue.add("report", repeat={"every": 60_000})
    await queue.add("digest", repeat={"pattern": "0 9 * * 1", "tz": "Europe/Paris", "limit": 3})

    result = await invoke("schedules", "jobs")

    assert result.exit_code == 0, result.output
    assert "60000 ms" in result.stdout and "0 9 * * 1" in result.stdout
    assert "Europe/Paris" in result.stdout


async def test_schedules_json_has_each_schedule_with_its_next_due_time(
    queue: Queue, invoke: Invoke
) -> None:
    await queue.add("report", repeat={"every": 60_000, "key": "reports"})

    document = parsed(await invoke("schedules", "jobs", "--json"))

    [schedule] = document["schedules"]
    assert schedule["key"] == "reports" and schedule["every"] == 60_000
    assert schedule["next"].endswith("Z") and schedule["count"] == 1


async def test_schedules_of_a_queue_without_any_says_so(invoke: Invoke) -> None:
    result = await invoke("schedules", "jobs")

    assert result.exit_code == 0 and "no schedules in 'jobs'" in result.stdout
