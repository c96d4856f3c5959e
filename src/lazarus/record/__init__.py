"""The durable SQL record of dead letters (docs/record.md): PostgreSQL in production, a SQLite
file by default, filled from each dead letter queue's outbox by the :class:`RecordExporter`.

Needs the ``record`` extra: ``pip install 'lazarus-queue[record]'``.
"""

from __future__ import annotations

from .database import Database, open_database
from .exporter import RecordExporter
from .record import Record
from .schema import LATEST, RecordSchemaError, check, migrate

__all__ = [
    "LATEST",
    "Database",
    "Record",
    "RecordExporter",
    "RecordSchemaError",
    "check",
    "migrate",
    "open_database",
]
