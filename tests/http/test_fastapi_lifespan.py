"""lazarus.integrations.fastapi.lifespan: workers and queues for the life of an app, served
by a real uvicorn that runs the app's lifespan at startup and shutdown."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request

from lazarus import Job, Queue, Worker
from lazarus.integrations.fastapi import lifespan

from ..servers import serving


async def double(job: Job) -> int:
    return int(job.data) * 2


async def test_an_app_enqueues_and_its_own_worker_runs_the_job(redis_url: str, prefix: str) -> None:
    seen: list[Worker] = []

    def make_worker() -> Worker:
        worker = Worker("doubles", double, connection=redis_url, prefix=prefix,
                        block_timeout=0.5)  # fmt: skip
        seen.append(worker)
        return worker

    app = FastAPI(lifespan=lifespan(
        queues=[Queue("doubles", connection=redis_url, prefix=prefix)], workers=[make_worker],
    ))  # fmt: skip

    @app.post("/double/{n}")
    async def enqueue_and_wait(n: int, request: Request) -> dict[str, Any]:
        job = await request.state.lazarus_queues["doubles"].add("double", n)
        return {"result": await job.wait_until_finished(timeout=10)}

    async with serving(app, lifespan="on") as url, httpx.AsyncClient(base_url=url) as client:
        response = await client.post("/double/21")
        assert response.status_code == 200, response.text
        assert response.json() == {"result": 42}
        assert seen[0].running

    assert not seen[0].running  # closed with the app


def test_workers_must_be_factories(redis_url: str) -> None:
    with pytest.raises(TypeError, match="factories"):
        lifespan(workers=[Worker("q", double, connection=redis_url, autorun=False)])
