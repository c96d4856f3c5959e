"""Fixtures of the record's tests: a real PostgreSQL server for the session, a fresh database
(or SQLite file) per test, and the record of either kind."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from lazarus.record.database import Database, open_database
from lazarus.record.schema import migrate

from .postgres import PostgresServer


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    server = PostgresServer()
    server.start()
    yield server
    server.close()


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    return postgres_server.create_database(f"t{uuid.uuid4().hex[:12]}")


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'record.db'}"


@pytest.fixture(params=["sqlite", "postgresql"])
def record_url(request: pytest.FixtureRequest) -> str:
    """The URL of an empty record: a SQLite file, then a PostgreSQL database."""
    name = "sqlite_url" if request.param == "sqlite" else "postgres_url"
    return str(request.getfixturevalue(name))


@pytest.fixture
async def db(record_url: str) -> AsyncIterator[Database]:
    """The record at ``record_url``, migrated."""
    database = open_database(record_url)
    await migrate(database)
    yield database
    await database.close()
