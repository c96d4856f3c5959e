"""OJS on Redis Cluster while the ``lazarus serve`` that runs it is SIGKILLed and restarted:
a remote worker acks half of the jobs and nacks the other half past their retries into the
server's dead letter queue, which lives in another slot (a move in two steps). Every job
ends once: completed, or one dead letter, never both, never neither."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from lazarus import _moves
from lazarus._keys import QueueKeys
from lazarus.ojs.backend import DEFAULT_DEAD_LETTER_QUEUE

from .audit import Snapshot, place, snapshot
from .harness import PREFIX, Scenario
from .report import Findings
from .test_workflow_faults import Server, call

pytestmark = pytest.mark.chaos

JOBS, KILLS, QUEUE = 240, 6, "ojs-nacks"
RETRY_ONCE = {"max_attempts": 1, "on_exhaustion": "dead_letter"}
DLQ = DEFAULT_DEAD_LETTER_QUEUE


async def enqueue(client: httpx.AsyncClient) -> dict[str, int]:
    """The ids of the jobs added, each with its number (even: acked, odd: nacked)."""
    ids = {}
    for i in range(JOBS):
        answer = await call(client, "POST", "/ojs/v1/jobs", json={
            "type": "n.job", "args": [i],
            "options": {"queue": QUEUE, "retry": RETRY_ONCE}})  # fmt: skip
        if answer.status_code == 201:
            ids[answer.json()["job"]["id"]] = i
    return ids


async def judge(findings: Findings, ids: dict[str, int], snap: Snapshot) -> None:
    """Each job in one place once: completed (an even one) or one dead letter (an odd one,
    or one whose leases lapsed past the server's limit)."""
    wrong = []
    for job_id, i in ids.items():
        states, letters = place(findings, job_id, snap)
        meta = letters[0].dead_letter if len(letters) == 1 and not states else None
        if meta is not None and meta.reason == "stalled":
            continue  # the server died under its leases too often: a dead letter either way
        if bool(letters) != (i % 2 == 1) or (not letters and states != {"completed"}):
            wrong.append(job_id)
    findings.broken["outcome other than the worker's report"] = wrong


@pytest.mark.timeout(300)
async def test_ojs_nacks_into_another_slot_ride_a_server_sigkill_storm(
    scenario: Scenario,
) -> None:
    # Given a Redis Cluster whose OJS dead letter queue is in another slot than the queue,
    # a lazarus serve on it, and jobs of which the remote worker acks the even, nacks the odd
    cluster = scenario.cluster()
    raw = scenario.raw(cluster)
    assert _moves.crosses(
        raw, QueueKeys(PREFIX, QUEUE), QueueKeys(PREFIX, DEFAULT_DEAD_LETTER_QUEUE)
    )
    serve = Server(cluster.url, (scenario.tmp / "serve.err").open("ab"))
    serve.start()
    answers: dict[str, int] = {}  # job id -> the worker's reports answered 200
    async with httpx.AsyncClient(base_url=serve.url) as client:
        ids = await enqueue(client)
        stop = asyncio.Event()

        async def work() -> None:
            while not stop.is_set():
                fetched = await call(client, "POST", "/ojs/v1/workers/fetch", json={
                    "queues": [QUEUE], "count": 8, "worker_id": "remote",
                    "visibility_timeout_ms": 1000})  # fmt: skip
                jobs = fetched.json().get("jobs", []) if fetched.status_code == 200 else []
                for job in jobs:
                    if job["args"][0] % 2 == 0:
                        report = await call(client, "POST", "/ojs/v1/workers/ack",
                                            json={"job_id": job["id"]})  # fmt: skip
                    else:
                        report = await call(client, "POST", "/ojs/v1/workers/nack", json={
                            "job_id": job["id"],
                            "error": {"code": "handler_error", "message": "doomed"}})  # fmt: skip
                    if report.status_code == 200:
                        answers[job["id"]] = answers.get(job["id"], 0) + 1
                if not jobs:
                    await asyncio.sleep(0.05)  # nothing to do yet

        # When the server is SIGKILLed and started again every 1.5 s, KILLS times, and the
        # worker goes on until every job is over (a cut-short move finished by the upkeep)
        worker = asyncio.create_task(work())
        dlq = scenario.queue(cluster, DLQ)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            await asyncio.sleep(1.5)  # the storm's own pace
            if serve.kills < KILLS:
                serve.kill()
                serve.start()
                continue
            counts = await scenario.queue(cluster, QUEUE).get_job_counts()
            over = counts.get("completed", 0) + await dlq.count_dead_letters()
            if over >= len(ids):
                break
        stop.set()
        await worker
    serve.stop()

    # Then every job ended once: the even ones completed, the odd ones one dead letter each
    findings = Findings(
        "OJS on a cluster: nacks into another slot, server SIGKILL storm", len(ids),
        f"{len(ids)} jobs acked or nacked past their retries by a remote worker; "
        f"{serve.kills} SIGKILLs of lazarus serve, 1 per 1.5 s; dead letter queue in another slot",
    )  # fmt: skip
    await judge(findings, ids, await snapshot(raw, PREFIX, QUEUE, dlq))
    moving = await raw.hlen(QueueKeys(PREFIX, QUEUE).moves)
    findings.half_moved += [f"{moving} moves left"] if moving else []
    findings.spurious_stalls = None  # leases lapse on purpose: the server dies under them
    findings.notes.append(
        f"{sum(1 for i in ids.values() if i % 2)} nacked, {await dlq.count_dead_letters()} "
        "dead letters, "
        f"{sum(answers.values())} reports answered 200; {serve.kills} kills"
    )
    await scenario.finish(findings)
