"""The record's schema and its versioned migrations.

Each migration is a list of statements for both dialects (``{json}`` and ``{time}`` become
``json``/``timestamptz`` in PostgreSQL and ``TEXT`` in SQLite); applied ones are listed in
``lazarus_record_migrations``. ``lazarus record migrate`` applies what is missing;
everything else only checks (:func:`check`) and refuses to run on an older schema.
"""

from __future__ import annotations

import datetime

from ..errors import LazarusError
from .database import Database, Statement

_V1 = [
    """CREATE TABLE IF NOT EXISTS dead_letters (
        id TEXT PRIMARY KEY,
        original_job_id TEXT NOT NULL,
        job_name TEXT NOT NULL,
        job_type TEXT NOT NULL,
        job_payload {json} NOT NULL,
        job_priority INTEGER NOT NULL DEFAULT 0,
        failure_reason TEXT NOT NULL,
        failure_count INTEGER NOT NULL,
        last_error TEXT,
        error_stack TEXT,
        worker_id TEXT,
        original_created_at {time},
        failed_at {time} NOT NULL,
        source_queue TEXT NOT NULL,
        dead_letter_queue TEXT NOT NULL,
        error_type TEXT NOT NULL,
        reason TEXT NOT NULL,
        status TEXT NOT NULL,
        attempts {json} NOT NULL,
        stacktrace {json} NOT NULL,
        original_opts {json} NOT NULL,
        job_delay BIGINT NOT NULL DEFAULT 0,
        job_attempts INTEGER NOT NULL DEFAULT 1,
        replay_count INTEGER NOT NULL DEFAULT 0,
        timeline {json},
        archived_at {time},
        resolved_at {time},
        removed_at {time},
        updated_at {time} NOT NULL,
        outbox_position TEXT NOT NULL,
        arrival TEXT NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS dead_letters_job_type ON dead_letters (job_type, failed_at)",
    "CREATE INDEX IF NOT EXISTS dead_letters_failed_at ON dead_letters (failed_at, arrival)",
    "CREATE INDEX IF NOT EXISTS dead_letters_status ON dead_letters (status, failed_at)",
    "CREATE INDEX IF NOT EXISTS dead_letters_error_type ON dead_letters (error_type, failed_at)",
    "CREATE INDEX IF NOT EXISTS dead_letters_source ON dead_letters (source_queue, failed_at)",
    """CREATE TABLE IF NOT EXISTS dead_letter_events (
        dead_letter_id TEXT NOT NULL,
        outbox_position TEXT NOT NULL,
        dead_letter_queue TEXT NOT NULL,
        event TEXT NOT NULL,
        status TEXT NOT NULL,
        at {time} NOT NULL,
        PRIMARY KEY (dead_letter_id, outbox_position)
    )""",
    "CREATE INDEX IF NOT EXISTS dead_letter_events_at ON dead_letter_events (at)",
]

MIGRATIONS: list[list[str]] = [_V1]
LATEST = len(MIGRATIONS)
_TYPES = {
    "postgresql": {"json": "JSON", "time": "TIMESTAMPTZ"},
    "sqlite": {"json": "TEXT", "time": "TEXT"},
}
_TABLE = """CREATE TABLE IF NOT EXISTS lazarus_record_migrations (
    version INTEGER PRIMARY KEY, applied_at {time} NOT NULL)"""


class RecordSchemaError(LazarusError):
    """The record's database is not at the schema this lazarus needs: run
    ``lazarus record migrate``."""


async def version(db: Database) -> int:
    """The newest migration applied to ``db`` (0 for an empty database)."""
    await db.run([(_TABLE.format(**_TYPES[db.dialect]), ())])
    rows = await db.fetch("SELECT MAX(version) AS version FROM lazarus_record_migrations")
    return int(rows[0]["version"] or 0) if rows else 0


async def migrate(db: Database) -> list[int]:
    """Apply every missing migration, each in one transaction; returns the versions applied.
    Safe to run from several processes at once (the version row is the lock)."""
    applied = []
    for number in range(await version(db) + 1, LATEST + 1):
        statements: list[Statement] = [
            (sql.format(**_TYPES[db.dialect]), ()) for sql in MIGRATIONS[number - 1]
        ]
        if db.dialect == "postgresql":
            # One migrator at a time: the others wait here, then find the version applied.
            statements.insert(0, ("SELECT pg_advisory_xact_lock(7261001)", ()))
        now = datetime.datetime.now(datetime.timezone.utc)
        statements.append(
            (
                "INSERT INTO lazarus_record_migrations (version, applied_at) VALUES (?, ?) "
                "ON CONFLICT (version) DO NOTHING",
                (number, now),
            )
        )
        await db.run(statements)
        applied.append(number)
    return applied


async def check(db: Database) -> None:
    """Raise :class:`RecordSchemaError` unless ``db`` is at the newest schema."""
    current = await version(db)
    if current < LATEST:
        raise RecordSchemaError(
            f"the record's schema is at version {current}, lazarus needs {LATEST}: "
            "run `lazarus record migrate`"
        )
    if current > LATEST:
        raise RecordSchemaError(
            f"the record's schema is at version {current}, newer than this lazarus ({LATEST})"
        )
