"""The app factory: the HTTP API, the dashboard, health and metrics in one ASGI app."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI
from redis.asyncio import Redis

from .. import __version__
from ..operators import Operators

if TYPE_CHECKING:
    from ..record import Record


def create_app(
    *,
    connection: str | Redis | None = None,
    prefix: str = "lazarus",
    token: str | None = None,
    dead_letter_queue: str | None = None,
    ojs_test_hooks: bool = False,
    record: str | None = None,
    drainers: Sequence[Any] = (),
) -> FastAPI:
    """Build the app. ``token``, when set, is required (as ``Authorization: Bearer <token>``)
    by every state-changing route, and by the dashboard's sign-in.

    ``record`` (a record URL, see docs/record.md) makes ``/api/v1/dead-letter`` answer from
    the record; ``drainers`` are coroutine functions ``f(stop_event)`` the app runs in the
    background while it serves (``lazarus serve`` passes the record exporter and webhook
    deliverer).

    The app's state holds its :class:`~lazarus.operators.Operators` (``app.state.ops``) and
    the bulk operations it runs in the background (``app.state.bulk``); both are closed when
    the app shuts down (its lifespan), which stops running bulk operations.

    The Open Job Spec binding is served at ``/ojs`` (:mod:`lazarus.ojs`); its jobs that end
    in a dead letter go to ``dead_letter_queue`` (default ``ojs-dead-letter``), and
    ``ojs_test_hooks`` is for the conformance suite only."""
    from ..dashboard.views import router as dashboard_router
    from ..ojs import DEFAULT_DEAD_LETTER_QUEUE
    from ..ojs import mount as mount_ojs
    from . import dead_letter_v1
    from .api import install_error_handlers
    from .api import router as api_router
    from .operations import BulkOperations

    ops = Operators(connection=connection, prefix=prefix, token=token)
    bulk = BulkOperations(ops)
    recorded = _open_record(record, ops)
    ojs_upkeep = None

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        assert ojs_upkeep is not None
        if recorded is not None:
            await recorded.check()  # refuse to start on a record behind this lazarus
        stop = asyncio.Event()
        background = [asyncio.create_task(drain(stop)) for drain in drainers]
        async with ojs_upkeep:
            yield
        stop.set()
        await asyncio.gather(*background, return_exceptions=True)
        await bulk.close()  # first: a stopped operation records that it stopped
        if recorded is not None:
            await recorded.close()
        await ops.close()

    app = FastAPI(
        title="lazarus",
        version=__version__,
        description="Queues and dead letters of lazarus: inspect, replay and purge.",
        lifespan=lifespan,
    )
    app.state.ops = ops
    app.state.bulk = bulk
    app.state.record = recorded
    install_error_handlers(app)
    app.include_router(api_router)
    app.include_router(dead_letter_v1.router)
    app.include_router(dashboard_router)
    ojs_upkeep = mount_ojs(
        app, ops, dead_letter_queue=dead_letter_queue or DEFAULT_DEAD_LETTER_QUEUE,
        test_hooks=ojs_test_hooks,
    )  # fmt: skip
    return app


def _open_record(url: str | None, ops: Operators) -> Record | None:
    if url is None:
        return None
    from ..record import Record

    return Record(url, connection=ops.client, prefix=ops.prefix)
