"""Redis connections: building a client from a URL, and naming its address in errors.

Every connection has a read timeout (``socket_timeout``, by default
:data:`DEFAULT_SOCKET_TIMEOUT` seconds; a URL may set its own, for example
``redis://host:6379/0?socket_timeout=5``), so a hung server or a port where something other
than Redis listens ends each call with an error instead of hanging it. Blocking commands
get their own, larger bound (see ``_scripts.execute``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

import redis
import redis.asyncio.cluster as redis_cluster
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import InvalidResponse, RedisClusterException, RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from .errors import RedisUnavailableError

Client = Redis | RedisCluster
"""A client lazarus works with: a single Redis (``redis.asyncio.Redis``) or a Redis Cluster
(``redis.asyncio.cluster.RedisCluster``)."""
CLIENT_TYPES = (Redis, RedisCluster)
# A URL of this scheme names a node of a Redis Cluster (docs/redis-cluster.md).
CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}

DEFAULT_URL = "redis://localhost:6379/0"
CONNECT_TIMEOUT = 5.0
DEFAULT_SOCKET_TIMEOUT = 10.0
TRANSIENT_ERRORS = (RedisConnectionError, RedisTimeoutError, ConnectionError, OSError)
# What "cannot reach Redis" covers for callers: also a server that does not speak its protocol.
UNREACHABLE_ERRORS = (*TRANSIENT_ERRORS, InvalidResponse)
# What a best-effort write rides out: Redis unreachable, or refusing the command (out of
# memory, busy with a script, read-only after a failover, ...).
REDIS_FAILURES = (RedisError, OSError)


def default_url() -> str:
    """``LAZARUS_REDIS_URL`` if set, else the local default."""
    return os.environ.get("LAZARUS_REDIS_URL") or DEFAULT_URL


def connect(connection: str | Client | None, *, max_connections: int | None = None) -> Client:
    """A client for ``connection``: a URL (``redis+cluster://host:port`` for a Redis Cluster),
    an existing client (used as it is), or ``None`` for :func:`default_url`."""
    if isinstance(connection, RedisCluster):
        _check_cluster_support()
    if isinstance(connection, CLIENT_TYPES):
        return connection
    url = connection if connection is not None else default_url()
    if not isinstance(url, str):
        raise TypeError(
            "connection must be a Redis URL, a redis.asyncio.Redis or a "
            f"redis.asyncio.cluster.RedisCluster, not {type(url).__name__}"
        )
    scheme, sep, rest = url.partition("://")
    if sep and scheme.lower() in CLUSTER_SCHEMES:
        return _connect_cluster(f"{CLUSTER_SCHEMES[scheme.lower()]}://{rest}", max_connections)
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


def _check_cluster_support() -> None:
    """lazarus runs MULTI/EXEC on one slot at a time (a worker's registration, its wake-up):
    a redis-py whose asyncio cluster client cannot do it is refused at once."""
    if not hasattr(redis_cluster, "TransactionStrategy"):
        raise TypeError(
            f"Redis Cluster needs a redis-py whose asyncio cluster client runs transactions "
            f"(this is redis-py {redis.__version__}); upgrade redis-py"
        )


def _connect_cluster(url: str, max_connections: int | None) -> RedisCluster:
    """A cluster client; its startup node is the URL's host and port (more are discovered)."""
    _check_cluster_support()
    options: dict[str, Any] = (
        {} if max_connections is None else {"max_connections": max_connections}
    )
    try:
        return RedisCluster.from_url(
            url,
            decode_responses=True,
            socket_connect_timeout=CONNECT_TIMEOUT,
            socket_timeout=DEFAULT_SOCKET_TIMEOUT,
            socket_keepalive=True,
            health_check_interval=30,
            **options,
        )
    except ValueError as exc:  # the URL itself is not named: it may hold a password
        raise ValueError(f"connection is not a usable Redis Cluster URL: {exc}") from None


async def ready(client: Client) -> None:
    """Have a Redis Cluster client learn the cluster's layout now, and settle: a fresh client
    that many commands use at once may close a connection under a command still opening it
    (redis-py's lazy reconnects after its first discovery), which surfaces as an
    ``AttributeError``. A plain client needs nothing."""
    if not isinstance(client, RedisCluster):
        return
    await client.initialize()
    await client.ping()  # the default node's connection, renewed after the discovery
    pending = list(getattr(client.nodes_manager, "_background_tasks", ()))
    if pending:
        await asyncio.gather(*pending, return_exceptions=True)


def is_cluster(client: Client) -> bool:
    """Whether ``client`` talks to a Redis Cluster."""
    return isinstance(client, RedisCluster)


def connection_kwargs(client: Client) -> dict[str, Any]:
    """The options ``client``'s connections are made with."""
    if isinstance(client, RedisCluster):
        return dict(client.get_connection_kwargs())
    return dict(client.connection_pool.connection_kwargs)


def address(client: Client) -> str:
    """A human-readable address of ``client``'s server, for error messages (a cluster's: the
    node it was started from)."""
    if isinstance(client, RedisCluster):
        node = next(iter(client.nodes_manager.startup_nodes.values()), None)
        return "a Redis Cluster" if node is None else f"{node.name} (a Redis Cluster node)"
    kwargs = client.connection_pool.connection_kwargs
    if "path" in kwargs:
        return f"unix://{kwargs['path']}"
    return f"{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}"


def unavailable(client: Client, exc: BaseException) -> RedisUnavailableError:
    """The :class:`RedisUnavailableError` for ``exc``, naming the address in one line."""
    if isinstance(exc, InvalidResponse):
        return RedisUnavailableError(
            f"the server at {address(client)} does not speak the Redis protocol "
            f"(is it the right port?): {exc}"
        )
    if isinstance(exc, RedisTimeoutError):
        return RedisUnavailableError(f"no reply from Redis at {address(client)}: {exc}")
    return RedisUnavailableError(f"cannot reach Redis at {address(client)}: {exc}")


def blocking_ms(client: Client, wanted_ms: int) -> int:
    """A blocking command's timeout in ms, kept a second below the connection's read timeout
    so that an idle wait is not mistaken for a hung server."""
    limit = connection_kwargs(client).get("socket_timeout")
    if limit is None:
        return wanted_ms
    return max(min(wanted_ms, int(float(limit) * 1000) - 1000), 1)


@contextlib.asynccontextmanager
async def reporting(client: Client) -> AsyncIterator[None]:
    """Turn connection failures into :class:`RedisUnavailableError` naming the address."""
    try:
        yield
    except (RedisConnectionError, RedisTimeoutError, InvalidResponse) as exc:
        if isinstance(exc, RedisUnavailableError):
            raise
        raise unavailable(client, exc) from exc
    except RedisClusterException as exc:
        if not cluster_unreachable(exc):
            raise
        raise unavailable(client, exc) from exc


def cluster_unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` is a cluster client's "no node reachable": redis-py raises it as a
    ``RedisClusterException`` caused by the last connection failure."""
    return isinstance(exc, RedisClusterException) and isinstance(exc.__cause__, TRANSIENT_ERRORS)


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
        except (*UNREACHABLE_ERRORS, RedisClusterException) as exc:
            if isinstance(exc, RedisUnavailableError) or (
                isinstance(exc, RedisClusterException) and not cluster_unreachable(exc)
            ):
                raise
            client: Client = args[0]._client  # type: ignore[attr-defined]
            raise unavailable(client, exc) from exc

    wrapper.__name__ = method.__name__
    wrapper.__qualname__ = method.__qualname__
    wrapper.__doc__ = method.__doc__
    return wrapper
