"""The OJS layer beyond the suite: remote workers hold real leases, their failures dead-letter
atomically into the configured dead letter queue, the server recovers what they abandon, and
the test-only directives stay off unless asked for."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from fastapi import FastAPI
from redis.asyncio import Redis

from lazarus import Job, Queue, Worker, _moves, _scripts
from lazarus.cli import main
from lazarus.http import create_app
from lazarus.ojs import Backend
from lazarus.ojs.backend import FETCH_MEMO_MS, MEMO_LOCK_MS
from lazarus.ojs.envelope import MAX_VISIBILITY_MS
from lazarus.ojs.records import RECORD_KEEP_MS, now_ms
from lazarus.ojs.sweeper import Sweeper
from lazarus.ojs.workers import MAX_STALLED

from ..conftest import ON_CLUSTER, wait_for_state, wait_until
from ..faults import ReplyDropper, script_ready

DLQ = "dead"
RETRY_ONCE = {"max_attempts": 1, "on_exhaustion": "dead_letter"}


def backend_of(app: FastAPI) -> Backend:
    (mount,) = [r for r in app.routes if getattr(r, "path", "") == "/ojs"]
    backend: Backend = mount.app.state.ojs  # type: ignore[attr-defined]
    return backend


async def enqueue(client: httpx.AsyncClient, **options: Any) -> str:
    response = await client.post("/ojs/v1/jobs", json={
        "type": "mail.send", "args": ["ada"], "options": {"queue": "mail", **options}})  # fmt: skip
    assert response.status_code == 201, response.text
    return str(response.json()["job"]["id"])


async def fetch(
    client: httpx.AsyncClient, worker: str = "w1", **options: Any
) -> list[dict[str, Any]]:
    response = await client.post(
        "/ojs/v1/workers/fetch", json={"queues": ["mail"], "worker_id": worker, **options}
    )
    jobs: list[dict[str, Any]] = response.json()["jobs"]
    return jobs


async def state_of(client: httpx.AsyncClient, job_id: str) -> dict[str, Any]:
    job: dict[str, Any] = (await client.get(f"/ojs/v1/jobs/{job_id}")).json()["job"]
    return job


async def test_an_exhausted_nack_dead_letters_into_the_configured_queue(
    client: httpx.AsyncClient, redis_url: str, prefix: str, queue: Queue
) -> None:
    # Given a remote worker holding a job that may run once and then dead-letters
    job_id = await enqueue(client, retry=RETRY_ONCE)
    assert [j["id"] for j in await fetch(client)] == [job_id]

    # When it fails
    nack = await client.post("/ojs/v1/workers/nack", json={
        "job_id": job_id, "error": {"code": "handler_error", "message": "smtp down"}})  # fmt: skip

    # Then the job left its queue and is a dead letter of the configured queue, found by its id
    assert nack.json()["state"] == "discarded"
    async with Queue("mail", connection=redis_url, prefix=prefix) as mail:
        assert await mail.get_job(job_id) is None
    async with Queue(DLQ, connection=redis_url, prefix=prefix) as dead:
        letter = await dead.find_dead_letter_by_original_id(job_id)
    assert letter is not None and letter.dead_letter is not None
    assert letter.dead_letter.failed_reason == "smtp down"
    found = await client.get(f"/api/dead-letters/original/{job_id}")
    assert found.status_code == 200
    ojs = (await client.get(f"/ojs/v1/dead-letter/{job_id}")).json()["job"]
    assert [e["message"] for e in ojs["errors"]] == ["smtp down"]


@pytest.mark.skipif(not ON_CLUSTER, reason="a move between cluster slots")
async def test_a_nack_cut_short_between_the_steps_of_its_move_is_finished_by_the_upkeep(
    client: httpx.AsyncClient, app: FastAPI, redis_url: str, prefix: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    # Given a remote worker holding a job whose dead letter queue is in another cluster slot
    backend = backend_of(app)
    assert _moves.crosses(backend.client, backend.keys("mail"), backend.keys(DLQ))
    job_id = await enqueue(client, retry=RETRY_ONCE)
    assert [j["id"] for j in await fetch(client)] == [job_id]

    # When its nack dead-letters it, and the server stops after the move's first step
    async def cut(*args: Any) -> bool:
        raise ConnectionError("the server died here")

    with monkeypatch.context() as patch:
        patch.setattr(_moves, "finish", cut)
        error = {"code": "handler_error", "message": "smtp down"}
        nack = await client.post("/ojs/v1/workers/nack", json={"job_id": job_id, "error": error})
    assert nack.json()["state"] == "discarded"
    async with Queue(DLQ, connection=redis_url, prefix=prefix) as dead:
        assert await dead.find_dead_letter_by_original_id(job_id) is None  # on its way

        # Then the server's upkeep finishes the move: the job is a dead letter, once
        sweeper = Sweeper(backend, records_pause=0)

        async def arrived() -> bool:
            await sweeper.tick()
            return await dead.find_dead_letter_by_original_id(job_id) is not None

        await wait_until(arrived, 15, "the upkeep to finish the move")
        assert await dead.count_dead_letters() == 1
    async with Queue("mail", connection=redis_url, prefix=prefix) as mail:
        assert await mail.get_job(job_id) is None


async def test_a_job_a_remote_worker_abandons_is_recovered(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    # Given a job fetched under a 50 ms visibility timeout, and never reported on
    job_id = await enqueue(client, visibility_timeout_ms=50)
    assert [j["id"] for j in await fetch(client, "gone")] == [job_id]
    sweeper = Sweeper(backend_of(app))

    # When the server's upkeep runs past the lease
    async def available() -> bool:
        await sweeper.tick()
        return (await state_of(client, job_id))["state"] == "available"

    await wait_until(available, message="the abandoned job to be available again")

    # Then another worker gets it (second attempt); the first one's late ack is refused
    again = await fetch(client, "alive")
    assert [(j["id"], j["attempt"]) for j in again] == [(job_id, 2)]
    late = await client.post("/ojs/v1/workers/ack", json={"job_id": job_id, "worker_id": "gone"})
    assert late.status_code == 409
    assert late.json()["error"]["code"] == "conflict"
    ack = await client.post("/ojs/v1/workers/ack", json={"job_id": job_id, "worker_id": "alive"})
    assert ack.status_code == 200
    assert (await state_of(client, job_id))["state"] == "completed"


async def test_a_worker_of_the_queue_sweeps_a_remote_job_under_the_servers_stall_limit(
    client: httpx.AsyncClient, mail: Queue, redis_url: str, prefix: str
) -> None:
    # Given a lazarus Worker of the queue allowing 1 stall (its default), busy with a job of
    # its own so that it only sweeps, and a job a remote worker fetches under a 50 ms lease
    hold = asyncio.Event()

    async def busy(job: Job) -> None:
        await hold.wait()

    blocker = await mail.add("blocker", {})
    worker = Worker("mail", busy, connection=redis_url, prefix=prefix, stalled_interval=50)
    try:
        await wait_for_state(mail, blocker.id, "active")
        job_id = await enqueue(client, visibility_timeout_ms=50)

        # When its lease lapses twice, each time swept by the Worker
        for attempt in (1, 2):
            assert [(j["id"], j["attempt"]) for j in await fetch(client, "gone")] == [
                (job_id, attempt)
            ]
            await wait_for_state(mail, job_id, "waiting")  # the Worker's sweep

        # Then the job is still available (the server allows 5 stalls), and completes
        assert (await state_of(client, job_id))["state"] == "available"
        assert [j["id"] for j in await fetch(client, "alive")] == [job_id]
        done = {"job_id": job_id, "worker_id": "alive"}
        assert (await client.post("/ojs/v1/workers/ack", json=done)).status_code == 200
        assert (await state_of(client, job_id))["state"] == "completed"
    finally:
        hold.set()
        await worker.close()


async def test_a_job_whose_lease_lapses_past_the_limit_is_dead_lettered_by_the_upkeep(
    client: httpx.AsyncClient, app: FastAPI, redis_url: str, prefix: str
) -> None:
    # Given a job fetched under a 50 ms lease, never reported on, fetched again each time the
    # upkeep made it available (on a cluster its dead letter queue is in another slot)
    job_id = await enqueue(client, visibility_timeout_ms=50)
    sweeper = Sweeper(backend_of(app), records_pause=0)

    async def state_is(state: str) -> bool:
        await sweeper.tick()
        return (await state_of(client, job_id))["state"] == state

    for attempt in range(1, MAX_STALLED + 1):
        assert [j["attempt"] for j in await fetch(client, "gone")] == [attempt]
        await wait_until(lambda: state_is("available"), message=f"lapse {attempt}")

    # When its lease lapses once more than the server allows
    assert [j["id"] for j in await fetch(client, "gone")] == [job_id]
    await wait_until(lambda: state_is("discarded"), 15, "the stall past the limit")

    # Then it is a dead letter of the server's dead letter queue, the stall its reason
    async with Queue(DLQ, connection=redis_url, prefix=prefix) as dead:

        async def arrived() -> bool:
            await sweeper.tick()  # a move into another slot is finished by the upkeep
            return await dead.find_dead_letter_by_original_id(job_id) is not None

        await wait_until(arrived, 15, "the dead letter")
        letter = await dead.find_dead_letter_by_original_id(job_id)
    assert letter is not None and letter.dead_letter is not None
    assert letter.dead_letter.reason == "stalled"


@pytest.mark.parametrize("requeue", [False, True], ids=["fail", "requeue"])
async def test_a_nack_from_a_worker_that_does_not_hold_the_job_is_refused(
    client: httpx.AsyncClient, requeue: bool
) -> None:
    # Given a job fetched by one worker
    job_id = await enqueue(client)
    assert [j["id"] for j in await fetch(client, "holder")] == [job_id]

    # When another worker NACKs it
    error = {"code": "handler_error", "message": "not mine"}
    other = await client.post("/ojs/v1/workers/nack", json={
        "job_id": job_id, "worker_id": "stranger", "error": error, "requeue": requeue,
    })  # fmt: skip

    # Then it is refused, and the job stays active with the worker that holds it
    assert other.status_code == 409, other.text
    assert other.json()["error"]["code"] == "conflict"
    assert (await state_of(client, job_id))["state"] == "active"
    ack = await client.post("/ojs/v1/workers/ack", json={"job_id": job_id, "worker_id": "holder"})
    assert ack.status_code == 200


async def test_a_fetch_memo_lives_minutes_though_the_lease_lasts_a_day(
    client: httpx.AsyncClient, app: FastAPI, raw: Redis, prefix: str
) -> None:
    # Given a job fetched under the longest visibility timeout OJS allows (a day)
    job_id = await enqueue(client, visibility_timeout_ms=MAX_VISIBILITY_MS)
    fetched_at = now_ms()
    jobs = await fetch(client, visibility_timeout_ms=MAX_VISIBILITY_MS)
    assert [j["id"] for j in jobs] == [job_id]

    # Then the fetch's reply memo, there for a re-send of its claim, expires within minutes,
    # while the lease runs the whole day
    (memo,) = [key async for key in raw.scan_iter(match=f"{prefix}:*:reply:ojs-*:fetch")]
    assert 0 < await raw.pttl(memo) <= FETCH_MEMO_MS
    keys = backend_of(app).keys("mail")
    ((_, expiry),) = await raw.zrange(keys.leases, 0, -1, withscores=True)
    assert expiry >= fetched_at + MAX_VISIBILITY_MS

    # And the ack's reply memo, the only other one, expires after twice MEMO_LOCK_MS
    ack = await client.post("/ojs/v1/workers/ack", json={"job_id": job_id})
    assert ack.status_code == 200
    base = memo.split(":reply:", 1)[1].removesuffix(":fetch")
    outcome = backend_of(app).memo("mail", base, job_id)
    assert 0 < await raw.pttl(outcome) <= 2 * MEMO_LOCK_MS
    assert {key async for key in raw.scan_iter(match=f"{prefix}:*:reply:*")} == {memo, outcome}


@pytest.mark.skipif(ON_CLUSTER, reason="the proxy fronts a single Redis server")
async def test_a_fetch_whose_reply_a_dropped_connection_lost_hands_out_the_job_it_claimed(
    redis_url: str, prefix: str, raw: Redis
) -> None:
    # Given two waiting jobs, and a server whose connection to Redis drops once, after a claim
    # of a fetch ran and before its reply arrived
    claim = _scripts.load("claim_jobs")
    marker = await script_ready(raw, claim)  # else the reply dropped could be a refusal
    async with ReplyDropper(redis_url, marker) as proxy:
        app = create_app(connection=proxy.url, prefix=prefix, dead_letter_queue=DLQ, auth=False)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            first = await enqueue(client)
            second = await enqueue(client)
            proxy.armed = True

            # When a worker fetches one job under a day's visibility timeout
            jobs = await fetch(client, visibility_timeout_ms=MAX_VISIBILITY_MS)

            # Then the server's client sent the claim again, and the memo answered with the
            # job the first run claimed: it is handed out, on its first attempt, and the
            # second job is still available (a second claim would have taken it, and left
            # the first held by no one)
            assert proxy.dropped == 1
            assert [(j["id"], j["attempt"]) for j in jobs] == [(first, 1)]
            assert (await state_of(client, second))["state"] == "available"
            assert await raw.zcard(backend_of(app).keys("mail").leases) == 1
        await app.state.ops.close()


async def test_one_round_handles_a_bounded_number_of_attempts_past_their_timeout(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    # Given 1,500 attempts past their deadline (of jobs long gone)
    backend = backend_of(app)
    timeouts = backend.records.timeouts
    await backend.client.zadd(timeouts, {f"mail gone{i} t{i}": i for i in range(1500)})

    # When the upkeep runs one round, then another
    sweeper = Sweeper(backend)
    await sweeper.tick()
    after_one = await backend.client.zcard(timeouts)
    await sweeper.tick()

    # Then the first handled a thousand of them (one read of bounded size), the second the rest
    assert (after_one, await backend.client.zcard(timeouts)) == (500, 0)


async def test_an_attempt_past_its_timeout_fails_and_is_retried(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    # Given a job with a 20 ms execution timeout, fetched and left running
    job_id = await enqueue(client, timeout_ms=20, retry={"max_attempts": 2, "jitter": False})
    await fetch(client)
    sweeper = Sweeper(backend_of(app))

    # When the upkeep finds it past its deadline
    async def failed() -> bool:
        await sweeper.tick()
        return (await state_of(client, job_id))["state"] in ("retryable", "available")

    await wait_until(failed, message="the timed-out attempt to fail")

    # Then the attempt failed with a timeout error, per the retry policy
    job = await state_of(client, job_id)
    assert job["errors"][0]["code"] == "timeout"
    assert job["attempt"] == 1


async def test_directives_in_job_metadata_are_ignored_without_test_hooks(
    client: httpx.AsyncClient,
) -> None:
    job_id = await enqueue(client, metadata={"test_directive": "terminate"})
    await fetch(client)

    beat = await client.post("/ojs/v1/workers/heartbeat", json={
        "worker_id": "w1", "active_jobs": [job_id]})  # fmt: skip

    assert beat.json()["state"] == "running"
    assert beat.json()["jobs_extended"] == [job_id]


async def test_a_job_lazarus_added_can_be_fetched_and_acked_over_ojs(
    client: httpx.AsyncClient, redis_url: str, prefix: str
) -> None:
    # Given a job added by lazarus itself, not over OJS
    async with Queue("mail", connection=redis_url, prefix=prefix) as mail:
        added = await mail.add("mail.send", ["grace"])

        # When a remote worker fetches and acks it
        (fetched,) = await fetch(client)
        ack = await client.post("/ojs/v1/workers/ack", json={"job_id": added.id, "result": 7})

        # Then lazarus sees it completed with the result, and the server sweeps its queue
        assert fetched["id"] == added.id and fetched["args"] == ["grace"]
        assert await mail.client.sismember(f"{prefix}:ojs:queues", "mail")
        assert ack.status_code == 200
        assert await mail.get_job_state(added.id) == "completed"
        job = await mail.get_job(added.id)
        assert job is not None and job.return_value == 7


async def test_an_id_lazarus_gave_a_job_already_is_a_duplicate(
    client: httpx.AsyncClient, queue: Queue
) -> None:
    taken = "019461a8-1a2b-7c3d-8e4f-5a6b7c8d9e0f"
    await queue.add("native", ["x"], job_id=taken)

    response = await client.post("/ojs/v1/jobs", json={
        "id": taken, "type": "mail.send", "args": [], "options": {"queue": "jobs"}})  # fmt: skip

    assert response.status_code == 409
    assert response.json()["error"]["code"] == "duplicate"
    job = await queue.get_job(taken)
    assert job is not None and job.name == "native"


async def test_a_worker_on_a_paused_queue_is_told_to_go_quiet(
    client: httpx.AsyncClient, redis_url: str, prefix: str
) -> None:
    # Given a remote worker running a job of 'mail'
    job_id = await enqueue(client)
    await fetch(client)
    beat = {"worker_id": "w1", "active_jobs": [job_id]}
    assert (await client.post("/ojs/v1/workers/heartbeat", json=beat)).json()["state"] == "running"

    # When the queue is paused
    async with Queue("mail", connection=redis_url, prefix=prefix) as mail:
        await mail.pause()

    # Then its next heartbeat says quiet, and its lease is still extended
    answer = (await client.post("/ojs/v1/workers/heartbeat", json=beat)).json()
    assert answer["state"] == "quiet"
    assert answer["jobs_extended"] == [job_id]


async def test_the_records_of_jobs_the_engine_let_go_of_expire_and_leave_the_index(
    client: httpx.AsyncClient, app: FastAPI, raw: Redis, prefix: str, redis_url: str
) -> None:
    # Given a job cancelled over OJS, one acked and then cleaned away, and one still waiting
    cancelled = await enqueue(client)
    assert (await client.delete(f"/ojs/v1/jobs/{cancelled}")).status_code == 200
    cleaned = await enqueue(client)
    await fetch(client)
    assert (await client.post("/ojs/v1/workers/ack", json={"job_id": cleaned})).status_code == 200
    async with Queue("mail", connection=redis_url, prefix=prefix) as mail:
        assert await mail.clean(0, 100, "completed") == [cleaned]
    waiting = await enqueue(client)
    record = f"{prefix}:{{mail}}:ojs:"
    sweeper = Sweeper(backend_of(app), records_pause=0)

    # When the server's upkeep runs
    async def expiring() -> bool:
        await sweeper.tick()
        return all([await raw.pttl(record + cancelled) > 0, await raw.pttl(record + cleaned) > 0])

    await wait_until(expiring, message="the records of the jobs gone to expire")

    # Then those two records expire within a week, the waiting job's is kept, and once they
    # are gone (as a week later) so are their index entries; the cancelled job's view was
    # there until then
    assert await raw.pttl(record + cancelled) <= RECORD_KEEP_MS
    assert await raw.pttl(record + waiting) == -1
    assert (await state_of(client, cancelled))["state"] == "cancelled"
    await raw.delete(record + cancelled, record + cleaned)

    async def forgotten() -> bool:
        await sweeper.tick()
        return await raw.hkeys(f"{prefix}:ojs:index") == [waiting]

    await wait_until(forgotten, message="the index entries of the records gone to go")
    assert (await client.get(f"/ojs/v1/jobs/{cancelled}")).status_code == 404
    assert (await state_of(client, waiting))["state"] == "available"


async def test_the_record_of_a_dead_lettered_job_is_kept_while_its_dead_letter_is(
    client: httpx.AsyncClient, app: FastAPI, raw: Redis, prefix: str, redis_url: str
) -> None:
    # Given a job dead-lettered over OJS, and one cancelled
    dead = await enqueue(client, retry=RETRY_ONCE)
    await fetch(client)
    nack = await client.post("/ojs/v1/workers/nack", json={
        "job_id": dead, "error": {"code": "handler_error", "message": "smtp down"}})  # fmt: skip
    assert nack.json()["state"] == "discarded"
    cancelled = await enqueue(client)
    assert (await client.delete(f"/ojs/v1/jobs/{cancelled}")).status_code == 200
    record = f"{prefix}:{{mail}}:ojs:"
    sweeper = Sweeper(backend_of(app), records_pause=0)

    # When the server's upkeep has walked the records (the cancelled job's expires)
    async def walked() -> bool:
        await sweeper.tick()
        return await raw.pttl(record + cancelled) > 0

    await wait_until(walked, message="the cancelled job's record to expire")

    # Then the dead-lettered job's record (the envelope of its OJS view) is kept
    assert await raw.pttl(record + dead) == -1

    # And once its dead letter is purged, its record expires too
    async with Queue(DLQ, connection=redis_url, prefix=prefix) as dlq:
        assert await dlq.purge_dead_letters() == 1

    async def expiring() -> bool:
        await sweeper.tick()
        return await raw.pttl(record + dead) > 0

    await wait_until(expiring, message="the dead-lettered job's record to expire")
    assert await raw.pttl(record + dead) <= RECORD_KEEP_MS


async def test_a_job_id_taken_in_another_queue_leaves_no_record_behind(
    client: httpx.AsyncClient, raw: Redis, prefix: str
) -> None:
    # Given a job of 'mail'
    job_id = await enqueue(client)

    # When a job with the same id is sent to another queue
    again = await client.post("/ojs/v1/jobs", json={
        "id": job_id, "type": "mail.send", "args": [], "options": {"queue": "other"}})  # fmt: skip

    # Then it is a duplicate, and the other queue holds no record of it
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "duplicate"
    assert not await raw.exists(f"{prefix}:{{other}}:ojs:{job_id}")
    assert await raw.hget(f"{prefix}:ojs:index", job_id) == "mail"


async def test_the_upkeep_stops_promptly_and_reports_an_outage_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Given the upkeep of a server whose Redis is unreachable
    backend = Backend(Redis.from_url("redis://127.0.0.1:1/0"), "t-nowhere")
    sweeper = Sweeper(backend)
    sweeper.start()

    # When it has failed for a few ticks and is stopped
    async def failed_thrice() -> bool:
        return sweeper.failures >= 3

    await wait_until(failed_thrice, message="three failed ticks")
    await asyncio.wait_for(sweeper.stop(), 10)

    # Then the outage was reported once, and the upkeep is over
    assert sum("OJS upkeep failed" in r.getMessage() for r in caplog.records) == 1
    await backend.client.aclose()


def test_serve_refuses_a_dead_letter_queue_name_that_is_not_a_queue_name() -> None:
    result = CliRunner().invoke(
        main, ["serve", "--dead-letter-queue", "a{bad}", "--redis-url", "redis://127.0.0.1:1/0"]
    )

    assert result.exit_code == 2
    assert "dead_letter_queue" in result.output


@pytest.mark.parametrize("url", ["redis://127.0.0.1:1/0", "redis+cluster://127.0.0.1:1"])
async def test_a_request_while_redis_is_unreachable_is_a_retryable_503(url: str) -> None:
    # Given a server whose Redis (or Redis Cluster) cannot be reached
    app = create_app(connection=url, prefix="p", auth=False)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        # When a worker fetches
        response = await client.post("/ojs/v1/workers/fetch", json={"queues": ["mail"]})

    # Then the answer says the backend is away, and to try again
    assert response.status_code == 503, response.text
    assert response.json()["error"]["code"] == "backend_error"
    assert response.json()["error"]["retryable"] is True
