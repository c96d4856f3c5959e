"""Run workers and hold queues for the life of an ASGI app (FastAPI, Starlette).

Example::

    from fastapi import FastAPI, Request
    from lazarus import Queue, Worker
    from lazarus.integrations.fastapi import lifespan

    app = FastAPI(lifespan=lifespan(
        queues=[Queue("emails")],
        workers=[lambda: Worker("emails", send_email, concurrency=10)],
    ))

    @app.post("/signup")
    async def signup(request: Request) -> dict[str, str]:
        job = await request.state.lazarus_queues["emails"].add("welcome", {...})
        return {"job": job.id}

Workers are given as factories, made once the app's event loop runs (a worker starts in
the loop it is made in); queues may be made anywhere. On shutdown the workers close first
(running jobs finish, up to their ``shutdown_timeout``), then the queues.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from ..queue import Queue
from ..worker import Worker

Lifespan = Callable[[Any], contextlib.AbstractAsyncContextManager[dict[str, Any]]]


def lifespan(
    *, queues: Sequence[Queue] = (), workers: Sequence[Callable[[], Worker]] = ()
) -> Lifespan:
    """An ASGI lifespan that starts ``workers`` (factories) and closes them and ``queues``
    at shutdown. Its state gives requests ``request.state.lazarus_queues`` (by name) and
    ``request.state.lazarus_workers``."""
    by_name = {queue.name: queue for queue in queues}
    if len(by_name) != len(queues):
        raise ValueError("queues lists a queue name twice")
    for factory in workers:
        if not callable(factory) or isinstance(factory, Worker):
            raise TypeError("workers must be factories (lambda: Worker(...)), made in the loop")

    @contextlib.asynccontextmanager
    async def run(app: Any) -> AsyncIterator[dict[str, Any]]:
        started: list[Worker] = []
        try:
            for factory in workers:
                worker = factory()
                started.append(worker)
                if not worker.running:  # made with autorun=False
                    asyncio.get_running_loop().create_task(worker.run())
            yield {"lazarus_queues": dict(by_name), "lazarus_workers": list(started)}
        finally:
            await asyncio.gather(*(worker.close() for worker in started))
            for queue in by_name.values():
                await queue.close()

    return run
