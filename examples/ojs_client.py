"""An Open Job Spec client in plain httpx, working one queue beside an in-process Worker.

It enqueues image jobs over HTTP, fetches half of them as a remote worker, lets a lazarus
``Worker`` in this process take the other half from the same queue, and fails every job whose
number is odd: those end as dead letters (the remote ones by an OJS NACK, the in-process ones
by the worker), all listed by the server's ``/ojs/v1/dead-letter`` under their own ids.

Run against ``lazarus serve`` (``--dead-letter-queue`` must match)::

    python examples/ojs_client.py --url http://127.0.0.1:8000 --redis-url redis://localhost:6379/0
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import httpx

from lazarus import Job, Worker

QUEUE = "images"
TERMINAL = ("completed", "discarded", "cancelled")


class OjsClient:
    """The OJS HTTP calls this example needs."""

    def __init__(self, http: httpx.AsyncClient) -> None:
        self.http = http

    async def call(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        response = await self.http.request(method, f"/ojs/v1{path}", json=body)
        response.raise_for_status()
        result: dict[str, Any] = response.json()
        return result

    async def enqueue(self, job_type: str, args: list[Any], **options: Any) -> str:
        body = {"type": job_type, "args": args, "options": {"queue": QUEUE, **options}}
        return str((await self.call("POST", "/jobs", body))["job"]["id"])

    async def fetch(self, count: int, worker_id: str) -> list[dict[str, Any]]:
        body = {"queues": [QUEUE], "count": count, "worker_id": worker_id}
        jobs: list[dict[str, Any]] = (await self.call("POST", "/workers/fetch", body))["jobs"]
        return jobs

    async def ack(self, job_id: str, result: Any) -> None:
        await self.call("POST", "/workers/ack", {"job_id": job_id, "result": result})

    async def nack(self, job_id: str, message: str) -> str:
        error = {"code": "handler_error", "type": "ImageTooLarge", "message": message}
        return str(
            (await self.call("POST", "/workers/nack", {"job_id": job_id, "error": error}))["state"]
        )

    async def state(self, job_id: str) -> str:
        return str((await self.call("GET", f"/jobs/{job_id}"))["job"]["state"])

    async def dead_letters(self) -> list[dict[str, Any]]:
        jobs: list[dict[str, Any]] = (await self.call("GET", "/dead-letter?limit=500"))["jobs"]
        return jobs


def resize(number: int) -> dict[str, Any]:
    """The work itself: odd numbers are images too large to resize."""
    if number % 2:
        raise ValueError(f"image {number} is too large")
    return {"resized": number}


async def run(
    url: str, redis_url: str, prefix: str, dead_letter_queue: str, jobs: int
) -> dict[str, Any]:
    """Enqueue ``jobs`` jobs, work them remotely and in process; a summary of what happened."""
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        ojs = OjsClient(http)
        ids = [await ojs.enqueue("image.resize", [n], retry={"max_attempts": 1,
               "on_exhaustion": "dead_letter"}) for n in range(jobs)]  # fmt: skip

        # A remote worker takes half of the jobs first...
        remote = await ojs.fetch(jobs // 2, "remote-1")
        # ...and a Worker in this process shares the queue and takes the rest.
        local_done: list[str] = []

        def process(job: Job) -> dict[str, Any]:
            local_done.append(job.id)
            return resize(job.data[0])  # an OJS job's data is its args

        worker = Worker(QUEUE, process, connection=redis_url, prefix=prefix,
                        dead_letter_queue=dead_letter_queue, block_timeout=0.5)  # fmt: skip
        try:
            for job in remote:
                try:
                    await ojs.ack(job["id"], resize(job["args"][0]))
                except ValueError as exc:
                    await ojs.nack(job["id"], str(exc))
            states = await _wait_for_the_end(ojs, ids)
        finally:
            await worker.close()
        dead = await ojs.dead_letters()
    return {
        "remote": len(remote), "in_process": len(local_done),
        "completed": sum(s == "completed" for s in states.values()),
        "discarded": sum(s == "discarded" for s in states.values()),
        "dead_letters": sorted(d["id"] for d in dead if d["id"] in states),
        "odd_ids": sorted(i for n, i in enumerate(ids) if n % 2),
    }  # fmt: skip


async def _wait_for_the_end(
    ojs: OjsClient, ids: list[str], timeout: float = 30.0
) -> dict[str, str]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        states = {i: await ojs.state(i) for i in ids}
        if all(s in TERMINAL for s in states.values()) or loop.time() > deadline:
            return states
        await asyncio.sleep(0.1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--redis-url", default="redis://localhost:6379/0")
    parser.add_argument("--prefix", default="lazarus")
    parser.add_argument("--dead-letter-queue", default="ojs-dead-letter")
    parser.add_argument("--jobs", type=int, default=10)
    ns = parser.parse_args()
    summary = asyncio.run(run(ns.url, ns.redis_url, ns.prefix, ns.dead_letter_queue, ns.jobs))
    print(f"remote worker: {summary['remote']} jobs, in-process worker: {summary['in_process']}")
    print(f"completed: {summary['completed']}, discarded: {summary['discarded']}, "
          f"dead letters: {len(summary['dead_letters'])}")  # fmt: skip


if __name__ == "__main__":
    main()
