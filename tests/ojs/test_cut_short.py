"""An OJS job lives in its engine job and its OJS record, which separate calls write; a server
killed between two of them must lose nothing. A record is written before its job is added:
a server that dies in between leaves an orphan record, which a workflow does not take for
discarded (once it is old enough, the upkeep enqueues the job again) and a PUSH may take the
id of. A retried job is back in the engine before its record is reopened: cut short there,
the job is what the engine says, and runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from redis.asyncio import Redis

from lazarus import Queue, Worker
from lazarus.ojs import jobs, records
from lazarus.ojs.backend import Backend
from lazarus.ojs.sweeper import Sweeper
from lazarus.ojs.workflows import advance

from ..conftest import wait_until
from .test_layer import RETRY_ONCE, backend_of, state_of
from .test_workflows import QUEUE, ack, create, fail, fetch_all, ids_in_queue, job, workflow_of


async def _nothing(*args: Any, **kwargs: Any) -> None:
    return None


def die_before_adding(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the next enqueues stop after their records, as a server killed there would: the
    add never happens, and nothing is taken back."""

    async def died(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("the server died")

    monkeypatch.setattr(jobs, "_add", died)
    monkeypatch.setattr(jobs, "_take_back", _nothing)


def die_after_adding(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the next enqueues stop just after their add returned, as a server killed there
    would: the jobs are in their queues, and nothing more is done."""
    add = jobs._add

    async def added_then_died(*args: Any, **kwargs: Any) -> Any:
        await add(*args, **kwargs)
        raise RuntimeError("the server died")

    monkeypatch.setattr(jobs, "_add", added_then_died)
    monkeypatch.setattr(jobs, "_take_back", _nothing)


async def push_as_the_server_dies(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch, body: dict[str, Any],
    die: Callable[[pytest.MonkeyPatch], None],
) -> None:  # fmt: skip
    """PUSH ``body`` while ``die`` stops the server where it says: the client gets a 500."""
    with monkeypatch.context() as crash:
        die(crash)
        assert (await client.post("/ojs/v1/jobs", json=body)).status_code == 500


async def test_a_step_whose_add_never_happened_is_enqueued_again_and_the_chain_completes(
    client: httpx.AsyncClient, app: FastAPI, raw: Redis, redis_url: str, prefix: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    # Given a chain whose first step's ACK wrote the second step's record, and the server
    # died before adding its job
    workflow = await create(client, {"type": "chain", "steps": [job("wf.a", 1), job("wf.b")]})
    first, second = (s["job_id"] for s in workflow["steps"])
    assert [j["id"] for j in await fetch_all(client)] == [first]
    with monkeypatch.context() as crash:
        die_before_adding(crash)
        await ack(client, first, {"total": 1})
    assert await raw.hexists(f"{prefix}:ojs:index", second)
    assert await ids_in_queue(redis_url, prefix) == {first}

    # When the upkeep advances it while that record is young (an enqueue may be under way)
    backend = backend_of(app)
    await advance(backend, workflow["id"])

    # Then the step is not taken for discarded: the chain goes on waiting, nothing added
    assert (await workflow_of(client, workflow["id"]))["state"] == "active"
    assert await ids_in_queue(redis_url, prefix) == {first}

    # And once the record is an orphan, the upkeep enqueues the step, with its parent's result
    monkeypatch.setattr(records, "ORPHAN_AFTER_MS", 0)
    await advance(backend, workflow["id"])
    assert await ids_in_queue(redis_url, prefix) == {first, second}
    (step,) = await fetch_all(client)
    assert (step["id"], step["parent_results"]) == (second, [{"total": 1}])
    await ack(client, second)
    assert (await workflow_of(client, workflow["id"]))["state"] == "completed"
    assert "adding" not in await raw.hkeys(f"{prefix}:{{{QUEUE}}}:ojs:{second}")


async def test_a_batch_callback_whose_add_never_happened_is_enqueued_again(
    client: httpx.AsyncClient, app: FastAPI, redis_url: str, prefix: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    # Given a batch whose last ACK wrote its callback's record, and the server died before
    # adding the callback's job
    callback = job("wf.done")
    workflow = await create(client, {"type": "batch", "jobs": [job(), job()],
                                     "callbacks": {"on_complete": callback}})  # fmt: skip
    first, last = await fetch_all(client)
    await ack(client, first["id"])
    with monkeypatch.context() as crash:
        die_before_adding(crash)
        await ack(client, last["id"])
    callback_id = workflow["callbacks"]["on_complete"]["job_id"]
    assert callback_id not in await ids_in_queue(redis_url, prefix)

    # When the upkeep advances it, once the callback's record is an orphan
    monkeypatch.setattr(records, "ORPHAN_AFTER_MS", 0)
    await advance(backend_of(app), workflow["id"])

    # Then the callback is enqueued, once, and runs
    (fetched,) = await fetch_all(client)
    assert fetched["id"] == callback_id
    await advance(backend_of(app), workflow["id"])
    assert await fetch_all(client) == []
    await ack(client, callback_id)
    assert (await state_of(client, callback_id))["state"] == "completed"


async def test_a_push_may_take_the_id_of_an_orphan_record_but_not_of_a_young_one(
    client: httpx.AsyncClient, redis_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a PUSH whose server died between the record and the add
    body = {"type": "mail.send", "args": ["ada"], "id": "01a22624-0000-7000-8000-000000000001",
            "options": {"queue": QUEUE}}  # fmt: skip
    await push_as_the_server_dies(client, monkeypatch, body, die_before_adding)

    # When the client sends it again at once, and then once the record is an orphan
    young = await client.post("/ojs/v1/jobs", json=body)
    monkeypatch.setattr(records, "ORPHAN_AFTER_MS", 0)
    old = await client.post("/ojs/v1/jobs", json=body)

    # Then the first is refused as a duplicate (an enqueue may be under way); the second goes
    # in, and a worker gets the job
    assert young.status_code == 409, young.text
    assert old.status_code == 201, old.text
    assert await ids_in_queue(redis_url, prefix) == {body["id"]}
    (fetched,) = await fetch_all(client)
    assert (fetched["id"], fetched["args"]) == (body["id"], ["ada"])


async def test_the_upkeep_adds_the_job_of_an_orphan_push_as_it_was_sent(
    client: httpx.AsyncClient, app: FastAPI, redis_url: str, prefix: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    # Given a PUSH whose server died between the record and the add, never sent again
    body = {"type": "mail.send", "args": ["ada", 2], "id": "01a22624-0000-7000-8000-000000000003",
            "meta": {"tenant": "t1"}, "options": {"queue": QUEUE, "retry": RETRY_ONCE}}  # fmt: skip
    await push_as_the_server_dies(client, monkeypatch, body, die_before_adding)

    # When the server's upkeep walks the records, while the record is young, then once it
    # is an orphan
    await Sweeper(backend_of(app)).tick()
    young = await ids_in_queue(redis_url, prefix)
    monkeypatch.setattr(records, "ORPHAN_AFTER_MS", 0)
    await Sweeper(backend_of(app)).tick()

    # Then the job is added the second time only, as it was sent, and a worker gets it
    assert young == set()
    assert await ids_in_queue(redis_url, prefix) == {body["id"]}
    (fetched,) = await fetch_all(client)
    assert (fetched["id"], fetched["args"], fetched["meta"]) == (
        body["id"],
        ["ada", 2],
        {"tenant": "t1"},
    )
    assert fetched["max_attempts"] == 1


async def test_a_push_sent_again_indexes_an_orphan_its_server_died_before_indexing(
    client: httpx.AsyncClient, app: FastAPI, raw: Redis, redis_url: str, prefix: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    # Given a PUSH whose server died after writing the record, before indexing it
    body = {"type": "mail.send", "args": ["ada"], "id": "01a22624-0000-7000-8000-000000000004",
            "options": {"queue": QUEUE}}  # fmt: skip
    await push_as_the_server_dies(client, monkeypatch, body, die_before_adding)
    await raw.hdel(f"{prefix}:ojs:index", body["id"])

    # When the client sends it again at once (a 409: its record may be an enqueue under way),
    # and the server's upkeep walks the records once the record is an orphan
    again = await client.post("/ojs/v1/jobs", json=body)
    monkeypatch.setattr(records, "ORPHAN_AFTER_MS", 0)
    await Sweeper(backend_of(app)).tick()

    # Then the walk found the record, indexed again by the PUSH, and added its job
    assert again.status_code == 409, again.text
    assert await ids_in_queue(redis_url, prefix) == {body["id"]}
    assert (await state_of(client, body["id"]))["state"] == "available"


@pytest.mark.parametrize("evidence", ["job", "tombstone", "state"])
async def test_a_record_is_no_orphan_while_its_job_was_added_or_ended(
    client: httpx.AsyncClient, app: FastAPI, raw: Redis, prefix: str,
    monkeypatch: pytest.MonkeyPatch, evidence: str,
) -> None:  # fmt: skip
    # Given a record still marked as awaiting its add, old enough to be an orphan, whose job
    # the engine holds, or deleted soon after its add (its tombstone), or which ended
    body = {"type": "mail.send", "args": ["ada"], "id": "01a22624-0000-7000-8000-000000000002",
            "options": {"queue": QUEUE}}  # fmt: skip
    assert (await client.post("/ojs/v1/jobs", json=body)).status_code == 201
    record = f"{prefix}:{{{QUEUE}}}:ojs:{body['id']}"
    await raw.hset(record, "adding", "1")  # its add's mark, never cleared
    monkeypatch.setattr(records, "ORPHAN_AFTER_MS", 0)
    backend = backend_of(app)
    if evidence != "job":
        async with backend.client.pipeline(transaction=False) as pipe:
            pipe.delete(backend.keys(QUEUE).job(body["id"]))
            if evidence == "tombstone":
                pipe.set(backend.keys(QUEUE).gone(body["id"]), "1", px=30_000)
            else:
                pipe.hset(record, "state", "completed")
            await pipe.execute()
    before = await raw.hgetall(record)

    # When a PUSH of the same id comes, and a claim of its record is tried directly
    again = await client.post("/ojs/v1/jobs", json={**body, "args": ["bob"]})
    taken = await backend.records.create_all([(QUEUE, body["id"], {"created_at": 1})])

    # Then both are refused, and the record is as it was
    assert again.status_code == 409, again.text
    assert again.json()["error"]["code"] == "duplicate"
    assert taken == [0]
    assert await raw.hgetall(record) == before


async def test_a_retry_cut_short_before_its_record_is_reopened_runs_and_completes(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a dead letter of an OJS job, retried by a server that dies once the job is back
    # in its queue, before its record is reopened (the record still says it was discarded)
    pushed = await client.post("/ojs/v1/jobs", json=job(retry=RETRY_ONCE))
    job_id = pushed.json()["job"]["id"]
    await fetch_all(client)
    await fail(client, job_id)

    async def died(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("the server died")

    with monkeypatch.context() as crash:
        crash.setattr(Backend, "reopen_record", died)
        retried = await client.post(f"/ojs/v1/dead-letter/{job_id}/retry")
    assert retried.status_code == 500

    # When a worker fetches and acknowledges it
    available = (await state_of(client, job_id))["state"]
    fetched = [j["id"] for j in await fetch_all(client)]
    acked = await client.post("/ojs/v1/workers/ack", json={"job_id": job_id, "result": "ok"})

    # Then the job was available, runs, and completes
    assert (available, fetched, acked.status_code) == ("available", [job_id], 200)
    assert (await state_of(client, job_id))["state"] == "completed"


async def test_a_job_run_and_deleted_after_its_server_died_past_the_add_is_not_added_again(
    client: httpx.AsyncClient, app: FastAPI, raw: Redis, redis_url: str, prefix: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    # Given a PUSH whose server died just after the add returned, before answering
    body = {"type": "mail.send", "args": ["ada"], "id": "01a22624-0000-7000-8000-000000000005",
            "options": {"queue": QUEUE}}  # fmt: skip
    await push_as_the_server_dies(client, monkeypatch, body, die_after_adding)

    # And an in-process worker ran the job, which retention deleted later (its tombstone,
    # kept 30 s after an early delete, gone by then)
    runs: list[str] = []
    async with Queue(QUEUE, connection=redis_url, prefix=prefix) as queue:
        worker = Worker(QUEUE, lambda job: runs.append(job.id), connection=redis_url,
                        prefix=prefix)  # fmt: skip
        try:

            async def completed() -> bool:
                return await queue.get_job_state(body["id"]) == "completed"

            await wait_until(completed, message="the job's run")
        finally:
            await worker.close()
        await queue.remove(body["id"])
    await raw.delete(backend_of(app).keys(QUEUE).gone(body["id"]))

    # When the server's upkeep walks the records long after, and the client sends it again
    monkeypatch.setattr(records, "ORPHAN_AFTER_MS", 0)
    await Sweeper(backend_of(app)).tick()
    again = await client.post("/ojs/v1/jobs", json=body)

    # Then the job is not added again: it ran once, and its id stays taken
    assert again.status_code == 409, again.text
    assert await ids_in_queue(redis_url, prefix) == set()
    assert runs == [body["id"]]
