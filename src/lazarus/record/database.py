"""The record's database: PostgreSQL through a psycopg 3 pool, or a SQLite file through
aiosqlite, behind the few calls the record needs (run statements in one transaction, fetch
rows), so that the rest of the record is written once.

SQL is written with ``?`` placeholders; ``?json`` marks a parameter bound for a JSON column
(PostgreSQL casts it to ``json``, which keeps the text byte for byte). Times are bound as
aware :class:`datetime.datetime` values: ``timestamptz`` in PostgreSQL, ISO 8601 text in UTC
(``2025-01-15T10:30:00.000Z``, which sorts and which SQLite's date functions read) in SQLite.
"""

from __future__ import annotations

import abc
import contextlib
import datetime
import os
import re
from collections.abc import AsyncIterator, Sequence
from typing import Any, Literal

Dialect = Literal["sqlite", "postgresql"]
Statement = tuple[str, Sequence[Any]]
_PLACEHOLDER = re.compile(r"\?(json)?")


def redact(url: str) -> str:
    """``url`` without its password, for messages."""
    return re.sub(r"://([^:/@]*):[^@]*@", r"://\1:***@", url)


class Database(abc.ABC):
    """A connection (pool) to the record's database."""

    dialect: Dialect

    @abc.abstractmethod
    async def run(self, statements: Sequence[Statement]) -> None:
        """Run ``statements`` in one transaction: all of them or none."""

    @abc.abstractmethod
    async def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """The rows of one query, as dicts by column name."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Close every connection."""

    def payload(self, column: str) -> str:
        """A select expression reading JSON column ``column`` as its exact text."""
        return column


class SQLiteDatabase(Database):
    """A SQLite file; several processes may share it (WAL, a busy timeout)."""

    dialect: Dialect = "sqlite"

    def __init__(self, path: str) -> None:
        self.path = path
        self._connection: Any = None

    async def _connect(self) -> Any:
        if self._connection is None:
            import aiosqlite

            connection = await aiosqlite.connect(self.path, isolation_level=None)
            await connection.execute("PRAGMA journal_mode=WAL")
            await connection.execute("PRAGMA busy_timeout=30000")
            connection.row_factory = aiosqlite.Row
            self._connection = connection
        return self._connection

    async def run(self, statements: Sequence[Statement]) -> None:
        connection = await self._connect()
        # IMMEDIATE takes the write lock first, so two writers queue instead of deadlocking.
        await connection.execute("BEGIN IMMEDIATE")
        try:
            for sql, params in statements:
                await connection.execute(_sqlite(sql), [_sqlite_value(p) for p in params])
        except BaseException:
            await connection.execute("ROLLBACK")
            raise
        await connection.execute("COMMIT")

    async def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        connection = await self._connect()
        cursor = await connection.execute(_sqlite(sql), [_sqlite_value(p) for p in params])
        rows = await cursor.fetchall()
        return [dict(row) for row in rows]

    async def close(self) -> None:
        if self._connection is not None:
            await self._connection.close()
            self._connection = None


class PostgresDatabase(Database):
    """A PostgreSQL server through a psycopg 3 connection pool."""

    dialect: Dialect = "postgresql"

    def __init__(self, url: str, *, max_size: int = 4) -> None:
        from psycopg_pool import AsyncConnectionPool

        self.url = url
        self._pool = AsyncConnectionPool(
            url, min_size=1, max_size=max_size, open=False, timeout=30, check=_check
        )
        self._opened = False

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[Any]:
        if not self._opened:
            await self._pool.open()
            self._opened = True
        async with self._pool.connection() as connection:
            yield connection

    async def run(self, statements: Sequence[Statement]) -> None:
        async with self._connection() as connection, connection.transaction():
            for sql, params in statements:
                await connection.execute(_postgres(sql), list(params))

    async def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        from psycopg.rows import dict_row

        async with self._connection() as connection:
            cursor = connection.cursor(row_factory=dict_row)
            await cursor.execute(_postgres(sql), list(params))
            return list(await cursor.fetchall())

    async def close(self) -> None:
        if self._opened:
            await self._pool.close()
            self._opened = False

    def payload(self, column: str) -> str:
        return f"{column}::text AS {column}"


async def _check(connection: Any) -> None:
    # A pooled connection dies with a server restart: the pool replaces it before handing it out.
    await connection.execute("SELECT 1")


def open_database(url: object) -> Database:
    """The :class:`Database` of a record URL: ``sqlite:///<absolute path>`` or
    ``postgresql://user:password@host:port/dbname`` (``postgres://`` too).

    Raises :class:`ValueError` naming ``record`` for any other URL.
    """
    if not isinstance(url, str):
        raise TypeError(f"record must be a URL str, not {type(url).__name__}")
    if url.startswith("sqlite:///"):
        path = url[len("sqlite://") :]
        if not os.path.isabs(path):
            raise ValueError(f"record URL {url!r} must name an absolute path: sqlite:///<path>")
        return SQLiteDatabase(path)
    if url.startswith(("postgresql://", "postgres://")):
        return PostgresDatabase(url)
    raise ValueError(
        f"record URL {redact(url)!r} is neither sqlite:///<absolute path> "
        "nor postgresql://user:password@host:port/dbname"
    )


def _sqlite(sql: str) -> str:
    return _PLACEHOLDER.sub("?", sql)


def _postgres(sql: str) -> str:
    return _PLACEHOLDER.sub(lambda m: "%s::json" if m.group(1) else "%s", sql)


def _sqlite_value(value: Any) -> Any:
    if isinstance(value, datetime.datetime):
        value = value.astimezone(datetime.timezone.utc)
        return f"{value:%Y-%m-%dT%H:%M:%S}.{value.microsecond // 1000:03d}Z"
    return value


def as_datetime(value: Any) -> datetime.datetime | None:
    """A time column's value (a datetime in PostgreSQL, ISO text in SQLite) as an aware
    datetime."""
    if value is None or isinstance(value, datetime.datetime):
        return value
    return datetime.datetime.fromisoformat(str(value).replace("Z", "+00:00"))


def from_ms(ms: int | str | None) -> datetime.datetime | None:
    """Milliseconds since the epoch as an aware UTC datetime (``None`` stays ``None``)."""
    if ms in (None, ""):
        return None
    return datetime.datetime.fromtimestamp(int(ms) / 1000, tz=datetime.timezone.utc)
