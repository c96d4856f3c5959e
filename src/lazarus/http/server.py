"""Running the app with uvicorn, hardened against slow clients.

A client that opens a connection and never finishes its request headers would hold a file
descriptor for as long as it likes; :class:`HeaderDeadline` closes a connection whose first
request's headers are not complete within ``header_timeout`` seconds. Idle keep-alive
connections close after ``keep_alive`` seconds, and past ``max_connections`` concurrent
connections new requests get 503. Behind a reverse proxy (see ``docs/security.md``) the proxy
bounds slow bodies too.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol


class HeaderDeadline(H11Protocol):
    """uvicorn's h11 protocol, closing connections whose headers arrive too slowly."""

    header_timeout = 10.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._deadline = self.loop.call_later(self.header_timeout, self._too_slow)

    def _too_slow(self) -> None:
        if self.cycle is None and not self.transport.is_closing():
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._deadline.cancel()
        super().connection_lost(exc)


def run(
    app: Any,
    *,
    host: str,
    port: int,
    max_connections: int = 200,
    header_timeout: float = 10.0,
    keep_alive: int = 5,
) -> None:
    """Serve ``app`` until SIGTERM or SIGINT."""
    import uvicorn

    protocol = type("Deadline", (HeaderDeadline,), {"header_timeout": header_timeout})
    uvicorn.run(
        app,
        host=host,
        port=port,
        log_level="info",
        http=protocol,
        limit_concurrency=max_connections,
        timeout_keep_alive=keep_alive,
        server_header=False,
    )
