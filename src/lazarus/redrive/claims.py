"""The pending dead letters a redriver looks at, and its claims on them.

A redriver reads the ``pending`` status index page by page (a cursor on the arrival score, so
each call is bounded and the walk resumes where it stopped), decides, and claims only the dead
letters it will act on: ``claim_dead_letters`` claims them atomically for ``claim_ms`` and
returns their fields as they are at that moment, the redriver decides again on those, acts
and releases its claims. Two redrivers never hold the same dead letter; the claims of one
that died expire.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import _scripts
from .._connection import now_ms
from .rules import Candidate

if TYPE_CHECKING:
    from .._connection import Client
    from .._keys import QueueKeys

_FIELDS = ("dlq:sourceQueue", "name", "dlq:errorType", "dlq:reason", "dlq:failedReason",
           "dlq:deadLetteredAt", "dlq:statusAt", "dlq:replayCount")  # fmt: skip


async def page(
    client: Client, keys: QueueKeys, after: float, limit: int
) -> tuple[list[Candidate], float | None]:
    """Up to ``limit`` pending dead letters that arrived after score ``after`` (oldest
    first), and the score to go on from (``None`` at the end of the index)."""
    rows: list[Any] = await client.zrangebyscore(
        keys.dl_index("s", "pending"), f"({after}", "+inf", start=0, num=limit, withscores=True
    )
    if not rows:
        return [], None
    async with client.pipeline(transaction=False) as pipe:
        for member, _ in rows:
            pipe.hmget(keys.job(_text(member)), _FIELDS)
        fields = await pipe.execute()
    found = [
        _candidate(_text(member), f)
        for (member, _), f in zip(rows, fields)
        if f[0] is not None  # purged since the index was read
    ]
    return found, (float(rows[-1][1]) if len(rows) == limit else None)


async def claim(
    client: Client, keys: QueueKeys, holder: str, ids: list[str], claim_ms: int
) -> list[Candidate]:
    """Claim the pending ones of ``ids`` that no other redriver holds, fresh from Redis."""
    if not ids:
        return []
    replies = await _scripts.load("claim_dead_letters")(
        client, [keys.dl, keys.dl_claims, keys.dl_claimers, keys.job_prefix],
        [now_ms(), holder, claim_ms, *ids],
    )  # fmt: skip
    return [_candidate(i, r) for i, r in zip(ids, replies) if r != 0]


async def release(client: Client, keys: QueueKeys, holder: str, ids: list[str]) -> int:
    """Release ``holder``'s claims on ``ids``."""
    if not ids:
        return 0
    script = _scripts.load("release_dead_letter_claims")
    return int(await script(client, [keys.dl_claims, keys.dl_claimers], [holder, *ids]))


def _candidate(dl_id: str, f: list[Any]) -> Candidate:
    source, name, error_type, reason, failed_reason, at, status_at, replays = map(_text, f)
    return Candidate(
        id=dl_id, source_queue=source, name=name, error_type=error_type, reason=reason,
        failed_reason=failed_reason, dead_lettered_at=int(at or 0),
        status_at=int(status_at) if status_at else None, replay_count=int(replays or 0),
    )  # fmt: skip


def _text(value: object) -> str:
    if value is None:
        return ""
    return value.decode() if isinstance(value, bytes) else str(value)
