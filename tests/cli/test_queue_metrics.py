"""``lazarus queue metrics``: a queue's jobs completed and failed for good."""

from __future__ import annotations

import re
from typing import Any

from lazarus import Job, Queue
from tests.conftest import wait_until

from .conftest import Invoke, parsed


async def test_totals_and_minutes_of_what_workers_did(
    queue: Queue, invoke: Invoke, make_worker: Any
) -> None:
    await queue.add_bulk([{"name": "ok", "data": {"fail": False}} for _ in range(4)])
    await queue.add("bad", {"fail": True})

    async def process(job: Job) -> None:
        if job.data["fail"]:
            raise ValueError("no")

    make_worker(process)

    async def ended() -> bool:
        counts = await queue.get_job_counts()
        return counts["completed"] == 4 and counts["failed"] == 1

    await wait_until(ended)

    shown = await invoke("queue", "metrics", "jobs", "--minutes", "3")
    assert shown.exit_code == 0, shown.output
    assert "'jobs': 4 completed, 1 failed for good, in all" in shown.stdout
    rows = re.findall(r"^\s*\d{4}-\d\d-\d\d \d\d:\d\d\s+(\d+)\s+(\d+)\s*$", shown.stdout, re.M)
    assert len(rows) == 3  # oldest first, this minute last
    assert sum(int(done) for done, _ in rows) == 4 and sum(int(f) for _, f in rows) == 1

    body = parsed(await invoke("queue", "metrics", "jobs", "--json"))
    assert (body["queue"], body["completed"], body["failed"]) == ("jobs", 4, 1)
    assert len(body["completedPerMinute"]) == 10
    assert sum(m["count"] for m in body["completedPerMinute"]) == 4
    assert sum(m["count"] for m in body["failedPerMinute"]) == 1


async def test_bad_minutes_or_an_unknown_queue_exit_non_zero(queue: Queue, invoke: Invoke) -> None:
    await queue.add("n", None)
    for args, code in ((("jobs", "--minutes", "0"), 2), (("jobs", "--minutes", "121"), 2),
                       (("jobs", "--minutes", "x"), 2), (("nope",), 1)):  # fmt: skip
        result = await invoke("queue", "metrics", *args)
        assert result.exit_code == code, (args, result.output)
