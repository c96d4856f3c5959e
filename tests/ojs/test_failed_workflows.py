"""Failed OJS workflows: a retry of a failed job resumes one (alone, or in an admin's bulk
retry), and one none of whose failed jobs can come back any more is closed, as a completed
one is: out of the upkeep's set and of the job index, its record expiring, no second event.
A retry that races the close either resumes the workflow or is refused."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from redis.asyncio import Redis

from lazarus import Queue, Worker
from lazarus.ojs import admin_bulk, dead_letters, workers, workflow_retention
from lazarus.ojs.backend import Backend
from lazarus.ojs.dead_letters import DeadLetters
from lazarus.ojs.errors import OjsError
from lazarus.ojs.records import RECORD_KEEP_MS
from lazarus.ojs.sweeper import Sweeper
from lazarus.ojs.workflow_retention import retire

from ..conftest import wait_until
from .test_layer import RETRY_ONCE, backend_of
from .test_workflows import (
    QUEUE,
    ack,
    create,
    events_of,
    fail,
    fetch_all,
    ids_in_queue,
    job,
    swept,
    walk,
    workflow_of,
)

FAILS_IN_QUEUE = {"max_attempts": 1}  # kept in the queue's failed set, not dead-lettered
KEPT = ("kept", "indexed", "")
CLOSED = ("expiring", "", "")


async def retention(
    raw: Redis, prefix: str, workflow_id: str, job_ids: list[str]
) -> tuple[str, ...]:
    """What Redis keeps of a workflow: whether its record expires (``expiring``, with its
    ``closed_at``) or is ``kept``, whether its jobs are ``indexed`` to it, and whether the
    upkeep visits it (``swept``)."""
    record = f"{prefix}:ojs:workflow:{workflow_id}"
    ttl, closed_at = await raw.pttl(record), await raw.hexists(record, "closed_at")
    assert (0 < ttl <= RECORD_KEEP_MS) == bool(closed_at), (ttl, closed_at)
    owners = await raw.hmget(f"{prefix}:ojs:workflow-of", job_ids)
    indexed = all(o is not None and (o if isinstance(o, str) else o.decode()) == workflow_id
                  for o in owners)  # fmt: skip
    assert indexed or not any(owners), owners
    visited = any(m.split(" ")[0] == workflow_id for m in await swept(raw, prefix))
    return ("expiring" if closed_at else "kept", "indexed" if indexed else "",
            "swept" if visited else "")  # fmt: skip


def ids(workflow: dict[str, Any]) -> list[str]:
    return [j["job_id"] for j in workflow.get("steps") or workflow["jobs"]]


async def test_a_failed_workflow_is_kept_while_its_dead_letter_is_and_closed_once_it_is_deleted(
    client: httpx.AsyncClient, app: FastAPI, raw: Redis, prefix: str
) -> None:
    # Given two chains failed at their first step, each step a dead letter
    body = {"type": "chain", "steps": [job(retry=RETRY_ONCE), job()]}
    chains = [await create(client, body) for _ in range(2)]
    (gone, _), (back, after) = (ids(c) for c in chains)
    await fetch_all(client)
    await fail(client, gone)
    await fail(client, back)
    sweeper = Sweeper(backend_of(app), records_pause=0)  # a whole walk of the records a tick
    await sweeper.tick()
    for chain in chains:
        assert await retention(raw, prefix, chain["id"], ids(chain)) == KEPT

    # When the first one's dead letter is deleted, and the upkeep walks the records
    assert (await client.delete(f"/ojs/v1/dead-letter/{gone}")).status_code == 200
    await sweeper.tick()

    # Then that chain is closed, still failed, with no second event; the other is kept
    assert await retention(raw, prefix, chains[0]["id"], ids(chains[0])) == CLOSED
    assert await retention(raw, prefix, chains[1]["id"], ids(chains[1])) == KEPT
    assert (await workflow_of(client, chains[0]["id"]))["state"] == "failed"
    assert sorted(await events_of(client)) == ["workflow.failed"] * 2 + ["workflow.started"] * 2

    # And the other's dead letter, retried, resumes it to its end
    assert (await client.post(f"/ojs/v1/dead-letter/{back}/retry")).status_code == 200
    (again,) = await fetch_all(client)
    await ack(client, again["id"], "fixed")
    (step,) = await fetch_all(client)
    assert (step["id"], step["parent_results"]) == (after, ["fixed"])
    await ack(client, after)
    assert (await workflow_of(client, chains[1]["id"]))["state"] == "completed"


async def test_a_failed_workflow_whose_dead_letter_went_is_closed_once_its_other_job_ends(
    client: httpx.AsyncClient, app: FastAPI, raw: Redis, prefix: str
) -> None:
    # Given a group one job of which is dead-lettered, and its dead letter deleted, while
    # its other job runs
    group = await create(client, {"type": "group", "jobs": [job(retry=RETRY_ONCE), job()]})
    failing, running = ids(group)
    await fetch_all(client)
    await fail(client, failing)
    await client.delete(f"/ojs/v1/dead-letter/{failing}")
    await Sweeper(backend_of(app), records_pause=0).tick()
    assert await retention(raw, prefix, group["id"], ids(group)) == (*KEPT[:2], "swept")

    # When the other job completes, the group is closed at once
    await ack(client, running)
    assert await retention(raw, prefix, group["id"], ids(group)) == CLOSED
    assert (await workflow_of(client, group["id"]))["state"] == "failed"


async def test_a_workflow_failed_by_a_cancel_of_a_job_not_started_is_closed_at_once(
    client: httpx.AsyncClient, app: FastAPI, raw: Redis, prefix: str
) -> None:
    # Given a group whose job is cancelled before it ran (the engine lets go of it: no
    # retry can bring it back)
    group = await create(client, {"type": "group", "jobs": [job()]})
    assert (await client.delete(f"/ojs/v1/jobs/{ids(group)[0]}")).status_code == 200

    # When the upkeep moves it on, it fails and is closed
    await walk(backend_of(app))
    assert (await workflow_of(client, group["id"]))["state"] == "failed"
    assert await retention(raw, prefix, group["id"], ids(group)) == CLOSED


def died(backend: Backend, job_id: str) -> None:
    raise RuntimeError("the server died")


async def failed_chain(client: httpx.AsyncClient) -> tuple[dict[str, Any], str, str]:
    """A chain of two steps failed at its first one, a dead letter; its two steps' ids."""
    chain = await create(client, {"type": "chain", "steps": [job(retry=RETRY_ONCE), job()]})
    first, second = ids(chain)
    await fetch_all(client)
    await fail(client, first)
    return chain, first, second


@pytest.mark.parametrize("server", ["lives", "dies"])
async def test_a_retry_resuming_a_workflow_while_its_close_reads_it_keeps_it_open(
    client: httpx.AsyncClient, app: FastAPI, raw: Redis, redis_url: str, prefix: str,
    monkeypatch: pytest.MonkeyPatch, server: str,
) -> None:  # fmt: skip
    # Given a failed chain, its close about to read whether its failed step can come back
    backend = backend_of(app)
    chain, first, second = await failed_chain(client)
    states_of = workflow_retention.states_of

    async def resumed_meanwhile(backend: Backend, wf: Any) -> Any:
        loaded = await states_of(backend, wf)
        monkeypatch.setattr(workflow_retention, "states_of", states_of)
        if server == "dies":  # before it moves the workflow on, at each of its calls
            monkeypatch.setattr(dead_letters, "job_ended", died)
            monkeypatch.setattr(workers, "job_ended", died)
        with contextlib.suppress(RuntimeError):
            await DeadLetters(backend).retry(first)
        (again,) = await fetch_all(client)
        await client.post("/ojs/v1/workers/ack", json={"job_id": again["id"], "result": "ok"})
        monkeypatch.undo()
        async with Queue(QUEUE, connection=redis_url, prefix=prefix) as queue:
            await queue.remove(first)
        assert (await client.delete(f"/ojs/v1/dead-letter/{first}")).status_code == 200
        return loaded

    # When, meanwhile, its dead letter is retried, the step run and ACKed, and then the
    # step and its dead letter removed (as the retention of completed jobs and that of dead
    # letters do)
    monkeypatch.setattr(workflow_retention, "states_of", resumed_meanwhile)
    assert not await retire(backend, chain["id"])

    # Then the workflow is not closed, and goes on to its end (the upkeep moves it on when
    # no server did)
    assert (await retention(raw, prefix, chain["id"], ids(chain)))[0] == "kept"
    await walk(backend)
    (step,) = await fetch_all(client)
    assert (step["id"], step["parent_results"]) == (second, ["ok"])
    await ack(client, second)
    assert (await workflow_of(client, chain["id"]))["state"] == "completed"


async def test_a_retry_overtaken_by_the_close_is_refused_and_the_workflow_stays_closed(
    client: httpx.AsyncClient, app: FastAPI, raw: Redis, redis_url: str, prefix: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    # Given a failed chain
    backend = backend_of(app)
    chain, first, _ = await failed_chain(client)
    resuming = dead_letters.job_resuming

    async def closed_first(backend: Backend, job_id: str) -> None:
        assert (await client.delete(f"/ojs/v1/dead-letter/{first}")).status_code == 200
        assert await retire(backend, chain["id"])
        await resuming(backend, job_id)

    # When its dead letter is deleted, and the workflow closed, while a retry is between
    # finding the dead letter and putting the job back
    monkeypatch.setattr(dead_letters, "job_resuming", closed_first)
    with pytest.raises(OjsError) as refused:
        await DeadLetters(backend).retry(first)

    # Then the retry is refused, nothing is back, and the workflow stays closed
    assert refused.value.status == 409
    assert await retention(raw, prefix, chain["id"], ids(chain)) == CLOSED
    assert await ids_in_queue(redis_url, prefix) == set()


@pytest.mark.parametrize("retry", [FAILS_IN_QUEUE, RETRY_ONCE], ids=["in its queue", "dead letter"])
async def test_a_bulk_retry_resumes_the_failed_workflow_of_each_job_it_puts_back(
    client: httpx.AsyncClient, raw: Redis, prefix: str, retry: dict[str, Any]
) -> None:
    # Given a chain failed at its first step
    chain = await create(client, {"type": "chain", "steps": [job(retry=retry), job()]})
    first, second = ids(chain)
    await fetch_all(client)
    await fail(client, first)
    assert (await workflow_of(client, chain["id"]))["state"] == "failed"

    # When the admin retries the queue's discarded jobs in bulk
    response = await client.post("/ojs/v1/admin/jobs/bulk/retry",
                                 json={"filter": {"queue": QUEUE}, "confirm": True})  # fmt: skip
    assert response.json()["succeeded"] == 1, response.text

    # Then the chain is active again and visited by the upkeep, and goes on to its end
    assert (await workflow_of(client, chain["id"]))["state"] == "active"
    assert await swept(raw, prefix) == {chain["id"]}
    (again,) = await fetch_all(client)
    await ack(client, again["id"], "fixed")
    (step,) = await fetch_all(client)
    assert (step["id"], step["parent_results"]) == (second, ["fixed"])
    await ack(client, second)
    assert (await workflow_of(client, chain["id"]))["state"] == "completed"


@pytest.mark.parametrize("retry", [FAILS_IN_QUEUE, RETRY_ONCE], ids=["in its queue", "dead letter"])
async def test_a_bulk_retry_cut_short_once_the_job_is_back_still_resumes_its_workflow(
    client: httpx.AsyncClient, app: FastAPI, raw: Redis, prefix: str, retry: dict[str, Any],
    make_worker: Callable[..., Worker], monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    # Given a chain failed at its first step, out of the upkeep's walk
    chain = await create(client, {"type": "chain", "steps": [job(retry=retry), job()]})
    first, _ = ids(chain)
    await fetch_all(client)
    await fail(client, first)
    assert await swept(raw, prefix) == set()

    # When a bulk retry puts the step back, on a server that dies before it moves the
    # workflow on
    monkeypatch.setattr(admin_bulk, "job_ended", died)
    monkeypatch.setattr(dead_letters, "job_ended", died)
    response = await client.post("/ojs/v1/admin/jobs/bulk/retry",
                                 json={"filter": {"queue": QUEUE}, "confirm": True})  # fmt: skip
    assert response.status_code == 500
    assert await swept(raw, prefix) == {f"{chain['id']} {first}"}

    # And an in-process Worker runs the steps (no ACK moves the workflow on)
    make_worker(lambda job: "fixed", QUEUE)
    backend = backend_of(app)

    async def completed() -> bool:
        await walk(backend)
        return (await workflow_of(client, chain["id"]))["state"] == "completed"

    # Then the upkeep moves the chain on to its end
    await wait_until(completed, message="the chain completed")
    assert await swept(raw, prefix) == set()


async def test_a_refused_retry_takes_its_resume_mark_back(
    client: httpx.AsyncClient, app: FastAPI, raw: Redis, prefix: str, redis_url: str
) -> None:
    # Given a chain failed at its first step, whose dead letter an operator archived
    chain = await create(client, {"type": "chain", "steps": [job(retry=RETRY_ONCE), job()]})
    first = ids(chain)[0]
    await fetch_all(client)
    await fail(client, first)
    letter = (await client.get(f"/ojs/v1/dead-letter/{first}")).json()["job"]["dead_letter"]
    async with Queue(letter["queue"], connection=redis_url, prefix=prefix) as dlq:
        await dlq.archive_dead_letter(letter["id"], actor="operator:test")

    # When the dead letter's retry is refused (an archived dead letter is not replayed)
    response = await client.post(f"/ojs/v1/dead-letter/{first}/retry")
    assert response.status_code == 409, response.text

    # Then no mark of a retry under way is left: the upkeep does not visit the workflow for
    # it, and it stays failed, kept while its dead letter is
    assert not any(" " in member for member in await swept(raw, prefix))
    assert (await workflow_of(client, chain["id"]))["state"] == "failed"
    await Sweeper(backend_of(app), records_pause=0).tick()
    assert await retention(raw, prefix, chain["id"], ids(chain)) == KEPT
