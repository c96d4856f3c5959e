"""The audit trail: every request that asked the operator surfaces to change something, who
asked, and what came of it — kept in Redis, in the stream ``<prefix>:audit``.

The HTTP guard (:mod:`lazarus.http.guard`) writes it; ``lazarus audit``, ``GET /api/audit``
and the dashboard's audit page read it. Each entry holds the time, actor and role, method and
path (the ids), the query and a summary of the body (the filter; secrets such as tokens and
CSRF values left out), the response status, an outcome (``ok``, ``refused`` or ``error``) and
the count the response reported. The stream keeps the newest ``max_entries`` and drops entries
older than ``retention_ms``.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from typing import Any

from ._connection import REDIS_FAILURES, Client
from ._keys import audit_key

log = logging.getLogger("lazarus.audit")
_ENTRY_ID = re.compile(r"[0-9]{1,20}-[0-9]{1,20}")


@dataclasses.dataclass(frozen=True)
class AuditEntry:
    """One recorded request. ``at`` is in ms since the epoch; ``count`` is what the response
    said it affected, when it said so."""

    at: int
    actor: str
    role: str
    method: str
    path: str
    query: str
    detail: str
    status: int
    outcome: str
    count: int | None
    id: str = ""

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class AuditTrail:
    """Writes and reads the audit stream of one prefix."""

    def __init__(
        self,
        client: Client,
        prefix: str,
        *,
        max_entries: int = 100_000,
        retention_ms: int = 90 * 86_400_000,
    ) -> None:
        self.client = client
        self.key = audit_key(prefix)
        self.max_entries = max_entries
        self.retention_ms = retention_ms

    async def record(self, entry: AuditEntry) -> None:
        """Append ``entry``; an unreachable Redis is logged, never raised into a response."""
        fields = {k: "" if v is None else str(v) for k, v in entry.to_json().items() if k != "id"}
        oldest = max(0, entry.at - self.retention_ms)
        try:
            async with self.client.pipeline(transaction=False) as pipe:
                pipe.xadd(self.key, fields, maxlen=self.max_entries, approximate=True)  # type: ignore[arg-type]
                pipe.xtrim(self.key, minid=f"{oldest}-0", approximate=True)
                await pipe.execute()
        except REDIS_FAILURES as exc:
            log.error("could not record %s %s by %s in the audit trail: %s",
                      entry.method, entry.path, entry.actor, exc)  # fmt: skip

    async def read(self, *, limit: int = 50, before: str | None = None) -> list[AuditEntry]:
        """The newest ``limit`` entries (1 to 1,000), older than the entry id ``before``."""
        if not 1 <= limit <= 1000:
            raise ValueError(f"limit: must be 1 to 1,000, not {limit}")
        if before is not None and not _ENTRY_ID.fullmatch(before):
            raise ValueError(f"before: not an audit entry id: {before!r}")
        top = "+" if before is None else f"({before}"
        rows = await self.client.xrevrange(self.key, top, "-", count=limit) or []
        return [_entry(entry_id, fields) for entry_id, fields in rows]


def _entry(entry_id: Any, fields: Any) -> AuditEntry:
    text = {
        (k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
        for k, v in fields.items()
    }
    count = text.get("count", "")
    return AuditEntry(
        at=int(text.get("at", 0)),
        actor=text.get("actor", ""),
        role=text.get("role", ""),
        method=text.get("method", ""),
        path=text.get("path", ""),
        query=text.get("query", ""),
        detail=text.get("detail", ""),
        status=int(text.get("status", 0)),
        outcome=text.get("outcome", ""),
        count=int(count) if count.lstrip("-").isdigit() else None,
        id=entry_id.decode() if isinstance(entry_id, bytes) else entry_id,
    )
