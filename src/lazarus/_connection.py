"""Redis connections: building a client from a URL, and naming its address in errors.

Every connection has a read timeout (``socket_timeout``, by default
:data:`DEFAULT_SOCKET_TIMEOUT` seconds; a URL may set its own, for example
``redis://host:6379/0?socket_timeout=5``), so a hung server or a port where something other
than Redis listens ends each call with an error instead of hanging it. Blocking commands
get their own, larger bound (see ``_scripts.execute``).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import InvalidResponse
from redis.exceptions import TimeoutError as RedisTimeoutError

from .errors import RedisUnavailableError

DEFAULT_URL = "redis://localhost:6379/0"
CONNECT_TIMEOUT = 5.0
DEFAULT_SOCKET_TIMEOUT = 10.0
TRANSIENT_ERRORS = (RedisConnectionError, RedisTimeoutError, ConnectionError, OSError)
# What "cannot reach Redis" covers for callers: also a server that does not speak its protocol.
UNREACHABLE_ERRORS = (*TRANSIENT_ERRORS, InvalidResponse)


def default_url() -> str:
    """``LAZARUS_REDIS_URL`` if set, else the local default."""
    return os.environ.get("LAZARUS_REDIS_URL") or DEFAULT_URL


def connect(connection: str | Redis | None, *, max_connections: int | None = None) -> Redis:
    """A client for ``connection``: a URL, an existing ``redis.asyncio.Redis`` (used as it is),
    or ``None`` for :func:`default_url`."""
    if isinstance(connection, Redis):
        return connection
    url = connection if connection is not None else default_url()
    if not isinstance(url, str):
        raise TypeError(
            f"connection must be a Redis URL or a redis.asyncio.Redis, not {type(url).__name__}"
        )
    # Keepalive is a TCP option: a unix socket connection refuses it.
    tcp: dict[str, Any] = {} if url[:7].lower() == "unix://" else {"socket_keepalive": True}
    try:
        return Redis.from_url(
            url,
            decode_responses=True,
            socket_connect_timeout=CONNECT_TIMEOUT,
            socket_timeout=DEFAULT_SOCKET_TIMEOUT,
            health_check_interval=30,
            max_connections=max_connections,
            # A pooled connection goes stale when Redis restarts: retry on a fresh one. A
            # timeout is not retried: the server is slow or hung, and every retry would wait
            # as long again.
            retry=Retry(
                ExponentialBackoff(cap=0.5, base=0.02), 3, supported_errors=(RedisConnectionError,)
            ),
            retry_on_error=[RedisConnectionError],
            **tcp,
        )
    except ValueError as exc:  # the URL itself is not named: it may hold a password
        raise ValueError(f"connection is not a usable Redis URL: {exc}") from None


def address(client: Redis) -> str:
    """A human-readable address of ``client``'s server, for error messages."""
    kwargs = client.connection_pool.connection_kwargs
    if "path" in kwargs:
        return f"unix://{kwargs['path']}"
    return f"{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}"


def unavailable(client: Redis, exc: BaseException) -> RedisUnavailableError:
    """The :class:`RedisUnavailableError` for ``exc``, naming the address in one line."""
    if isinstance(exc, InvalidResponse):
        return RedisUnavailableError(
            f"the server at {address(client)} does not speak the Redis protocol "
            f"(is it the right port?): {exc}"
        )
    if isinstance(exc, RedisTimeoutError):
        return RedisUnavailableError(f"no reply from Redis at {address(client)}: {exc}")
    return RedisUnavailableError(f"cannot reach Redis at {address(client)}: {exc}")


def blocking_ms(client: Redis, wanted_ms: int) -> int:
    """A blocking command's timeout in ms, kept a second below the connection's read timeout
    so that an idle wait is not mistaken for a hung server."""
    limit = client.connection_pool.connection_kwargs.get("socket_timeout")
    if limit is None:
        return wanted_ms
    return max(min(wanted_ms, int(float(limit) * 1000) - 1000), 1)


@contextlib.asynccontextmanager
async def reporting(client: Redis) -> AsyncIterator[None]:
    """Turn connection failures into :class:`RedisUnavailableError` naming the address."""
    try:
        yield
    except (RedisConnectionError, RedisTimeoutError, InvalidResponse) as exc:
        if isinstance(exc, RedisUnavailableError):
            raise
        raise unavailable(client, exc) from exc


def now_ms() -> int:
    """The current time in milliseconds, as scripts receive it."""
    return int(time.time() * 1000)


P = ParamSpec("P")
T = TypeVar("T")


def reports_unavailable(
    method: Callable[P, Coroutine[Any, Any, T]],
) -> Callable[P, Coroutine[Any, Any, T]]:
    """Decorate a method of an object with ``_client`` so that a connection failure raises
    :class:`RedisUnavailableError` naming the address."""

    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await method(*args, **kwargs)
        except UNREACHABLE_ERRORS as exc:
            if isinstance(exc, RedisUnavailableError):
                raise
            client: Redis = args[0]._client  # type: ignore[attr-defined]
            raise unavailable(client, exc) from exc

    wrapper.__name__ = method.__name__
    wrapper.__qualname__ = method.__qualname__
    wrapper.__doc__ = method.__doc__
    return wrapper
