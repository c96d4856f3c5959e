"""The app factory: the HTTP API, the dashboard, health and metrics in one ASGI app."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from fastapi import FastAPI
from redis.asyncio import Redis

from .. import __version__
from ..operators import Operators


def create_app(
    *,
    connection: str | Redis | None = None,
    prefix: str = "lazarus",
    token: str | None = None,
    dead_letter_queue: str | None = None,
    ojs_test_hooks: bool = False,
) -> FastAPI:
    """Build the app. ``token``, when set, is required (as ``Authorization: Bearer <token>``)
    by every state-changing route, and by the dashboard's sign-in.

    The app's state holds its :class:`~lazarus.operators.Operators` (``app.state.ops``) and
    the bulk operations it runs in the background (``app.state.bulk``); both are closed when
    the app shuts down (its lifespan), which stops running bulk operations.

    The Open Job Spec binding is served at ``/ojs`` (:mod:`lazarus.ojs`); its jobs that end
    in a dead letter go to ``dead_letter_queue`` (default ``ojs-dead-letter``), and
    ``ojs_test_hooks`` is for the conformance suite only."""
    from ..dashboard.views import router as dashboard_router
    from ..ojs import DEFAULT_DEAD_LETTER_QUEUE
    from ..ojs import mount as mount_ojs
    from .api import install_error_handlers
    from .api import router as api_router
    from .operations import BulkOperations

    ops = Operators(connection=connection, prefix=prefix, token=token)
    bulk = BulkOperations(ops)
    ojs_upkeep = None

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        assert ojs_upkeep is not None
        async with ojs_upkeep:
            yield
        await bulk.close()  # first: a stopped operation records that it stopped
        await ops.close()

    app = FastAPI(
        title="lazarus",
        version=__version__,
        description="Queues and dead letters of lazarus: inspect, replay and purge.",
        lifespan=lifespan,
    )
    app.state.ops = ops
    app.state.bulk = bulk
    install_error_handlers(app)
    app.include_router(api_router)
    app.include_router(dashboard_router)
    ojs_upkeep = mount_ojs(
        app, ops, dead_letter_queue=dead_letter_queue or DEFAULT_DEAD_LETTER_QUEUE,
        test_hooks=ojs_test_hooks,
    )  # fmt: skip
    return app
