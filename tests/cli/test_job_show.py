"""``lazarus job show`` and ``lazarus queue jobs``: one job of a queue, and its jobs in one
state a page at a time."""

from __future__ import annotations

from typing import Any

import pytest

from lazarus import Job, Queue
from tests.conftest import wait_for_state

from .conftest import Invoke, parsed


async def failed_once(queue: Queue, make_worker: Any) -> Job:
    async def process(job: Job) -> None:
        raise ValueError(f"card {job.data['card']} declined")

    job = await queue.add("charge", {"card": 4242}, attempts=1, expires=3_600_000)
    make_worker(process)
    await wait_for_state(queue, job.id, "failed")
    stored = await queue.get_job(job.id)
    assert stored is not None
    return stored


async def test_show_gives_a_job_with_its_attempts_and_stack(
    queue: Queue, invoke: Invoke, make_worker: Any
) -> None:
    job = await failed_once(queue, make_worker)

    shown = await invoke("job", "show", "jobs", job.id, "--wide")

    assert shown.exit_code == 0, shown.output
    for text in (job.id, "failed", "charge", "1 of 1", "ValueError", "card 4242 declined",
                 '"card": 4242', "expires at", "stack trace 1 of 1"):  # fmt: skip
        assert text in shown.stdout, text
    body = parsed(await invoke("job", "show", "jobs", job.id, "--json"))
    assert (body["id"], body["state"], body["errorType"]) == (job.id, "failed", "ValueError")
    assert body["data"] == {"card": 4242}
    assert body["expiresAt"] == job.expires_at
    assert [a["errorType"] for a in body["attempts"]] == ["ValueError"]


async def test_show_of_a_missing_job_or_queue_exits_non_zero(queue: Queue, invoke: Invoke) -> None:
    await queue.add("n", None)
    missing = await invoke("job", "show", "jobs", "nope")
    assert missing.exit_code == 1
    assert "no job 'nope' in 'jobs'" in missing.output
    assert (await invoke("job", "show", "no-such-queue", "x")).exit_code == 1
    assert (await invoke("job", "show", "jobs", "a b")).exit_code == 2


async def test_jobs_lists_a_state_a_page_at_a_time(queue: Queue, invoke: Invoke) -> None:
    await queue.pause()
    added = await queue.add_bulk([{"name": "n", "data": i, "job_id": f"j{i}"} for i in range(5)])
    await queue.add("later", None, job_id="d1", delay=60_000)

    first = parsed(await invoke("queue", "jobs", "jobs", "--limit", "2", "--json"))
    second = parsed(await invoke("queue", "jobs", "jobs", "--limit", "2", "--start", "4",
                                 "--json"))  # fmt: skip
    delayed = parsed(await invoke("queue", "jobs", "jobs", "--state", "delayed", "--json"))

    assert [j["id"] for j in first["jobs"]] == ["j4", "j3"] and first["more"] is True
    assert [j["id"] for j in second["jobs"]] == ["j0"] and second["more"] is False
    assert [j["id"] for j in delayed["jobs"]] == ["d1"]
    assert delayed["jobs"][0]["state"] == "delayed"
    table = await invoke("queue", "jobs", "jobs", "--limit", "2")
    assert table.exit_code == 0, table.output
    assert "waiting jobs 1-2 of jobs; more with --start 2" in table.stdout
    assert "j4" in table.stdout and "j3" in table.stdout and "j2" not in table.stdout
    assert len(added) == 5


async def test_jobs_refuses_a_bad_state_or_limit(queue: Queue, invoke: Invoke) -> None:
    await queue.add("n", None)
    for args in (("--state", "dead"), ("--limit", "0"), ("--limit", "1001"), ("--start", "-1")):
        result = await invoke("queue", "jobs", "jobs", *args)
        assert result.exit_code == 2, (args, result.output)
    empty = await invoke("queue", "jobs", "jobs", "--state", "failed")
    assert "no failed jobs in jobs" in empty.stdout


def test_the_json_has_the_fields_of_the_http_apis_job() -> None:
    pytest.importorskip("fastapi")  # the server's packages: not in the lowest redis-py's run
    from lazarus.cli.job_show import job_json
    from lazarus.http.schemas import JobOut
    from lazarus.job_options import JobOptions

    bare = Job._build(id="j", name="n", original_data=None, opts=JobOptions(),
                      queue_name="q", timestamp=1)  # fmt: skip
    assert set(job_json(bare, "waiting")) == set(JobOut.model_fields)
