"""A real uvicorn serving an ASGI app on a free loopback port, for tests that need a server."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import AsyncIterator
from typing import Any

import uvicorn

from .conftest import wait_until


@contextlib.asynccontextmanager
async def serving(app: Any, **config: Any) -> AsyncIterator[str]:
    """Serve ``app`` with uvicorn on a free 127.0.0.1 port in a thread; yield its base URL.
    ``config`` goes to ``uvicorn.Config`` (``lifespan="on"``: a failed startup fails here).
    On the way out the server shuts down, its lifespan included, before this returns."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))  # bound before the server starts: no race for the port
    port = sock.getsockname()[1]
    options = {"log_level": "warning", **config}
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, **options))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()

    async def started() -> bool:
        return server.started or not thread.is_alive()

    try:
        await wait_until(started, message="uvicorn to start")
        assert server.started, "uvicorn stopped before it started"
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.to_thread(thread.join, 10)
        sock.close()
    assert not thread.is_alive(), "uvicorn did not shut down within 10 s"
