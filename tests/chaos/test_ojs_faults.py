"""OJS's single jobs while the ``lazarus serve`` that runs them is SIGKILLed and restarted:
a client PUSHes jobs under ids of its own (sent again while the server is away), a remote
worker NACKs each job's first run past its retries into the server's dead letter queue and
ACKs its next, and an operator retries every dead letter it lists (OJS's retry: the job
again, under its own id). Every job pushed ends completed, once: none lost to a PUSH, a
dead-lettering or a retry cut short, none left a dead letter."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections import Counter
from typing import Any

import httpx
import pytest

from lazarus.ojs.backend import DEFAULT_DEAD_LETTER_QUEUE
from lazarus.ojs.envelope import new_id

from .audit import Snapshot, place, snapshot
from .harness import PREFIX, Scenario
from .report import Findings
from .test_workflow_faults import Server, call

pytestmark = pytest.mark.chaos

JOBS, KILLS, QUEUE, BURST = 96, 12, "ojs-storm", 8
KINDS = ("push", "nack", "retry", "ack")  # the POSTs the kills aim at, in turn
RETRY_ONCE = {"max_attempts": 1, "on_exhaustion": "dead_letter"}


def judge(findings: Findings, ids: list[str], snap: Snapshot, states: dict[str, Any]) -> None:
    """Each job completed, in its queue once, with no dead letter left."""
    for job_id in ids:
        place(findings, job_id, snap)
    findings.broken["job not completed"] = [
        f"{job_id}: {states[job_id]}" for job_id in ids if states[job_id] != "completed"
    ]
    findings.broken["dead letter left"] = sorted(j for j in ids if snap.dead.get(j))


class Actors:
    """The client that pushes, the remote worker and the operator, sharing what they saw."""

    def __init__(self, client: httpx.AsyncClient, ids: list[str]) -> None:
        self.client, self.ids = client, ids
        self.stop = asyncio.Event()
        self.nacked: set[str] = set()
        self.acked: Counter[str] = Counter()  # ACKs answered 200
        self.retried = 0  # retries answered 200
        self.refused = 0  # PUSHes answered 409
        # Per kind of POST, set while one is on its way or being answered
        self.sending = {kind: asyncio.Event() for kind in KINDS}
        self.in_flight: Counter[str] = Counter()

    async def post(self, kind: str, path: str, **kwargs: Any) -> httpx.Response:
        """A POST, sent again while the server is away, telling the storm it is in flight."""
        self.in_flight[kind] += 1
        self.sending[kind].set()
        try:
            answer: httpx.Response = await call(self.client, "POST", path, **kwargs)
            return answer
        finally:
            self.in_flight[kind] -= 1
            if not self.in_flight[kind]:
                self.sending[kind].clear()

    async def push(self) -> None:
        """Each job once, in bursts of :data:`BURST` at once spread over the storm, sent
        again while the server is away: a 201, or a 409 (it is there)."""

        async def one(i: int, job_id: str) -> None:
            answer = await self.post("push", "/ojs/v1/jobs", json={
                "type": "storm.job", "args": [i], "id": job_id,
                "options": {"queue": QUEUE, "retry": RETRY_ONCE}})  # fmt: skip
            self.refused += answer.status_code == 409  # sent again after a write of it

        for start in range(0, len(self.ids), BURST):
            burst = self.ids[start : start + BURST]
            await asyncio.gather(*(one(start + i, job_id) for i, job_id in enumerate(burst)))
            await asyncio.sleep(2.0)  # the bursts spread over the storm

    async def work(self) -> None:
        """NACK each job's first run, ACK the next."""
        while not self.stop.is_set():
            fetched = await call(self.client, "POST", "/ojs/v1/workers/fetch", json={
                "queues": [QUEUE], "count": 8, "worker_id": "remote",
                "visibility_timeout_ms": 1000})  # fmt: skip
            jobs = fetched.json().get("jobs", []) if fetched.status_code == 200 else []
            for job in jobs:
                if job["id"] not in self.nacked:
                    self.nacked.add(job["id"])
                    error = {"code": "handler_error", "message": "first run"}
                    nack = {"job_id": job["id"], "error": error}
                    await self.post("nack", "/ojs/v1/workers/nack", json=nack)
                else:
                    report = {"job_id": job["id"], "result": job["args"]}
                    answer = await self.post("ack", "/ojs/v1/workers/ack", json=report)
                    self.acked[job["id"]] += answer.status_code == 200
            if not jobs:
                await asyncio.sleep(0.05)  # nothing to do yet

    async def retry(self) -> None:
        """Retry every dead letter listed, look again."""
        while not self.stop.is_set():
            page = await call(self.client, "GET", "/ojs/v1/dead-letter", params={"limit": 100})
            letters = page.json().get("jobs", []) if page.status_code == 200 else []
            for letter in letters:
                path = f"/ojs/v1/dead-letter/{letter['id']}/retry"
                self.retried += (await self.post("retry", path)).status_code == 200
            await asyncio.sleep(0.2)  # the operator's next look


@pytest.mark.timeout(300)
async def test_pushes_nacks_and_dead_letter_retries_ride_a_server_sigkill_storm(
    scenario: Scenario,
) -> None:
    # Given a lazarus serve, a client pushing jobs under its own ids, a remote worker that
    # NACKs each job's first run (it may run once, then dead-letters) and ACKs the next,
    # and an operator retrying the dead letters it lists
    server = scenario.redis()
    serve = Server(server.url, (scenario.tmp / "serve.err").open("ab"))
    serve.start()
    ids = [new_id() for _ in range(JOBS)]
    queue = scenario.queue(server, QUEUE)
    dlq = scenario.queue(server, DEFAULT_DEAD_LETTER_QUEUE)
    async with httpx.AsyncClient(base_url=serve.url) as client:
        actors = Actors(client, ids)

        # When the server is SIGKILLed, KILLS times, 1.5 s apart, each time within 50 ms of a
        # POST sent (a PUSH, a NACK, a retry, an ACK in turn: its answer half made), and
        # started again; all go on until every job completed and no dead letter is left
        tasks = [asyncio.create_task(t()) for t in (actors.push, actors.work, actors.retry)]
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline:
            await call(client, "GET", "/ojs/v1/health")  # up again
            await asyncio.sleep(1.5)  # the storm's own pace
            if serve.kills < KILLS:
                with contextlib.suppress(asyncio.TimeoutError):
                    aim = actors.sending[KINDS[serve.kills % len(KINDS)]]
                    await asyncio.wait_for(aim.wait(), 1.0)
                await asyncio.sleep(random.uniform(0, 0.05))  # into the requests' work
                serve.kill()
                serve.start()
                continue
            completed = (await queue.get_job_counts()).get("completed", 0)
            if completed >= JOBS and await dlq.count_dead_letters() == 0:
                break
        actors.stop.set()
        if not tasks[0].done():  # the storm outlasted the pushes
            tasks[0].cancel()
        ends = await asyncio.gather(*tasks, return_exceptions=True)
        died = [repr(end) for end in ends if isinstance(end, Exception)]
        states = {}
        for job_id in ids:
            answer = await call(client, "GET", f"/ojs/v1/jobs/{job_id}")
            states[job_id] = answer.json().get("job", {}).get("state", answer.status_code)
    serve.stop()

    # Then every job completed, once, in its queue; no dead letter is left
    findings = Findings(
        "OJS pushes, nacks and dead letter retries in a server SIGKILL storm", JOBS,
        f"{JOBS} jobs pushed under their own ids, each nacked into the dead letter queue, "
        f"retried and acked; {serve.kills} SIGKILLs of lazarus serve, 1.5 s apart, each "
        "within 50 ms of a PUSH, NACK, retry or ACK in turn",
    )  # fmt: skip
    judge(findings, ids, await snapshot(scenario.raw(server), PREFIX, QUEUE, dlq), states)
    findings.broken["client, worker or operator died"] = died
    findings.exec_dups = sum(n - 1 for n in actors.acked.values() if n > 1)
    findings.spurious_stalls = None  # leases lapse on purpose: the server dies under them
    findings.notes.append(
        f"{actors.refused} PUSHes answered 409, {len(actors.nacked)} jobs nacked, "
        f"{actors.retried} retries answered 200, "
        f"{sum(actors.acked.values())} ACKs answered 200; {serve.kills} kills"
    )
    await scenario.finish(findings)
