"""A cancel takes the job from the engine, then records it; a server killed in between leaves a
job that shows ``cancelled``, and a cancel sent again finishes recording it. A job whose add
is under way, or never happened (an orphan record), shows the state its PUSH gave it."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from redis.asyncio import Redis

from lazarus.ojs import records
from lazarus.ojs.backend import Backend
from lazarus.ojs.sweeper import Sweeper

from .test_cut_short import die_before_adding
from .test_layer import backend_of, state_of
from .test_workflows import QUEUE, fetch_all, ids_in_queue, job


async def push(client: httpx.AsyncClient, **options: Any) -> str:
    pushed = await client.post("/ojs/v1/jobs", json=job("mail.send", "ada", **options))
    assert pushed.status_code == 201, pushed.text
    job_id: str = pushed.json()["job"]["id"]
    return job_id


async def died(*args: Any, **kwargs: Any) -> None:
    raise RuntimeError("the server died")


@pytest.mark.parametrize("running", [False, True], ids=["available", "active"])
async def test_a_cancel_cut_short_shows_cancelled_and_a_cancel_sent_again_finishes_it(
    client: httpx.AsyncClient, raw: Redis, redis_url: str, prefix: str,
    monkeypatch: pytest.MonkeyPatch, running: bool,
) -> None:  # fmt: skip
    # Given a job, waiting or fetched by a remote worker, whose cancel's server dies once the
    # engine let go of it, before the cancel is recorded
    job_id = await push(client)
    if running:
        assert [j["id"] for j in await fetch_all(client)] == [job_id]
    with monkeypatch.context() as crash:
        crash.setattr(Backend, "finish_record", died)
        assert (await client.delete(f"/ojs/v1/jobs/{job_id}")).status_code == 500

    # When the client reads it, then sends the cancel again, then once more
    shown = (await state_of(client, job_id))["state"]
    again = await client.delete(f"/ojs/v1/jobs/{job_id}")
    third = await client.delete(f"/ojs/v1/jobs/{job_id}")

    # Then it shows cancelled, the cancel sent again finishes (200), and a third is a 409;
    # the queue does not hold the job, and its record says cancelled, the mark gone
    assert shown == "cancelled"
    assert again.status_code == 200, again.text
    assert again.json()["job"]["state"] == "cancelled"
    assert third.status_code == 409
    assert job_id not in await ids_in_queue(redis_url, prefix)
    record = await raw.hgetall(f"{prefix}:{{{QUEUE}}}:ojs:{job_id}")
    assert record["state"] == "cancelled" and "cancelling" not in record


async def test_a_cancel_refused_leaves_no_mark(
    client: httpx.AsyncClient, raw: Redis, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a job that a worker claims between the cancel's read and its removal
    job_id = await push(client)

    async def claimed(*args: Any, **kwargs: Any) -> None:
        from lazarus.errors import JobStateError

        raise JobStateError("a worker holds it")

    with monkeypatch.context() as race:
        race.setattr("lazarus.queue.Queue.remove", claimed)
        refused = await client.delete(f"/ojs/v1/jobs/{job_id}")

    # Then the cancel is a 409, and the job is what it was, without a cancel's mark
    assert refused.status_code == 409
    assert (await state_of(client, job_id))["state"] == "available"
    assert "cancelling" not in await raw.hkeys(f"{prefix}:{{{QUEUE}}}:ojs:{job_id}")


@pytest.mark.parametrize(
    ("options", "state"),
    [({}, "available"), ({"scheduled_at": "2099-01-01T00:00:00Z"}, "scheduled"),
     ({"pending": True}, "pending")],
)  # fmt: skip
async def test_a_job_whose_add_is_under_way_or_never_happened_shows_its_pushed_state(
    client: httpx.AsyncClient, app: Any, redis_url: str, prefix: str,
    monkeypatch: pytest.MonkeyPatch, options: dict[str, Any], state: str,
) -> None:  # fmt: skip
    # Given a PUSH whose server died between the record and the add
    body = job("mail.send", "ada", **options)
    with monkeypatch.context() as crash:
        die_before_adding(crash)
        assert (await client.post("/ojs/v1/jobs", json=body)).status_code == 500
    (job_id,) = [k.rpartition(":")[2] for k in await _records(redis_url, prefix)]

    # When it is read, and cancelled while young (its add may be under way)
    shown = (await state_of(client, job_id))["state"]
    young = await client.delete(f"/ojs/v1/jobs/{job_id}")

    # Then it shows the state its PUSH gave it, not discarded, and the cancel must wait
    assert shown == state
    assert young.status_code == 409 and "being enqueued" in young.text

    # When it is an orphan, a cancel records it cancelled, and the upkeep adds no job for it
    monkeypatch.setattr(records, "ORPHAN_AFTER_MS", 0)
    cancelled = await client.delete(f"/ojs/v1/jobs/{job_id}")
    await Sweeper(backend_of(app)).tick()
    assert cancelled.status_code == 200, cancelled.text
    assert (await state_of(client, job_id))["state"] == "cancelled"
    assert await ids_in_queue(redis_url, prefix) == set()


async def _records(redis_url: str, prefix: str) -> list[str]:
    client = Redis.from_url(redis_url, decode_responses=True)
    try:
        return [k async for k in client.scan_iter(match=f"{prefix}:{{{QUEUE}}}:ojs:*")]
    finally:
        await client.aclose()
