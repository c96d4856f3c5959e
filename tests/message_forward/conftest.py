"""Fixtures for the message-forward service: a service on this test's prefix, its HTTP
client, and a forwarder whose failures a test chooses."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from examples.message_forward import ForwardJob, Service, Settings
from examples.message_forward.app import create_app

from lazarus import UnrecoverableError


class ChannelDownError(Exception):
    """A forward to this channel fails every time."""


class Forwarder:
    """Records what it forwards; channels in ``failing`` fail every attempt, channels in
    ``gone`` fail as unrecoverable, and ``hold`` (when set) keeps a forward running until
    released."""

    def __init__(self) -> None:
        self.forwarded: list[ForwardJob] = []
        self.failing: set[int] = set()
        self.gone: set[int] = set()
        self.hold: asyncio.Event | None = None
        self.started = 0

    async def __call__(self, message: ForwardJob) -> None:
        self.started += 1
        if self.hold is not None:
            await self.hold.wait()
        if message.source_channel_id in self.gone:
            raise UnrecoverableError(f"channel {message.source_channel_id} was deleted")
        if message.source_channel_id in self.failing:
            raise ChannelDownError(f"channel {message.source_channel_id} did not answer")
        self.forwarded.append(message)


def message(message_id: int = 1, channel: int = -100, **fields: Any) -> dict[str, Any]:
    """A message in the JSON form the listener posts."""
    return {
        "messageId": message_id, "sourceChannelId": channel,
        "text": f"message {message_id}", "timestamp": "2026-02-17T09:30:00Z", **fields,
    }  # fmt: skip


@pytest.fixture
def forwarder() -> Forwarder:
    return Forwarder()


@pytest.fixture
async def make_service(
    redis_url: str, prefix: str, forwarder: Forwarder
) -> AsyncIterator[Callable[..., Any]]:
    """Start services on this test's prefix (``consume=False`` for a producer only); all
    are stopped at the end."""
    started: list[Service] = []

    async def build(consume: bool = True, **overrides: Any) -> Service:
        settings = Settings(redis_url=redis_url, prefix=prefix, **overrides)
        service = Service(settings, forward=forwarder)
        await service.start(consume=consume)
        started.append(service)
        return service

    yield build
    for service in started:
        await service.stop()


@pytest.fixture
async def http(
    redis_url: str, prefix: str, forwarder: Forwarder
) -> AsyncIterator[tuple[httpx.AsyncClient, Service]]:
    """The service's app, started by its own lifespan, and a client for it."""
    service = Service(
        Settings(redis_url=redis_url, prefix=prefix, backoff_ms=10), forward=forwarder
    )
    app = create_app(service)
    async with contextlib.AsyncExitStack() as stack:
        await stack.enter_async_context(app.router.lifespan_context(app))
        client = await stack.enter_async_context(
            httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost")
        )
        yield client, service
