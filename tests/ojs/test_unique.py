"""Unique jobs over OJS (L4-UNIQ): ``options.unique`` makes a key of the job's type and the
args fields it selects, held in its queue by lazarus's deduplication; a push whose key is
held is refused (``reject``, 409 ``duplicate``), answered the holder (``use_existing``, or
``ignore``), or replaces a holder that never ran (``replace``)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from lazarus import Queue

from ..conftest import wait_until
from .test_input import stored


# A refused push reads the job that holds the key: a read may finish the incremental rehash
# of a large hash, which changes its DUMP but not its contents.
async def contents(raw: Any, prefix: str) -> dict[str, Any]:
    """What :func:`stored` compares, with each hash as its fields."""
    found: dict[str, Any] = {}
    for key, dumped in (await stored(raw, prefix)).items():
        is_hash = await raw.type(key) == "hash"
        found[key] = await raw.hgetall(key) if is_hash else dumped
    return found


JOBS = "/ojs/v1/jobs"


def job(args: list[Any], unique: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    options = {"queue": fields.pop("queue", "mail"), "unique": unique or {}}
    options.update(fields.pop("options", {}))
    return {"type": fields.pop("type", "mail.send"), "args": args, "options": options, **fields}


async def push(client: httpx.AsyncClient, body: dict[str, Any], status: int = 201) -> Any:
    """Push ``body``, expecting ``status``; the answer, which locates the job it shows."""
    response = await client.post(JOBS, json=body)
    assert response.status_code == status, response.text
    assert response.headers["location"] == f"{JOBS}/{response.json()['job']['id']}"
    return response.json()


async def ack_next(client: httpx.AsyncClient, job_id: str) -> None:
    """Fetch job ``job_id`` from 'mail' and ACK it."""
    fetched = await client.post("/ojs/v1/workers/fetch", json={"queues": ["mail"]})
    assert [j["id"] for j in fetched.json()["jobs"]] == [job_id]
    acked = await client.post("/ojs/v1/workers/ack", json={"job_id": job_id, "result": None})
    assert acked.status_code == 200, acked.text


async def test_a_duplicate_is_refused_with_the_holder_and_writes_nothing(
    client: httpx.AsyncClient, raw: Any, prefix: str, mail: Queue
) -> None:
    # Given a unique job in 'mail'
    first = (await push(client, job(["ada", "welcome"])))["job"]["id"]
    before = await contents(raw, prefix)

    # When the same job is pushed again
    response = await client.post(JOBS, json=job(["ada", "welcome"]))

    # Then it is refused as a duplicate naming the job that holds the key
    assert response.status_code == 409, response.text
    error = response.json()["error"]
    assert error["code"] == "duplicate" and error["retryable"] is False
    assert error["details"]["existing_job_id"] == first
    assert error["details"]["existing_state"] == "available"
    assert error["details"]["unique_key"].startswith("ojs:")
    # and nothing is written: one job in the queue, no record, no event
    assert await contents(raw, prefix) == before
    assert (await mail.get_job_counts())["prioritized"] == 1


async def test_the_selected_args_fields_alone_make_the_key(client: httpx.AsyncClient) -> None:
    # Given a job unique by the 'user' field of its args
    unique = {"key": ["user"]}
    first = await push(client, job([{"user": 7, "template": "welcome"}], unique))

    # When one differing in another field only is pushed (its fields in another order)
    other_field = await client.post(JOBS, json=job([{"template": "bye", "user": 7}], unique))
    # and one whose 'user' differs
    other_user = await client.post(JOBS, json=job([{"user": 8, "template": "welcome"}], unique))

    # Then the first is a duplicate of the job, the second is a job of its own
    assert other_field.status_code == 409, other_field.text
    assert other_field.json()["error"]["details"]["existing_job_id"] == first["job"]["id"]
    assert other_user.status_code == 201, other_user.text


async def test_without_key_every_arg_counts_and_openapis_keys_is_the_same(
    client: httpx.AsyncClient,
) -> None:
    # Given a job unique by all its args
    await push(client, job([1, {"a": 1}]))

    # When jobs are pushed with other args, or with the OpenAPI spelling 'keys'
    other_args = await client.post(JOBS, json=job([1, {"a": 2}]))
    by_keys = await push(client, job([{"a": 9, "b": 1}], {"keys": ["a"]}))
    same_a = await client.post(JOBS, json=job([{"a": 9, "b": 2}], {"key": ["a"]}))

    # Then other args make another job, and 'keys' selects fields as 'key' does
    assert other_args.status_code == 201, other_args.text
    assert same_a.status_code == 409
    assert same_a.json()["error"]["details"]["existing_job_id"] == by_keys["job"]["id"]


async def test_type_and_queue_are_dimensions_of_the_key(client: httpx.AsyncClient) -> None:
    # Given a unique job of type mail.send in 'mail'
    await push(client, job(["ada"]))

    # When the same args are pushed as another type, and into another queue
    other_type = await client.post(JOBS, json=job(["ada"], type="mail.bounce"))
    other_queue = await client.post(JOBS, json=job(["ada"], queue="reports"))

    # Then each is a job of its own
    assert (other_type.status_code, other_queue.status_code) == (201, 201)


async def test_without_a_period_the_key_is_free_once_the_job_has_ended(
    client: httpx.AsyncClient,
) -> None:
    # Given a unique job, fetched (active: still held)
    first = (await push(client, job(["ada"])))["job"]["id"]
    fetched = await client.post("/ojs/v1/workers/fetch", json={"queues": ["mail"]})
    assert [j["id"] for j in fetched.json()["jobs"]] == [first]
    assert (await client.post(JOBS, json=job(["ada"]))).status_code == 409

    # When it completes
    acked = await client.post("/ojs/v1/workers/ack", json={"job_id": first, "result": None})
    assert acked.status_code == 200, acked.text

    # Then the same job may be pushed again
    await push(client, job(["ada"]))


async def test_a_cancelled_job_frees_its_key(client: httpx.AsyncClient) -> None:
    # Given a unique job, cancelled
    first = (await push(client, job(["ada"])))["job"]["id"]
    assert (await client.delete(f"{JOBS}/{first}")).status_code == 200

    # When the same job is pushed again, then it is added
    await push(client, job(["ada"]))


async def test_a_period_holds_the_key_past_the_job_until_it_runs_out(
    client: httpx.AsyncClient,
) -> None:
    # Given a job unique for a short period, already completed
    unique = {"period": "PT2S"}
    first = (await push(client, job(["ada"], unique)))["job"]["id"]
    await ack_next(client, first)

    # When the same job is pushed within the period, then it is a duplicate
    again = await client.post(JOBS, json=job(["ada"], unique))
    assert again.status_code == 409, again.text
    assert again.json()["error"]["details"]["existing_job_id"] == first

    # and once the period has run out it is added
    async def added() -> bool:
        return (await client.post(JOBS, json=job(["ada"], unique))).status_code == 201

    await wait_until(added, 10, "the period to run out")


async def test_use_existing_and_ignore_answer_the_holder_and_write_nothing(
    client: httpx.AsyncClient, raw: Any, prefix: str
) -> None:
    # Given a unique job
    first = (await push(client, job(["ada"])))["job"]
    before = await contents(raw, prefix)

    # When it is pushed again with use_existing, or with the JSON format's 'ignore'
    existing = await push(client, job(["ada"], {"on_conflict": "use_existing"}), 200)
    ignored = await push(client, job(["ada"], {"on_conflict": "ignore"}), 200)

    # Then each answer is the job that holds the key, and nothing is written
    assert existing["job"] == ignored["job"] == first
    assert await contents(raw, prefix) == before


async def test_replace_takes_the_place_of_a_holder_that_never_ran(
    client: httpx.AsyncClient, mail: Queue
) -> None:
    # Given a unique job scheduled for later
    later = {"delay_until": "2099-01-01T00:00:00Z"}
    first = (await push(client, job(["ada"], options=later)))["job"]["id"]

    # When the same job is pushed with on_conflict replace
    second = (await push(client, job(["ada"], {"on_conflict": "replace"})))["job"]

    # Then the new job is added and the old one is gone, cancelled to OJS
    assert second["state"] == "available"
    assert await mail.get_job(first) is None
    assert (await client.get(f"{JOBS}/{first}")).json()["job"]["state"] == "cancelled"
    # and the new one holds the key now
    again = await client.post(JOBS, json=job(["ada"]))
    assert again.json()["error"]["details"]["existing_job_id"] == second["id"]


async def test_replace_of_a_holder_that_may_run_is_refused(
    client: httpx.AsyncClient, mail: Queue
) -> None:
    # Given a unique job available to workers
    first = (await push(client, job(["ada"])))["job"]["id"]

    # When the same job is pushed with on_conflict replace
    response = await client.post(JOBS, json=job(["ada"], {"on_conflict": "replace"}))

    # Then it is refused as a duplicate, and the first job stays
    assert response.status_code == 409, response.text
    assert response.json()["error"]["details"]["existing_job_id"] == first
    assert await mail.get_job_state(first) == "prioritized"


async def test_concurrent_pushes_of_one_key_add_one_job(
    client: httpx.AsyncClient, raw: Any, prefix: str, mail: Queue
) -> None:
    # When twenty pushes of one unique job race
    responses = await asyncio.gather(*(client.post(JOBS, json=job(["ada"])) for _ in range(20)))

    # Then one is added and the others are refused naming it
    codes = sorted(r.status_code for r in responses)
    assert codes == [201] + [409] * 19
    [added] = [r.json()["job"]["id"] for r in responses if r.status_code == 201]
    holders = {r.json()["error"]["details"]["existing_job_id"] for r in responses
               if r.status_code == 409}  # fmt: skip
    assert holders == {added}
    # and lazarus holds that one job, OJS knows no other (a refused push leaves no record)
    assert (await mail.get_job_counts())["prioritized"] == 1
    assert await raw.hkeys(f"{prefix}:ojs:index") == [added]


async def test_the_enqueued_event_carries_the_unique_key(client: httpx.AsyncClient) -> None:
    # Given a unique job and a plain one
    unique_id = (await push(client, job(["ada"])))["job"]["id"]
    plain = await push(client, {"type": "mail.send", "args": [], "options": {"queue": "mail"}})

    # When the enqueue events are read
    events = (await client.get("/ojs/v1/events", params={"types": "job.enqueued"})).json()
    data = {e["data"]["job_id"]: e["data"] for e in events["events"]}

    # Then the unique job's names its key, the plain one's none
    duplicate = await client.post(JOBS, json=job(["ada"]))
    assert data[unique_id]["unique_key"] == duplicate.json()["error"]["details"]["unique_key"]
    assert "unique_key" not in data[plain["job"]["id"]]


async def test_a_batch_with_a_held_key_is_refused_whole(
    client: httpx.AsyncClient, raw: Any, prefix: str
) -> None:
    # Given a unique job in 'mail'
    first = (await push(client, job(["ada"])))["job"]["id"]
    before = await stored(raw, prefix)

    # When a batch holds a free job and a duplicate of it (even one asking for the holder)
    batch = [job(["bob"]), job(["ada"], {"on_conflict": "use_existing"})]
    response = await client.post(f"{JOBS}/batch", json={"jobs": batch})

    # Then the batch is refused naming the duplicate, and nothing is written
    assert response.status_code == 409, response.text
    details = response.json()["error"]["details"]
    assert (details["index"], details["existing_job_id"]) == (1, first)
    assert await stored(raw, prefix) == before


async def test_a_batch_holding_one_key_twice_is_refused_whole(
    client: httpx.AsyncClient, raw: Any, prefix: str
) -> None:
    before = await stored(raw, prefix)

    # When a batch holds two jobs of one unique key
    batch = [job(["ada"]), job(["bob"]), job(["ada"])]
    response = await client.post(f"{JOBS}/batch", json={"jobs": batch})

    # Then it is refused naming the second and the first, and nothing is written
    assert response.status_code == 409, response.text
    details = response.json()["error"]["details"]
    assert (details["index"], details["conflicting_index"]) == (2, 0)
    assert await stored(raw, prefix) == before


async def test_a_batch_of_unique_jobs_takes_their_keys(client: httpx.AsyncClient) -> None:
    # Given a batch of unique jobs, added
    response = await client.post(f"{JOBS}/batch", json={"jobs": [job(["ada"]), job(["bob"])]})
    assert response.status_code == 201, response.text
    ids = [j["id"] for j in response.json()["jobs"]]

    # When one of them is pushed again, then it is a duplicate of the batch's job
    again = await client.post(JOBS, json=job(["bob"]))
    assert again.json()["error"]["details"]["existing_job_id"] == ids[1]


@pytest.mark.parametrize(
    ("unique", "field"),
    [("yes", "options.unique"), ({"keys": "user"}, "options.unique.keys"),
     ({"key": [1]}, "options.unique.key"), ({"key": ["a"], "keys": ["a"]}, "options.unique.keys"),
     ({"period": "1h"}, "options.unique.period"), ({"period": "PT0S"}, "options.unique.period"),
     ({"on_conflict": "merge"}, "options.unique.on_conflict"),
     ({"states": ["available"]}, "options.unique.states"),
     ({"states": ["cancelled"], "period": "PT1H"}, "options.unique.states"),
     ({"scope": "global"}, "options.unique.scope")],
)  # fmt: skip
async def test_a_bad_unique_policy_is_refused_naming_its_field_and_writes_nothing(
    client: httpx.AsyncClient, raw: Any, prefix: str, unique: Any, field: str
) -> None:
    before = await stored(raw, prefix)

    # When a job is pushed with a unique policy lazarus cannot honour as asked
    body = {"type": "mail.send", "args": [], "options": {"queue": "mail", "unique": unique}}
    response = await client.post(JOBS, json=body)

    # Then it is refused naming the field, and nothing is written
    assert response.status_code == 400, response.text
    assert response.json()["error"]["details"]["field"] == field
    assert await stored(raw, prefix) == before


async def test_states_of_a_job_not_ended_or_any_with_a_period_are_taken(
    client: httpx.AsyncClient,
) -> None:
    live = ["scheduled", "available", "pending", "active", "retryable"]
    await push(client, job(["a"], {"states": live}))
    await push(client, job(["b"], {"states": ["available", "completed"], "period": "PT1H"}))


async def test_cron_jobs_and_workflow_steps_are_not_unique_jobs(
    client: httpx.AsyncClient,
) -> None:
    # When a cron job's template or a workflow's step asks to be unique
    template = job(["ada"])
    cron = await client.post("/ojs/v1/cron", json={
        "name": "nightly", "expression": "0 0 1 1 *", "job_template": template})  # fmt: skip
    workflow = await client.post("/ojs/v1/workflows", json={
        "type": "chain", "name": "w", "steps": [template]})  # fmt: skip

    # Then each is refused naming the field
    assert cron.status_code == 400, cron.text
    assert cron.json()["error"]["details"]["field"] == "job_template.options.unique"
    assert workflow.status_code == 400, workflow.text
    assert workflow.json()["error"]["details"]["field"] == "steps[0].options.unique"
