"""One exchange on a connection: write commands in one go, read their replies in order.

redis-py's ``send_packed_command`` and ``read_response`` cost about as much client CPU per
round trip as the round trip itself: a deadline context per read, health-check bookkeeping,
wrappers over the parser. Every script call of lazarus goes through here, so on a connection
whose replies hiredis parses (the usual case: hiredis is a dependency), the exchange feeds
the connection's own hiredis reader from its stream and reads the replies off it directly,
under one deadline for the whole exchange (:mod:`._deadlines`). A connection with redis-py's parser
in Python goes through redis-py's calls.

Both paths behave alike: a connection that is closed is opened first, and one idle past its
``health_check_interval`` is checked as redis-py would; an error reply is returned as its
exception, in its place; a dropped connection raises ``ConnectionError`` and a missed deadline
``TimeoutError`` (redis-py's), and either closes the connection, as does a cancelled exchange,
since replies may still be on their way.
"""

from __future__ import annotations

import asyncio
import math
import sys
from collections.abc import Callable, Sequence
from typing import Any

from redis._parsers.hiredis import NOT_ENOUGH_DATA, _AsyncHiredisParser
from redis.asyncio.connection import AbstractConnection
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from . import _deadlines

if sys.version_info >= (3, 11):
    from asyncio import timeout as async_timeout
else:  # pragma: no cover - redis-py depends on async-timeout before 3.11.3
    from async_timeout import timeout as async_timeout  # type: ignore[import-not-found]

_hiredis_pack: Callable[[tuple[Any, ...]], bytes] | None
_PUSH: type | None  # a RESP3 push message, which hiredis 3.2 and later tell apart
try:
    import hiredis
except ImportError:  # pragma: no cover - hiredis is a dependency; redis-py parses without it
    _hiredis_pack = _PUSH = None
else:
    _hiredis_pack = hiredis.pack_command
    _PUSH = getattr(hiredis, "PushNotification", None)
READ_SIZE = 65_536  # bytes asked of the stream per read


async def send_and_read(
    conn: AbstractConnection, commands: Sequence[Sequence[Any]], timeout: float | None
) -> list[Any]:
    """The replies of ``commands``, written in one go on ``conn``, in order; an error reply as
    its exception. ``timeout`` (seconds) bounds the whole exchange; by default the
    connection's ``socket_timeout`` does."""
    packed = [chunk for command in commands for chunk in pack(conn, command)]
    limit = timeout if timeout is not None else conn.socket_timeout
    if isinstance(conn._parser, _AsyncHiredisParser):
        return await _exchange(conn, packed, len(commands), limit)
    return await _exchange_by_redis_py(conn, packed, len(commands), limit)


async def _exchange(
    conn: AbstractConnection, packed: list[bytes], count: int, limit: float | None
) -> list[Any]:
    loop = asyncio.get_running_loop()
    now = loop.time()
    untyped: Any = conn  # connect() and check_health() are untyped in some redis-py releases
    if not conn.is_connected:
        await untyped.connect()
    elif conn.health_check_interval and now > conn.next_health_check:
        await untyped.check_health()  # as send_packed_command does; it reconnects if need be
    parser: Any = conn._parser
    writer: Any = conn._writer
    deadlines = _deadlines.of(loop) if limit is not None and limit != math.inf else None
    if deadlines is not None:
        deadlines.start(conn, now + limit, writer.transport)  # type: ignore[operator]
    try:
        writer.write(packed[0] if len(packed) == 1 else b"".join(packed))
        await writer.drain()  # waits only while the transport's buffer is over its limit
        replies = await _replies(parser, count)
    except BaseException as error:
        missed = deadlines is not None and deadlines.end(conn)
        await conn.disconnect(nowait=True)  # replies may still come: it is not reused
        if missed:
            raise RedisTimeoutError(f"no reply within {limit:.1f} s") from None
        if isinstance(error, OSError):
            raise RedisConnectionError(f"Error while talking to Redis: {error}") from error
        raise
    if deadlines is not None:
        deadlines.end(conn)
    if conn.health_check_interval:
        conn.next_health_check = now + conn.health_check_interval
    return replies


async def _replies(parser: Any, count: int) -> list[Any]:
    """The next ``count`` replies that ``parser``'s hiredis reader parses, fed from its
    stream; a RESP3 push message on the way (a client-side cache's invalidation) goes to its
    handler."""
    reader, stream = parser._reader, parser._stream
    replies: list[Any] = []
    while len(replies) < count:
        reply = reader.gets()
        while reply is NOT_ENOUGH_DATA:
            data = await stream.read(READ_SIZE)
            if not data:
                raise RedisConnectionError("Connection closed by server.")
            reader.feed(data)
            reply = reader.gets()
        if _PUSH is not None and isinstance(reply, _PUSH):
            await parser.handle_push_response(reply)
        elif isinstance(reply, RedisConnectionError):  # LOADING, say: redis-py raises it too
            raise reply
        else:
            replies.append(reply)
    return replies


async def _exchange_by_redis_py(
    conn: AbstractConnection, packed: list[bytes], count: int, limit: float | None
) -> list[Any]:
    # One deadline for the write and the replies. The connection's own socket_timeout would
    # wrap the write in asyncio.wait_for, a task per call: it is lifted while this call holds
    # the connection (no one else uses it meanwhile) and applied here instead.
    saved, conn.socket_timeout = conn.socket_timeout, None
    replies: list[Any] = []
    try:
        async with async_timeout(limit):
            await conn.send_packed_command(packed)
            for _ in range(count):
                try:
                    replies.append(await conn.read_response(timeout=math.inf))
                except ResponseError as error:  # the connection is fine; more replies follow
                    replies.append(error)
    except asyncio.TimeoutError:
        await conn.disconnect(nowait=True)  # replies may still arrive: never reuse it
        raise RedisTimeoutError(f"no reply within {limit:.1f} s") from None
    finally:
        conn.socket_timeout = saved
    return replies


def pack(conn: AbstractConnection, command: Sequence[Any]) -> list[bytes]:
    """``command`` in the Redis protocol: by hiredis (in C) when it is installed and takes the
    arguments, else by redis-py (whose errors name a bad argument)."""
    wire = getattr(command, "wire", None) or hiredis_wire(tuple(command))
    if wire is not None:
        return [wire]
    packed: list[bytes] = conn.pack_command(*command)
    return packed


def hiredis_wire(command: tuple[Any, ...]) -> bytes | None:
    """``command`` packed by hiredis, or None (not installed, or an argument it does not take)."""
    if _hiredis_pack is None:
        return None
    try:
        return _hiredis_pack(command)
    except TypeError:
        return None
