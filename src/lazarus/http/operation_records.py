"""The record of a bulk operation run in the background of a server: what was asked, which
server holds it, and how far it got.

A record is the hash :func:`operation_key` in Redis, kept :data:`RECORD_TTL` seconds after its
last write, so that every server process of the prefix can report on it; the ids of the
operations still running are in the sorted set :func:`running_key`. A record changes only
through ``claim_operation.lua`` (a server takes over an operation no server holds) and
``update_operation.lua`` (the holder's progress, lease and end; anyone's cancel), which
both check who holds it first.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any, Literal, cast

from ..dead_letter import DeadLetterFilter

Action = Literal["replay", "purge"]
# As kept: running (a server holds it, or held it until its lease ran out), done, failed or
# cancelled. As shown (BulkOperation.shown_status), a running one that no server holds is
# interrupted until one resumes it.
Status = Literal["running", "interrupted", "done", "failed", "cancelled"]
RECORD_TTL = 24 * 3600


def operation_key(prefix: str, operation_id: str) -> str:
    """The key of a bulk operation's record: ``<prefix>:bulkops:<id>``. It belongs to the
    server, not to a queue, so it carries no hash tag."""
    return f"{prefix}:bulkops:{operation_id}"


def running_key(prefix: str) -> str:
    """The sorted set of the ids of the operations still running (by their start, in ms):
    ``<prefix>:bulkops``, where servers look for operations to resume."""
    return f"{prefix}:bulkops"


def describe_filter(flt: DeadLetterFilter) -> dict[str, Any]:
    """The fields of ``flt`` that are set, times in ms: what the record shows."""
    described: dict[str, Any] = {}
    for field in dataclasses.fields(flt):
        value = getattr(flt, field.name)
        if value is not None:
            described[field.name] = str(value) if field.name == "status" else value
    if flt.since is not None:
        described["since"] = flt.since_ms
    if flt.until is not None:
        described["until"] = flt.until_ms
    return described


def filter_of(described: Mapping[str, Any]) -> DeadLetterFilter:
    """The filter that :func:`describe_filter` described (a record's, for its resume)."""
    return DeadLetterFilter(**described)


@dataclasses.dataclass(frozen=True)
class BulkOperation:
    """One bulk operation: what was asked, where it stands, and how far it got. ``matched``
    is how many matched when it began (``None`` when counting needs a scan); ``done`` how
    many were replayed or purged so far (0 for a dry run, whose count is ``matched``).
    ``server`` holds it until ``lease_until``; ``resumes`` counts the times a server took it
    over from one that had stopped. Times are ms since the epoch; ``started_at`` is also the
    moment of its snapshot (``as_of``), which every resume keeps."""

    id: str
    action: Action
    queue: str
    filter: dict[str, Any]
    dry_run: bool
    rate: float | None
    batch_size: int
    status: Status
    matched: int | None
    done: int
    started_at: int
    updated_at: int
    finished_at: int | None
    error: str | None
    server: str
    lease_until: int = 0
    resumes: int = 0

    def shown_status(self, now: int) -> Status:
        """Its status as reported at ``now``: ``interrupted`` while it runs with no server
        holding it (its server stopped; the next server to look resumes it)."""
        if self.status == "running" and self.lease_until <= now:
            return "interrupted"
        return self.status

    def to_fields(self) -> dict[str, str]:
        """The record's hash fields."""
        values = dataclasses.asdict(self)
        values["filter"] = json.dumps(self.filter, sort_keys=True)
        values["dry_run"] = "1" if self.dry_run else ""
        return {k: "" if v is None else str(v) for k, v in values.items()}

    @classmethod
    def from_fields(cls, fields: Mapping[str, str]) -> BulkOperation:
        def number(name: str) -> int | None:
            return int(fields[name]) if fields.get(name) else None

        return cls(
            id=fields["id"], action=cast(Action, fields["action"]), queue=fields["queue"],
            filter=json.loads(fields.get("filter") or "{}"), dry_run=bool(fields.get("dry_run")),
            rate=float(fields["rate"]) if fields.get("rate") else None,
            batch_size=int(fields["batch_size"]), status=cast(Status, fields["status"]),
            matched=number("matched"), done=int(fields.get("done") or 0),
            started_at=int(fields["started_at"]), updated_at=int(fields["updated_at"]),
            finished_at=number("finished_at"), error=fields.get("error") or None,
            server=fields.get("server", ""), lease_until=number("lease_until") or 0,
            resumes=number("resumes") or 0,
        )  # fmt: skip
