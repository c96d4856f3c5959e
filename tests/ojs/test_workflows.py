"""OJS workflows (Level 3): a chain runs its steps one after another, handing each the result
of the one before; a group enqueues its jobs at once; a batch fires its callbacks once their
condition holds. The ACK moves a workflow on, and the server's upkeep does when an ACK did not
(an in-process worker ran the step, or the server died in between). A dead letter of a step
fails the workflow, and when it is retried and completes, the workflow goes on."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from redis.asyncio import Redis

from lazarus import Job, Queue, Worker
from lazarus.ojs import dead_letters
from lazarus.ojs.backend import Backend
from lazarus.ojs.dead_letters import DeadLetters
from lazarus.ojs.envelope import parse_submission
from lazarus.ojs.errors import OjsError
from lazarus.ojs.jobs import enqueue_all
from lazarus.ojs.sweeper import Sweeper
from lazarus.ojs.workflow_defs import MAX_WORKFLOW_JOBS
from lazarus.ojs.workflow_ends import cancel_read, complete_workflow
from lazarus.ojs.workflow_records import load
from lazarus.ojs.workflows import advance, repair_step

from ..conftest import wait_until
from .conftest import OjsServer
from .test_layer import RETRY_ONCE, backend_of, state_of

QUEUE = "wf"


def job(job_type: str = "wf.step", *args: Any, **options: Any) -> dict[str, Any]:
    return {"type": job_type, "args": list(args), "options": {"queue": QUEUE, **options}}


async def create(client: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    response = await client.post("/ojs/v1/workflows", json=body)
    assert response.status_code == 201, response.text
    assert response.headers["location"].endswith(response.json()["workflow"]["id"])
    workflow: dict[str, Any] = response.json()["workflow"]
    return workflow


async def workflow_of(client: httpx.AsyncClient, workflow_id: str) -> dict[str, Any]:
    response = await client.get(f"/ojs/v1/workflows/{workflow_id}")
    assert response.status_code == 200, response.text
    workflow: dict[str, Any] = response.json()["workflow"]
    return workflow


async def fetch_all(client: httpx.AsyncClient) -> list[dict[str, Any]]:
    response = await client.post(
        "/ojs/v1/workers/fetch", json={"queues": [QUEUE], "count": 10, "worker_id": "w"}
    )
    jobs: list[dict[str, Any]] = response.json()["jobs"]
    return jobs


async def ack(client: httpx.AsyncClient, job_id: str, result: Any = None) -> None:
    response = await client.post("/ojs/v1/workers/ack", json={"job_id": job_id, "result": result})
    assert response.status_code == 200, response.text


async def fail(client: httpx.AsyncClient, job_id: str) -> None:
    response = await client.post("/ojs/v1/workers/nack", json={
        "job_id": job_id, "error": {"code": "handler_error", "message": "boom"}})  # fmt: skip
    assert response.json()["state"] == "discarded", response.text


async def ids_in(queue: Queue) -> set[str]:
    """Every job ``queue`` holds, whatever its state, read by the library."""
    jobs: list[Job] = []
    for read in (queue.get_waiting, queue.get_prioritized, queue.get_active, queue.get_delayed,
                 queue.get_completed, queue.get_failed):  # fmt: skip
        jobs += await read()
    return {j.id for j in jobs}


async def ids_in_queue(redis_url: str, prefix: str) -> set[str]:
    """Every job the workflows' queue holds."""
    async with Queue(QUEUE, connection=redis_url, prefix=prefix) as queue:
        return await ids_in(queue)


async def events_of(client: httpx.AsyncClient, prefix: str = "workflow.") -> list[str]:
    events = (await client.get("/ojs/v1/events", params={"limit": 1000})).json()["events"]
    return [e["type"] for e in events if e["type"].startswith(prefix)]


async def test_a_chain_runs_its_steps_in_order_handing_each_the_result_before(
    client: httpx.AsyncClient, redis_url: str, prefix: str
) -> None:
    # Given a chain of three steps
    steps_sent = [job("wf.a", 1), job("wf.b"), job("wf.c")]
    workflow = await create(client, {"type": "chain", "name": "etl", "steps": steps_sent})
    steps = [s["job_id"] for s in workflow["steps"]]
    assert workflow["state"] == "active" and workflow["steps_total"] == 3
    assert [s["state"] for s in workflow["steps"]] == ["available", "pending", "pending"]
    assert await ids_in_queue(redis_url, prefix) == {steps[0]}

    # When a remote worker works each step as it comes, returning results
    seen: list[dict[str, Any]] = []
    for index in range(3):
        (fetched,) = await fetch_all(client)
        assert fetched["id"] == steps[index]
        seen.append(fetched)
        await ack(client, fetched["id"], {"step": index})

    # Then each step had the result of the one before, and the workflow completed
    assert "parent_results" not in seen[0]
    assert seen[1]["parent_results"] == [{"step": 0}]
    assert seen[2]["parent_results"] == [{"step": 1}]
    done = await workflow_of(client, workflow["id"])
    assert done["state"] == "completed" and done["steps_completed"] == 3
    assert done["steps"][2]["result"] == {"step": 2} and "completed_at" in done
    assert await events_of(client) == ["workflow.started", "workflow.completed"]


async def test_a_chain_may_list_its_steps_under_jobs_as_the_conformance_suite_sends(
    client: httpx.AsyncClient,
) -> None:
    workflow = await create(client, {"type": "chain", "jobs": [job(), job()]})
    assert workflow["type"] == "chain" and workflow["state"] == "active"
    assert [j["state"] for j in workflow["jobs"]] == ["available", "pending"]


async def test_a_group_enqueues_every_job_at_once_and_completes_when_all_do(
    client: httpx.AsyncClient, redis_url: str, prefix: str
) -> None:
    # Given a group of three jobs
    workflow = await create(client, {"type": "group", "jobs": [job(), job(), job()]})
    ids = {j["job_id"] for j in workflow["jobs"]}

    # Then all three are in the queue at once
    assert await ids_in_queue(redis_url, prefix) == ids
    fetched = await fetch_all(client)
    assert {j["id"] for j in fetched} == ids

    # When two complete, the group is still active; when the third does, it is completed
    for one in fetched[:2]:
        await ack(client, one["id"], one["args"])
    assert (await workflow_of(client, workflow["id"]))["jobs_completed"] == 2
    assert (await workflow_of(client, workflow["id"]))["state"] == "active"
    await ack(client, fetched[2]["id"])
    done = await workflow_of(client, workflow["id"])
    assert (done["state"], done["jobs_total"], done["jobs_completed"]) == ("completed", 3, 3)


async def test_a_batch_fires_each_callback_once_and_a_retried_dead_letter_completes_it(
    client: httpx.AsyncClient, app: FastAPI, redis_url: str, prefix: str
) -> None:
    # Given a batch of two jobs (each may run once, then dead-letters) with three callbacks
    callbacks = {name: {"type": f"wf.{name}", "options": {"queue": "callbacks"}}
                 for name in ("on_success", "on_failure", "on_complete")}  # fmt: skip
    jobs = [job(retry=RETRY_ONCE), job(retry=RETRY_ONCE)]
    workflow = await create(client, {"type": "batch", "callbacks": callbacks, "jobs": jobs})
    fired = {name: cb["job_id"] for name, cb in workflow["callbacks"].items()}
    assert {cb["state"] for cb in workflow["callbacks"].values()} == {"pending"}

    # When one job completes and the other is dead-lettered
    first, second = await fetch_all(client)
    await ack(client, first["id"])
    await fail(client, second["id"])

    # Then on_failure and on_complete are enqueued, on_success not, and the batch failed
    async with Queue("callbacks", connection=redis_url, prefix=prefix) as queue:
        waiting = await ids_in(queue)
        assert waiting == {fired["on_failure"], fired["on_complete"]}
        failed = await workflow_of(client, workflow["id"])
        assert failed["state"] == "failed"

        # And the upkeep, run again and again, enqueues nothing more
        sweeper = Sweeper(backend_of(app))
        for _ in range(3):
            await sweeper.tick()
            await advance(backend_of(app), workflow["id"])
        assert await ids_in(queue) == waiting

        # When the dead letter is retried, and completes this time
        retried = await client.post(f"/ojs/v1/dead-letter/{second['id']}/retry")
        assert retried.status_code == 200, retried.text
        (again,) = await fetch_all(client)
        await ack(client, again["id"])

        # Then on_success is enqueued too, once, and the batch is completed
        waiting = await ids_in(queue)
        assert waiting == set(fired.values())
    done = await workflow_of(client, workflow["id"])
    assert done["state"] == "completed" and done["jobs_completed"] == 2
    assert await events_of(client) == ["workflow.started", "workflow.failed",
                                       "workflow.completed"]  # fmt: skip


async def test_a_batch_hands_its_callbacks_the_results_of_its_jobs_in_order(
    client: httpx.AsyncClient,
) -> None:
    # Given two batches of two jobs, the second's last job may run once
    def callback(name: str) -> dict[str, Any]:
        return {"type": f"wf.{name}", "options": {"queue": "callbacks"}}

    succeeding = {"type": "batch", "jobs": [job(), job()],
                  "callbacks": {"on_success": callback("on_success")}}  # fmt: skip
    failing = {"type": "batch", "jobs": [job(), job(retry=RETRY_ONCE)],
               "callbacks": {"on_failure": callback("on_failure")}}  # fmt: skip
    created = [await create(client, body) for body in (succeeding, failing)]
    first, second, third, fourth = (j["job_id"] for w in created for j in w["jobs"])
    await fetch_all(client)

    # When the first batch's jobs complete in reverse order, and the second's fails one
    await ack(client, second, [2])
    await ack(client, first, {"n": 1})
    await ack(client, third, "three")
    await fail(client, fourth)

    # Then each callback has the batch's results as parent_results, in the batch's order,
    # None for the job that did not complete
    response = await client.post("/ojs/v1/workers/fetch", json={"queues": ["callbacks"],
                                                                "count": 10})  # fmt: skip
    fired = {j["type"]: j for j in response.json()["jobs"]}
    assert fired["wf.on_success"]["parent_results"] == [{"n": 1}, [2]]
    assert fired["wf.on_failure"]["parent_results"] == ["three", None]


async def test_a_dead_letter_halts_a_chain_until_it_is_retried_and_completes(
    client: httpx.AsyncClient, app: FastAPI, redis_url: str, prefix: str
) -> None:
    # Given a chain whose first step is dead-lettered
    workflow = await create(client, {"type": "chain",
                                     "steps": [job(retry=RETRY_ONCE), job("wf.next")]})  # fmt: skip
    first, second = (s["job_id"] for s in workflow["steps"])
    await fetch_all(client)
    await fail(client, first)

    # Then the chain failed, and the upkeep does not enqueue the next step
    assert (await workflow_of(client, workflow["id"]))["state"] == "failed"
    await Sweeper(backend_of(app)).tick()
    assert second not in await ids_in_queue(redis_url, prefix)
    assert (await workflow_of(client, workflow["id"]))["steps"][1]["state"] == "pending"

    # When the dead letter is retried: the chain is active again; and when it completes
    await client.post(f"/ojs/v1/dead-letter/{first}/retry")
    await Sweeper(backend_of(app)).tick()
    assert (await workflow_of(client, workflow["id"]))["state"] == "active"
    (again,) = await fetch_all(client)
    await ack(client, again["id"], "fixed")

    # Then the next step comes, with the result, and the chain completes
    (step,) = await fetch_all(client)
    assert (step["id"], step["parent_results"]) == (second, ["fixed"])
    await ack(client, second)
    assert (await workflow_of(client, workflow["id"]))["state"] == "completed"


async def swept(raw: Redis, prefix: str) -> set[str]:
    """The members of the set of workflows the upkeep visits."""
    return {m if isinstance(m, str) else m.decode()
            for m in await raw.smembers(f"{prefix}:ojs:workflows")}  # fmt: skip


async def walk(backend: Backend) -> None:
    """One whole walk of the upkeep over the workflows it visits."""
    cursor = await repair_step(backend, 0)
    while cursor:
        cursor = await repair_step(backend, cursor)


async def test_a_failed_workflow_leaves_the_upkeeps_walk_once_none_of_its_jobs_runs(
    client: httpx.AsyncClient, raw: Redis, prefix: str
) -> None:
    # Given a group one job of which is dead-lettered while the other runs
    workflow = await create(client, {"type": "group",
                                     "jobs": [job(retry=RETRY_ONCE), job()]})  # fmt: skip
    failing, running = (j["job_id"] for j in workflow["jobs"])
    await fetch_all(client)
    await fail(client, failing)

    # Then it is failed, and visited by the upkeep while its other job runs
    assert (await workflow_of(client, workflow["id"]))["state"] == "failed"
    assert await swept(raw, prefix) == {workflow["id"]}

    # When that job completes, the failed workflow leaves the upkeep's walk (its record stays)
    await ack(client, running)
    assert await swept(raw, prefix) == set()
    assert (await workflow_of(client, workflow["id"]))["state"] == "failed"

    # And a retry of its dead letter puts it back, and its completion completes the group
    retried = await client.post(f"/ojs/v1/dead-letter/{failing}/retry")
    assert retried.status_code == 200, retried.text
    assert await swept(raw, prefix) == {workflow["id"]}
    assert (await workflow_of(client, workflow["id"]))["state"] == "active"
    await ack(client, (await fetch_all(client))[0]["id"])
    assert (await workflow_of(client, workflow["id"]))["state"] == "completed"
    assert await swept(raw, prefix) == set()


async def test_a_retry_cut_short_once_the_job_is_back_still_moves_its_workflow_on(
    client: httpx.AsyncClient, app: FastAPI, raw: Redis, prefix: str,
    make_worker: Callable[..., Worker], monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    # Given a chain failed at its first step, out of the upkeep's walk
    workflow = await create(client, {"type": "chain",
                                     "steps": [job(retry=RETRY_ONCE), job()]})  # fmt: skip
    first, second = (s["job_id"] for s in workflow["steps"])
    await fetch_all(client)
    await fail(client, first)
    assert await swept(raw, prefix) == set()

    # When its dead letter is retried by a server that dies once the job is back, before
    # it moves the workflow on
    def died(backend: Backend, job_id: str) -> None:
        raise RuntimeError("the server died")

    monkeypatch.setattr(dead_letters, "job_ended", died)
    backend = backend_of(app)
    with pytest.raises(RuntimeError):
        await DeadLetters(backend).retry(first)
    assert (await workflow_of(client, workflow["id"]))["state"] == "failed"
    assert await swept(raw, prefix) == {f"{workflow['id']} {first}"}

    # And an in-process Worker runs the step (no ACK moves the workflow on)
    make_worker(lambda job: "fixed", QUEUE)

    async def completed() -> bool:
        await walk(backend)
        return (await workflow_of(client, workflow["id"]))["state"] == "completed"

    # Then the upkeep moves the chain on to its end, the step after with the result
    await wait_until(completed, message="the chain completed")
    assert (await state_of(client, second))["parent_results"] == ["fixed"]
    assert await swept(raw, prefix) == set()


async def test_the_upkeep_advances_a_chain_whose_step_an_in_process_worker_ran(
    client: httpx.AsyncClient, app: FastAPI, make_worker: Callable[..., Worker]
) -> None:
    # Given a chain whose steps a lazarus Worker in this process runs (no ACK: no fast path)
    workflow = await create(client, {"type": "chain", "steps": [job("wf.a", 2), job("wf.b")]})
    seen: list[Any] = []

    def process(job: Job) -> Any:
        seen.append(job.data)
        return {"doubled": job.data[0] * 2} if job.data else None

    make_worker(process, QUEUE)
    sweeper = Sweeper(backend_of(app))

    # When the server's upkeep runs
    async def completed() -> bool:
        await sweeper.tick()
        return (await workflow_of(client, workflow["id"]))["state"] == "completed"

    await wait_until(completed, message="the chain completed")

    # Then the second step ran after the first (its args as sent), with the first's result
    assert seen == [[2], []]
    second = await state_of(client, workflow["steps"][1]["job_id"])
    assert second["parent_results"] == [{"doubled": 4}]


async def test_advancing_again_or_at_once_enqueues_nothing_twice(
    client: httpx.AsyncClient, app: FastAPI, raw: Redis, redis_url: str, prefix: str
) -> None:
    # Given a chain whose first step completed, its next step not yet marked enqueued (as if
    # the server died between the enqueue and the mark)
    workflow = await create(client, {"type": "chain", "steps": [job(), job(), job()]})
    steps = [s["job_id"] for s in workflow["steps"]]
    (first,) = await fetch_all(client)
    await ack(client, first["id"])
    await raw.hdel(f"{prefix}:ojs:workflow:{workflow['id']}", f"enq:{steps[1]}")

    # When it is advanced many times at once
    backend = backend_of(app)
    await asyncio.gather(*(advance(backend, workflow["id"]) for _ in range(5)))

    # Then the second step is there once, the third not yet, and a PUSH of a step's id is
    # harmless on the workflow's path
    assert await ids_in_queue(redis_url, prefix) == set(steps[:2])
    again = parse_submission({**job(), "id": steps[1]})
    assert await enqueue_all(backend, [again], existing_ok=True) == []
    assert (await state_of(client, steps[1]))["state"] == "available"
    assert (await fetch_all(client))[0]["id"] == steps[1]
    assert await fetch_all(client) == []


async def test_a_completion_seen_by_several_advances_at_once_is_recorded_once(
    client: httpx.AsyncClient, app: FastAPI, make_worker: Callable[..., Worker]
) -> None:
    # Given a group whose jobs an in-process worker completed (no ACK recorded the end)
    workflow = await create(client, {"type": "group", "jobs": [job(), job()]})
    make_worker(lambda job: None, QUEUE)

    async def all_completed() -> bool:
        jobs = [await state_of(client, j["job_id"]) for j in workflow["jobs"]]
        return all(j["state"] == "completed" for j in jobs)

    await wait_until(all_completed, message="the group's jobs completed")

    # When several advances see it at once
    await asyncio.gather(*(advance(backend_of(app), workflow["id"]) for _ in range(5)))

    # Then the workflow completed, with one event
    assert (await workflow_of(client, workflow["id"]))["state"] == "completed"
    assert await events_of(client) == ["workflow.started", "workflow.completed"]


async def test_cancelling_a_workflow_cancels_its_jobs_and_enqueues_no_more(
    client: httpx.AsyncClient, app: FastAPI, redis_url: str, prefix: str
) -> None:
    # Given a chain whose first step a remote worker holds
    workflow = await create(client, {"type": "chain", "steps": [job(), job()]})
    first, second = (s["job_id"] for s in workflow["steps"])
    await fetch_all(client)

    # When the workflow is cancelled
    response = await client.delete(f"/ojs/v1/workflows/{workflow['id']}")

    # Then it and its active step are cancelled, the worker's ACK is refused, and the upkeep
    # enqueues no next step
    assert response.status_code == 200, response.text
    cancelled = response.json()["workflow"]
    assert (cancelled["state"], cancelled["jobs_cancelled"]) == ("cancelled", 1)
    assert (await state_of(client, first))["state"] == "cancelled"
    refused = await client.post("/ojs/v1/workers/ack", json={"job_id": first})
    assert refused.status_code == 409
    await advance(backend_of(app), workflow["id"])
    await Sweeper(backend_of(app)).tick()
    assert second not in await ids_in_queue(redis_url, prefix)
    assert (await workflow_of(client, workflow["id"]))["state"] == "cancelled"
    assert (await client.delete(f"/ojs/v1/workflows/{workflow['id']}")).status_code == 409
    assert await events_of(client) == ["workflow.started", "workflow.cancelled"]


@pytest.mark.parametrize("first", ["completion", "cancel"])
async def test_a_cancel_racing_the_last_completion_ends_the_workflow_once(
    client: httpx.AsyncClient, app: FastAPI, raw: Redis, prefix: str, first: str
) -> None:
    # Given a workflow read by its last completion and by a cancel, before either acts
    backend = backend_of(app)
    workflow = await create(client, {"type": "group", "jobs": [job()]})
    read = await load(backend, workflow["id"])

    # When one ends it, and then the other, from what it read
    if first == "completion":
        assert await complete_workflow(backend, read)
        with pytest.raises(OjsError) as refused:
            await cancel_read(backend, read)
        assert refused.value.status == 409 and "is completed" in refused.value.message
    else:
        assert await cancel_read(backend, read) == 1
        assert not await complete_workflow(backend, read)

    # Then the first one won: its state, its marker alone, its event alone
    winner = "completed" if first == "completion" else "cancelled"
    assert (await workflow_of(client, workflow["id"]))["state"] == winner
    fields = await raw.hkeys(f"{prefix}:ojs:workflow:{workflow['id']}")
    names = {f if isinstance(f, str) else f.decode() for f in fields}
    assert names & {"completed_at", "cancelled_at"} == {f"{winner}_at"}
    assert await events_of(client) == ["workflow.started", f"workflow.{winner}"]


async def test_a_step_completed_before_a_cancel_is_not_followed_after_it(
    client: httpx.AsyncClient, app: FastAPI, make_worker: Callable[..., Worker]
) -> None:
    # Given a chain whose first step an in-process worker completed (no ACK moved it on)
    workflow = await create(client, {"type": "chain", "steps": [job(), job()]})
    first, second = (s["job_id"] for s in workflow["steps"])
    worker = make_worker(lambda job: "done", QUEUE)

    async def first_completed() -> bool:
        return (await state_of(client, first))["state"] == "completed"

    await wait_until(first_completed, message="the first step completed")
    await worker.close()

    # When the workflow is cancelled, and then the upkeep runs
    response = await client.delete(f"/ojs/v1/workflows/{workflow['id']}")
    assert response.json()["workflow"]["jobs_cancelled"] == 0
    await Sweeper(backend_of(app)).tick()
    await advance(backend_of(app), workflow["id"])

    # Then the second step was never enqueued
    assert (await client.get(f"/ojs/v1/jobs/{second}")).status_code == 404
    assert (await workflow_of(client, workflow["id"]))["steps"][1]["state"] == "pending"


async def test_a_bad_job_refuses_the_whole_workflow_naming_its_field_and_writes_nothing(
    client: httpx.AsyncClient, raw: Redis, prefix: str
) -> None:
    # When the third step of a chain has a bad type
    body = {"type": "chain", "steps": [job(), job(), {"type": "Bad Type", "args": []}]}
    response = await client.post("/ojs/v1/workflows", json=body)

    # Then the answer names the field, and nothing was written
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["details"]["field"] == "steps[2].type"
    assert error["message"].startswith("steps[2]: ")
    written = [k async for k in raw.scan_iter(match=f"{prefix}:*")]
    assert [k for k in written if k != f"{prefix}:audit"] == []  # the request's audit


async def test_workflow_requests_past_a_rule_are_refused_naming_the_field(
    client: httpx.AsyncClient,
) -> None:
    too_many = [job()] * (MAX_WORKFLOW_JOBS + 1)
    cases = [
        ({"type": "dag", "jobs": [job()]}, "type"),
        ({"type": "group", "steps": [job()]}, "jobs"),
        ({"type": "group", "jobs": []}, "jobs"),
        ({"type": "group", "jobs": too_many}, "jobs"),
        ({"type": "chain", "steps": [{**job(), "id": "x"}]}, "steps[0].id"),
        ({"type": "group", "jobs": [job()], "callbacks": {}}, "callbacks"),
        ({"type": "batch", "jobs": [job()], "callbacks": {"on_done": job()}}, "callbacks.on_done"),
        ({"type": "batch", "jobs": [job()], "callbacks": {"on_success": {}}},
         "callbacks.on_success.type"),
    ]  # fmt: skip
    for body, field in cases:
        response = await client.post("/ojs/v1/workflows", json=body)
        assert response.status_code == 400, (body, response.text)
        assert response.json()["error"]["details"]["field"] == field, response.text
    response = await client.post("/ojs/v1/workflows", json={"type": "group", "jobs": too_many})
    assert f"limit of {MAX_WORKFLOW_JOBS}" in response.json()["error"]["message"]


async def test_an_unknown_workflow_is_not_found(client: httpx.AsyncClient) -> None:
    missing = "0190e7a4-0000-7000-8000-000000000000"
    assert (await client.get(f"/ojs/v1/workflows/{missing}")).status_code == 404
    assert (await client.delete(f"/ojs/v1/workflows/{missing}")).status_code == 404


async def test_the_conformance_workflows_complete_on_a_running_server(
    ojs_server: OjsServer, redis_url: str
) -> None:
    # Given a running `lazarus serve`, its upkeep on, and the bodies of L3-001 and L3-002
    chain = {"type": "chain", "jobs": [{"type": "test.produce", "args": ["step1_output"]},
                                       {"type": "test.echo", "args": []},
                                       {"type": "test.echo", "args": []}]}  # fmt: skip
    group = {"type": "group", "jobs": [{"type": "test.echo", "args": [x]} for x in "abc"]}
    async with httpx.AsyncClient(base_url=ojs_server.url) as http:
        created = [await create(http, body) for body in (chain, group)]
        assert [(w["type"], w["state"]) for w in created] == [("chain", "active"),
                                                              ("group", "active")]  # fmt: skip

        # When a remote worker echoes every job it fetches
        async def worked() -> bool:
            fetched = await http.post("/ojs/v1/workers/fetch",
                                      json={"queues": ["default"], "count": 10})  # fmt: skip
            for one in fetched.json()["jobs"]:
                await ack(http, one["id"], one.get("parent_results", one["args"]))
            states = [(await workflow_of(http, w["id"]))["state"] for w in created]
            return states == ["completed", "completed"]

        # Then both workflows complete
        await wait_until(worked, message="both workflows completed")
        (_, second, third) = (await workflow_of(http, created[0]["id"]))["jobs"]
    assert second["result"] == [["step1_output"]] and third["result"] == [[["step1_output"]]]


async def test_a_running_server_advances_a_chain_an_in_process_worker_runs(
    ojs_server: OjsServer, redis_url: str, make_worker: Callable[..., Worker]
) -> None:
    # Given a chain on a running server, whose steps a lazarus Worker runs (no ACK)
    async with httpx.AsyncClient(base_url=ojs_server.url) as http:
        workflow = await create(http, {"type": "chain", "steps": [job(), job(), job()]})
        make_worker(lambda job: "ok", QUEUE, prefix=ojs_server.prefix)

        # Then the server's upkeep moves it on, step by step, to the end
        async def completed() -> bool:
            return (await workflow_of(http, workflow["id"]))["state"] == "completed"

        await wait_until(completed, timeout=20, message="the chain completed")


async def test_the_upkeep_passes_over_a_workflow_it_cannot_advance(
    client: httpx.AsyncClient, app: FastAPI, raw: Redis, prefix: str
) -> None:
    # Given a workflow whose record is broken, beside groups whose job was cancelled alone
    # (a job's own DELETE does not move its workflow on: the upkeep does)
    broken = await create(client, {"type": "group", "jobs": [job()]})
    await raw.hset(f"{prefix}:ojs:workflow:{broken['id']}", "jobs", "not JSON")
    groups = [await create(client, {"type": "group", "jobs": [job()]}) for _ in range(5)]
    for group in groups:
        await client.delete(f"/ojs/v1/jobs/{group['jobs'][0]['job_id']}")

    # When the upkeep walks the open workflows once
    cursor = await repair_step(backend_of(app), 0)
    while cursor:
        cursor = await repair_step(backend_of(app), cursor)

    # Then every group is failed, whatever the order of the walk
    states = [(await workflow_of(client, g["id"]))["state"] for g in groups]
    assert states == ["failed"] * 5
