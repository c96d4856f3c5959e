"""OJS workflows worked by a remote worker over HTTP and by an in-process Worker, while the
``lazarus serve`` that runs them is SIGKILLed and restarted: every chain step is enqueued
once, in order, with its parent's result, every batch callback once, and every workflow
completes."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from typing import Any

import httpx
import pytest

from lazarus import DeadLetterView, Job, Worker

from .harness import PREFIX, Scenario
from .report import Findings

pytestmark = pytest.mark.chaos

CHAINS, BATCHES, STEPS = 30, 10, 3
LOCAL = "in-process"  # a run by the in-process Worker, which sees no parent_results


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Server:
    """``lazarus serve`` on one port, started again after each SIGKILL."""

    def __init__(self, redis_url: str, log: Any, *extra: str) -> None:
        self.port, self.redis_url, self.log, self.extra = _free_port(), redis_url, log, extra
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None
        self.kills = 0
        self.killed_at: list[int] = []  # wall-clock ms of each kill

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("LAZARUS_")}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "lazarus.cli", "serve", "--port", str(self.port),
             "--redis-url", self.redis_url, "--prefix", PREFIX, "--insecure-no-auth",
             *self.extra],
            env=env, stdout=subprocess.DEVNULL, stderr=self.log,
        )  # fmt: skip

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        self.kills += 1
        self.killed_at.append(int(time.time() * 1000))

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)


async def call(client: httpx.AsyncClient, method: str, path: str, **kwargs: Any) -> Any:
    """The answer of a request, sent again while the server is down or restarting."""
    while True:
        with contextlib.suppress(httpx.TransportError):
            response = await client.request(method, path, timeout=5, **kwargs)
            if response.status_code < 500:
                return response
        await asyncio.sleep(0.05)  # the server's restart


async def create(client: httpx.AsyncClient) -> tuple[list[str], list[str]]:
    """The ids of the chains and of the batches created."""
    chains, batches = [], []
    for w in range(CHAINS):
        steps = [{"type": "wf.step", "args": [f"c{w}", i], "options": {"queue": "wf"}}
                 for i in range(STEPS)]  # fmt: skip
        answer = await call(client, "POST", "/ojs/v1/workflows",
                            json={"type": "chain", "steps": steps})  # fmt: skip
        chains.append(answer.json()["workflow"]["id"])
    for w in range(BATCHES):
        jobs = [{"type": "wf.job", "args": [f"b{w}", i], "options": {"queue": "wf"}}
                for i in range(STEPS)]  # fmt: skip
        callback = {"type": "wf.done", "args": [f"b{w}"], "options": {"queue": "wf"}}
        answer = await call(client, "POST", "/ojs/v1/workflows", json={
            "type": "batch", "jobs": jobs, "callbacks": {"on_complete": callback}})  # fmt: skip
        batches.append(answer.json()["workflow"]["id"])
    return chains, batches


def judge(
    findings: Findings, views: dict[str, Any], chains: list[str], batches: list[str],
    seen: dict[str, list[Any]],
) -> None:  # fmt: skip
    """Every workflow completed; each chain step run with its parent's result; each callback
    run; no job run that no workflow lists, none listed and never run."""
    findings.broken["workflow not completed"] = [
        f"{wf}: {v['state']}" for wf, v in views.items() if v["state"] != "completed"
    ]
    wrong_parent, unlisted = [], []
    for wf in chains:
        steps = views[wf]["steps"]
        for i, step in enumerate(steps):
            runs = seen.get(step["job_id"], [])
            if not runs:
                unlisted.append(step["job_id"])
            expected = None if i == 0 else [steps[i - 1].get("result")]
            wrong_parent += [step["job_id"] for _, parents in runs
                             if parents not in (expected, LOCAL)]  # fmt: skip
    findings.broken["step with a wrong parent_results"] = wrong_parent
    callbacks = {views[wf]["callbacks"]["on_complete"]["job_id"] for wf in batches}
    findings.broken["callback never run"] = sorted(callbacks - set(seen))
    listed = {j["job_id"] for v in views.values() for j in v.get("steps", []) + v.get("jobs", [])}
    findings.broken["job run that no workflow lists"] = sorted(set(seen) - listed - callbacks)
    findings.broken["job listed but never run"] = unlisted + sorted(
        j for wf in batches for j in (x["job_id"] for x in views[wf]["jobs"]) if j not in seen
    )
    findings.exec_dups = sum(len(runs) - 1 for runs in seen.values())


async def _describe(client: httpx.AsyncClient, dead_letters: DeadLetterView, job_id: str) -> str:
    """A job's state and last error; for a dead-lettered one, its reason and each attempt
    (outcome, worker, start and end in wall-clock ms), to tell how it ended."""
    job = (await call(client, "GET", f"/ojs/v1/jobs/{job_id}")).json().get("job", {})
    line = f"{job_id} {job.get('state')} attempt {job.get('attempt')} {job.get('error')}"
    dead = await dead_letters.find_by_original_id(job_id)
    if dead is not None and dead.dead_letter is not None:
        meta = dead.dead_letter
        line += f", dead-lettered ({meta.reason}): " + ", ".join(
            f"{a.outcome} by {a.worker} {a.started_at}-{a.finished_at}" for a in meta.attempts
        )
    return line


async def _unfinished(
    client: httpx.AsyncClient, views: dict[str, Any], dead_letters: DeadLetterView
) -> list[str]:
    """A line per workflow that did not complete, with each of its jobs described."""
    lines = []
    for wf, view in views.items():
        if view["state"] != "completed":
            jobs = [await _describe(client, dead_letters, listed["job_id"])
                    for listed in view.get("steps", []) + view.get("jobs", [])]  # fmt: skip
            lines.append(f"workflow {wf} {view['state']}: " + "; ".join(jobs))
    return lines


@pytest.mark.timeout(240)
async def test_workflows_ride_a_server_sigkill_storm(scenario: Scenario) -> None:
    # Given a lazarus serve, 30 chains of 3 steps and 10 batches of 3 jobs with an on_complete
    # callback, and a remote worker fetching with 1 s leases and acking each job's args
    server = scenario.redis()
    serve = Server(server.url, (scenario.tmp / "serve.err").open("ab"))
    serve.start()
    async with httpx.AsyncClient(base_url=serve.url) as client:
        chains, batches = await create(client)
        seen: dict[str, list[Any]] = {}  # job id -> (args, parent_results) per fetch
        stop = asyncio.Event()

        async def work() -> None:
            while not stop.is_set():
                fetched = await call(client, "POST", "/ojs/v1/workers/fetch", json={
                    "queues": ["wf"], "count": 8, "worker_id": "remote",
                    "visibility_timeout_ms": 1000})  # fmt: skip
                jobs = fetched.json().get("jobs", []) if fetched.status_code == 200 else []
                for job in jobs:
                    seen.setdefault(job["id"], []).append((job["args"], job.get("parent_results")))
                    await call(client, "POST", "/ojs/v1/workers/ack", json={
                        "job_id": job["id"], "result": job["args"]})  # fmt: skip
                if not jobs:
                    await asyncio.sleep(0.05)  # nothing to do yet

        async def process(job: Job) -> Any:
            seen.setdefault(job.id, []).append((job.data, LOCAL))
            await asyncio.sleep(0.1)  # its work: the remote worker takes most jobs
            return job.data

        # When an in-process Worker takes some of the jobs (the server's upkeep alone moves
        # their workflows on), and the server is SIGKILLed and started again every 1.5 s
        local = Worker("wf", process, connection=server.url, prefix=PREFIX, concurrency=1)
        worker = asyncio.create_task(work())
        deadline = time.monotonic() + 60
        states: dict[str, str] = {}
        while time.monotonic() < deadline:
            await asyncio.sleep(1.5)  # the storm's own pace
            if serve.kills < 8:
                serve.kill()
                serve.start()
            callbacks: set[str] = set()
            for wf in chains + batches:
                view = (await call(client, "GET", f"/ojs/v1/workflows/{wf}")).json()["workflow"]
                states[wf] = view["state"]
                callbacks |= {cb["job_id"] for cb in view.get("callbacks", {}).values()}
            # Done when every workflow completed and every callback ran: the call that
            # completes a batch enqueues its callback, which runs a moment later.
            completed = all(s == "completed" for s in states.values())
            if serve.kills >= 8 and completed and callbacks <= set(seen):
                break
        stop.set()
        await worker
        await local.close()
        views = {wf: (await call(client, "GET", f"/ojs/v1/workflows/{wf}")).json()["workflow"]
                 for wf in chains + batches}  # fmt: skip

        # Then every workflow completed; each chain step ran after its parent with the
        # parent's result, and each job (callbacks included) was enqueued once, under its
        # workflow's id
        findings = Findings(
            "OJS workflows in a server SIGKILL storm", CHAINS * STEPS + BATCHES * (STEPS + 1),
            f"{CHAINS} chains of {STEPS} and {BATCHES} batches of {STEPS} with a callback, "
            f"worked remotely and in-process; {serve.kills} SIGKILLs of lazarus serve, 1 per 1.5 s",
        )  # fmt: skip
        judge(findings, views, chains, batches, seen)
        dead_letters = DeadLetterView(server.url, prefix=PREFIX)
        findings.notes += await _unfinished(client, views, dead_letters)
        never_run = (
            findings.broken["callback never run"] + findings.broken["job listed but never run"]
        )
        findings.notes += [await _describe(client, dead_letters, job_id) for job_id in never_run]
        await dead_letters.close()
        if findings.violations():
            findings.notes.append(f"killed at (ms): {serve.killed_at}")
    serve.stop()
    local_runs = sum(1 for runs in seen.values() for _, parents in runs if parents == LOCAL)
    findings.notes.append(
        f"{len(seen)} jobs run, {local_runs} runs by the in-process Worker "
        f"({findings.exec_dups} runs again after a lease lost to a restart); {serve.kills} kills"
    )
    await scenario.finish(findings)
