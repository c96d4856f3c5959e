"""Open Job Spec (OJS) over lazarus: the HTTP binding at conformance Level 4 (core, reliable,
scheduled and cron jobs, workflows; priorities, unique jobs, batches, pause and statistics)
with the dead letter and admin API extensions, as its own layer over the engine.

:func:`mount` adds the binding to a lazarus app at ``/ojs``; the app's lifespan runs the
server's upkeep (:class:`~lazarus.ojs.sweeper.Sweeper`) while it serves.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from fastapi import FastAPI

from .._keys import validate_queue_name
from ..operators import Operators
from . import (
    admin_routes,
    cron_routes,
    dead_letter_routes,
    errors,
    queue_routes,
    routes,
    workflow_routes,
)
from .backend import DEFAULT_DEAD_LETTER_QUEUE, Backend
from .dead_letters import DeadLetters
from .schema_routes import router as schema_router
from .sweeper import Sweeper

__all__ = ["DEFAULT_DEAD_LETTER_QUEUE", "Backend", "mount"]


def mount(
    app: FastAPI,
    ops: Operators,
    *,
    dead_letter_queue: str = DEFAULT_DEAD_LETTER_QUEUE,
    test_hooks: bool = False,
) -> contextlib.AbstractAsyncContextManager[None]:
    """Serve OJS under ``/ojs`` of ``app``, on ``ops``'s Redis client and prefix; OJS jobs
    that end in a dead letter go to ``dead_letter_queue``. ``test_hooks`` honours the
    conformance suite's ``options.metadata.test_directive`` (never in production).

    Returns the context that runs the server's upkeep: enter it in the app's lifespan.
    """
    validate_queue_name(dead_letter_queue, "dead_letter_queue")
    backend = Backend(ops.client, ops.prefix, dead_letter_queue=dead_letter_queue,
                      test_hooks=test_hooks)  # fmt: skip
    sub = FastAPI(title="lazarus OJS", openapi_url=None, docs_url=None, redoc_url=None)
    sub.state.ops = ops  # for the token check shared with the rest of the API
    sub.state.ojs = backend
    sub.state.ojs_dead_letters = DeadLetters(backend)
    errors.install(sub)
    sub.include_router(routes.router)
    sub.include_router(dead_letter_routes.router)
    sub.include_router(queue_routes.router)
    sub.include_router(cron_routes.router)
    sub.include_router(admin_routes.router)
    sub.include_router(workflow_routes.router)
    sub.include_router(schema_router)
    app.mount("/ojs", sub)
    return _upkeep(Sweeper(backend))


@contextlib.asynccontextmanager
async def _upkeep(sweeper: Sweeper) -> AsyncIterator[None]:
    sweeper.start()
    try:
        yield
    finally:
        await sweeper.stop()
