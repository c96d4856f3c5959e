"""Batch PUSH (``POST /ojs/v1/jobs/batch``): every job is checked by the parser of a single
PUSH before anything is written, and the batch goes in whole or not at all: a bad job, an
id taken, a batch over the limit or a write Redis refuses partway leaves no job of it."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from lazarus import Queue
from lazarus.http import create_app
from lazarus.ojs.envelope import new_id
from lazarus.ojs.jobs import MAX_BATCH

from ..conftest import ON_CLUSTER
from ..faults import Proxy
from .test_input import stored

BATCH = "/ojs/v1/jobs/batch"


def job(queue: str = "mail", **fields: Any) -> dict[str, Any]:
    return {"type": "mail.send", "args": ["ada"], "options": {"queue": queue}, **fields}


async def nothing_of(client: httpx.AsyncClient, ids: list[str]) -> bool:
    """Whether OJS knows none of the jobs ``ids``."""
    found = [(await client.get(f"/ojs/v1/jobs/{job_id}")).status_code for job_id in ids]
    return found == [404] * len(ids)


async def test_a_batch_enqueues_every_job_in_its_own_queue(
    client: httpx.AsyncClient, redis_url: str, prefix: str
) -> None:
    # Given jobs for two queues: one with the client's id, one due in the future
    mine = new_id()
    jobs = [job(id=mine), job(options={"queue": "mail", "delay_until": "2099-01-01T00:00:00Z"}),
            job("reports", args=[1, 2], meta={"by": "ops"})]  # fmt: skip

    # When they are enqueued as one batch
    response = await client.post(BATCH, json={"jobs": jobs})

    # Then all are created, in order, the first under the client's id
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["count"] == 3
    ids = [j["id"] for j in body["jobs"]]
    assert ids[0] == mine
    assert [j["state"] for j in body["jobs"]] == ["available", "scheduled", "available"]
    # and lazarus holds each in its queue, with its type and args
    async with Queue("mail", connection=redis_url, prefix=prefix) as mail, \
            Queue("reports", connection=redis_url, prefix=prefix) as reports:  # fmt: skip
        held = [await mail.get_job(ids[0]), await mail.get_job(ids[1]),
                await reports.get_job(ids[2])]  # fmt: skip
        states = [await mail.get_job_state(ids[0]), await mail.get_job_state(ids[1]),
                  await reports.get_job_state(ids[2])]  # fmt: skip
    assert [(j.name, j.data) for j in held if j is not None] == [
        ("mail.send", ["ada"]), ("mail.send", ["ada"]), ("mail.send", [1, 2])]  # fmt: skip
    assert states == ["prioritized", "delayed", "prioritized"]
    # and each answer is the job as INFO shows it, and each enqueue is an event
    for view in body["jobs"]:
        assert (await client.get(f"/ojs/v1/jobs/{view['id']}")).json()["job"] == view
    events = (await client.get("/ojs/v1/events", params={"types": "job.enqueued"})).json()
    assert [e["data"]["job_id"] for e in events["events"]] == ids


async def test_a_batch_as_large_as_the_limit_goes_in_whole(
    client: httpx.AsyncClient, redis_url: str, prefix: str
) -> None:
    # Given as many jobs as a batch may hold (the spec asks for at least 1,000)
    jobs = [{"type": "bulk.job", "args": [i], "options": {"queue": "bulk"}}
            for i in range(MAX_BATCH)]  # fmt: skip

    # When they are enqueued as one batch
    response = await client.post(BATCH, json={"jobs": jobs})

    # Then every one is waiting in the queue, in order
    assert response.status_code == 201, response.text
    assert response.json()["count"] == MAX_BATCH
    async with Queue("bulk", connection=redis_url, prefix=prefix) as bulk:
        assert (await bulk.get_job_counts())["prioritized"] == MAX_BATCH
        first = await bulk.get_prioritized(0, 0)
    assert [j.data for j in first] == [[0]]


@pytest.mark.parametrize(
    ("jobs", "status", "index", "field"),
    [([job(), job(), {"args": [2], "options": {"queue": "mail"}}], 400, 2, "type"),
     ([job(), job(args={"to": "ada"})], 400, 1, "args"),
     ([job("Mail"), job()], 400, 0, "options.queue"),
     ([job(), job(options={"retry": {"max_attempts": 10**30}})], 422, 1,
      "options.retry.max_attempts"),
     ([job(), job(options={"delay_until": "tomorrow"})], 400, 1, "options.delay_until"),
     ([job(), job(expires_at="9000-01-01T00:00:00Z")], 400, 1, "expires_at"),
     ([job(id="0194ffff-0000-7000-8000-000000000001"), job(),
       job(id="0194ffff-0000-7000-8000-000000000001")], 400, 2, "id"),
     ([job(), "mail.send"], 400, 1, None)],
    ids=["no type", "args not an array", "bad queue", "retry past its cap", "bad due time",
         "expiry too far", "an id twice", "not an object"],
)  # fmt: skip
async def test_a_bad_job_refuses_the_whole_batch_naming_its_index_and_field(
    client: httpx.AsyncClient, raw: Any, prefix: str, jobs: list[Any], status: int, index: int,
    field: str | None,
) -> None:  # fmt: skip
    # Given a store with nothing of OJS yet
    before = await stored(raw, prefix)

    # When a batch holds one job a single PUSH would refuse (or an id twice)
    response = await client.post(BATCH, json={"jobs": jobs})

    # Then the batch is refused, naming the job's index and the field, and nothing was written
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert error["message"].startswith(f"jobs[{index}]: ")
    assert error["details"]["index"] == index
    assert error["details"].get("field") == field
    if field is not None:
        assert field.removeprefix("options.") in error["message"]
    assert await stored(raw, prefix) == before


@pytest.mark.parametrize(
    "body",
    [{}, {"jobs": []}, {"jobs": {"type": "mail.send"}}, [job()]],
    ids=["no jobs", "empty", "an object", "a bare array"],
)  # fmt: skip
async def test_a_batch_without_a_list_of_jobs_is_refused(
    client: httpx.AsyncClient, raw: Any, prefix: str, body: Any
) -> None:
    before = await stored(raw, prefix)

    response = await client.post(BATCH, json=body)

    assert response.status_code == 400, response.text
    assert response.json()["error"]["details"] == {"field": "jobs"}
    assert await stored(raw, prefix) == before


async def test_a_batch_over_the_limit_is_refused_naming_the_limit(
    client: httpx.AsyncClient, raw: Any, prefix: str
) -> None:
    # Given a store with nothing of OJS yet
    before = await stored(raw, prefix)

    # When a batch holds one job more than the limit
    response = await client.post(BATCH, json={"jobs": [job()] * (MAX_BATCH + 1)})

    # Then it is refused, naming the limit, and nothing was written
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["details"] == {"field": "jobs"}
    assert f"{MAX_BATCH + 1} jobs, over the limit of {MAX_BATCH}" in error["message"]
    assert await stored(raw, prefix) == before


@pytest.mark.parametrize("taken_by", ["ojs", "lazarus"])
async def test_an_id_that_exists_refuses_the_whole_batch(
    client: httpx.AsyncClient, raw: Any, redis_url: str, prefix: str, taken_by: str
) -> None:
    # Given a job enqueued under an id, over OJS or by lazarus itself
    taken, fresh = new_id(), new_id()
    if taken_by == "ojs":
        assert (await client.post("/ojs/v1/jobs", json=job(id=taken))).status_code == 201
    else:
        async with Queue("mail", connection=redis_url, prefix=prefix) as mail:
            await mail.add("mail.send", ["bob"], job_id=taken)
    before = await stored(raw, prefix)

    # When a batch holds a new job and one under that id
    response = await client.post(BATCH, json={"jobs": [job(id=fresh), job(id=taken)]})

    # Then it is refused as a duplicate, naming the job's index; nothing was written
    assert response.status_code == 409, response.text
    error = response.json()["error"]
    assert error["code"] == "duplicate"
    assert error["details"] == {"index": 1, "existing_job_id": taken}
    assert await stored(raw, prefix) == before
    async with Queue("mail", connection=redis_url, prefix=prefix) as mail:
        assert await mail.get_job(fresh) is None


async def test_of_two_batches_racing_for_one_id_one_goes_in_whole_and_the_other_not_at_all(
    client: httpx.AsyncClient, redis_url: str, prefix: str
) -> None:
    # Given two batches of fresh jobs that share one id
    shared = new_id()
    first = [job(id=new_id()) for _ in range(20)] + [job(id=shared)]
    second = [job(id=new_id()) for _ in range(20)] + [job(id=shared)]

    # When they are sent at once
    answers = await asyncio.gather(client.post(BATCH, json={"jobs": first}),
                                   client.post(BATCH, json={"jobs": second}))  # fmt: skip

    # Then one went in whole and the other is a duplicate, of which no job was written
    assert sorted(a.status_code for a in answers) == [201, 409], [a.text for a in answers]
    won, lost = (first, second) if answers[0].status_code == 201 else (second, first)
    async with Queue("mail", connection=redis_url, prefix=prefix) as mail:
        assert (await mail.get_job_counts())["prioritized"] == len(won)
        assert [await mail.get_job(j["id"]) for j in lost[:-1]] == [None] * (len(lost) - 1)
    assert await nothing_of(client, [j["id"] for j in lost[:-1]])


class Refuser(Proxy):
    """A proxy that, once armed, answers every command holding ``marker`` with an error, as
    Redis refuses a command (a missing permission, say), without passing it on."""

    def __init__(self, redis_url: str, marker: bytes) -> None:
        super().__init__(redis_url)
        self.marker = marker
        self.armed = False
        self.refused = 0

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        up_reader, up_writer = await asyncio.open_connection(*self._upstream)

        async def to_redis() -> None:
            while data := await reader.read(65536):
                if self.armed and self.marker in data:  # one command: the client awaits it
                    self.refused += 1
                    writer.write(b"-NOPERM refused by the test\r\n")
                    await writer.drain()
                    continue
                up_writer.write(data)
                await up_writer.drain()

        async def to_client() -> None:
            while data := await up_reader.read(65536):
                writer.write(data)
                await writer.drain()

        pipes = [asyncio.create_task(to_redis()), asyncio.create_task(to_client())]
        try:
            await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pipe in pipes:
                pipe.cancel()
            await asyncio.gather(*pipes, return_exceptions=True)
            for stream in (writer, up_writer):
                stream.close()
            self._tasks.discard(task)


@pytest.mark.skipif(ON_CLUSTER, reason="the proxy fronts a single Redis server")
async def test_a_batch_whose_writes_fail_partway_is_taken_back(redis_url: str, prefix: str) -> None:
    # Given a server whose Redis refuses to add jobs to the queue 'locked' (its keys are out
    # of the server's reach), and a batch for 'mail' first, then 'locked'
    mail_ids, locked_ids = [new_id(), new_id()], [new_id()]
    jobs = [job(id=i) for i in mail_ids] + [job("locked", id=i) for i in locked_ids]
    async with Refuser(redis_url, f"{prefix}:{{locked}}:wait".encode()) as proxy:
        app = create_app(connection=proxy.url, prefix=prefix, auth=False)
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            proxy.armed = True

            # When the batch is enqueued: the jobs of 'mail' go in, those of 'locked' cannot
            response = await client.post(BATCH, json={"jobs": jobs})

            # Then the batch fails, and the jobs that went in were taken back: neither
            # lazarus nor OJS knows any job of it
            assert response.status_code == 500, response.text
            assert proxy.refused >= 1
            assert await nothing_of(client, mail_ids + locked_ids)
    async with Queue("mail", connection=redis_url, prefix=prefix) as mail:
        assert [await mail.get_job(i) for i in mail_ids] == [None, None]
        counts = await mail.get_job_counts()
    assert sum(counts.values()) == 0


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [("/ojs/v1/jobs", job("q" * 201), "options.queue"),
     (BATCH, {"jobs": [job("q" * 201)]}, "options.queue"),
     ("/ojs/v1/workers/fetch", {"queues": ["q" * 201]}, "queues")],
    ids=["push", "batch", "fetch"],
)  # fmt: skip
async def test_a_queue_name_longer_than_lazarus_keeps_is_refused(
    client: httpx.AsyncClient, raw: Any, prefix: str, path: str, body: Any, field: str
) -> None:
    # Given a store with nothing of OJS yet
    before = await stored(raw, prefix)

    # When a job or a fetch names a queue of 201 characters (OJS's pattern, lazarus's limit
    # is 200)
    response = await client.post(path, json=body)

    # Then it is refused naming the field and the limit, and nothing was written
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["details"]["field"] == field
    assert "at most 200" in error["message"]
    assert await stored(raw, prefix) == before
