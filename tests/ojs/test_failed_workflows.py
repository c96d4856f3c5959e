"""Failed OJS workflows: a retry of a failed job resumes one, alone or in an admin's bulk
retry, even when the server that retried dies before it moves the workflow on."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from redis.asyncio import Redis

from lazarus import Worker
from lazarus.ojs import admin_bulk, dead_letters
from lazarus.ojs.backend import Backend

from ..conftest import wait_until
from .test_layer import RETRY_ONCE, backend_of
from .test_workflows import QUEUE, ack, create, fail, fetch_all, job, swept, walk, workflow_of

FAILS_IN_QUEUE = {"max_attempts": 1}  # kept in the queue's failed set, not dead-lettered


def ids(workflow: dict[str, Any]) -> list[str]:
    return [j["job_id"] for j in workflow.get("steps") or workflow["jobs"]]


def died(backend: Backend, job_id: str) -> None:
    raise RuntimeError("the server died")


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
