"""How long a dead letter queue keeps its dead letters: :class:`RetentionPolicy`, stored in
Redis so that every process sees the same one, and pruning in bounded batches by the
``prune_dead_letters`` script (oldest first, through the status indexes' arrival order).

A policy limits age (``max_age``, an ISO 8601 duration) and count (``max_count``); the more
restrictive limit wins. Each status may have an age of its own (``statuses``); ages count from
when the job was dead-lettered. Pruning deletes, or archives (status ``archived``, recorded
with actor ``policy``); an archived dead letter past its own age is deleted.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from .. import _scripts
from .._connection import now_ms
from . import detach
from .filters import DeadLetterStatus

if TYPE_CHECKING:
    from .._connection import Client
    from .._keys import QueueKeys

PruneAction = Literal["delete", "archive"]
PRUNE_BATCH = 200  # dead letters one script call prunes at most: a few ms of Redis
MAX_BATCHES = 1_000  # script calls one prune_dead_letters() makes at most
_DURATION = re.compile(
    r"^P(?:(\d+)Y)?(?:(\d+)M)?(?:(\d+)W)?(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?)?$"
)
_UNIT_MS = (365 * 86_400_000, 30 * 86_400_000, 7 * 86_400_000, 86_400_000, 3_600_000, 60_000,
            1_000)  # fmt: skip


def duration_ms(value: object, field: str) -> int:
    """An ISO 8601 duration (``P180D``, ``PT12H``, ``P1Y``) in milliseconds; a year counts
    365 days and a month 30. Raises naming ``field``."""
    if not isinstance(value, str):
        raise TypeError(f"{field} must be an ISO 8601 duration str, not {type(value).__name__}")
    match = _DURATION.fullmatch(value)
    if not match or value in ("P", "PT") or value.endswith("T"):
        raise ValueError(f"{field} must be an ISO 8601 duration such as 'P180D', got {value!r}")
    total = sum(int(n) * unit for n, unit in zip(match.groups(), _UNIT_MS) if n)
    if total <= 0:
        raise ValueError(f"{field} must be longer than zero, got {value!r}")
    return total


@dataclasses.dataclass(frozen=True)
class StatusRetention:
    """How long dead letters of one status are kept: ``max_age`` (ISO 8601; ``None`` keeps
    them until the count limit applies) and what happens then (``prune``; ``None`` follows
    the policy's)."""

    max_age: str | None
    prune: PruneAction | None = None

    def __post_init__(self) -> None:
        if self.max_age is not None:
            duration_ms(self.max_age, "max_age")
        if self.prune is not None:
            _check_action(self.prune, "prune")


def default_statuses() -> dict[str, StatusRetention]:
    """Resolved dead letters go after 30 days, failed ones are archived after 90 days,
    archived ones deleted after a year; pending ones stay until the count limit applies."""
    return {
        "resolved": StatusRetention("P30D", "delete"),
        "failed": StatusRetention("P90D", "archive"),
        "archived": StatusRetention("P365D", "delete"),
        "pending": StatusRetention(None),
    }


@dataclasses.dataclass(frozen=True)
class RetentionPolicy:
    """The retention policy of one dead letter queue.

    ``max_age`` applies to the statuses without an entry in ``statuses``; ``max_count`` bounds
    the dead letters not archived (``None``: no bound); ``prune`` is what both limits do,
    ``"delete"`` or ``"archive"``.

    Example::

        await dlq.set_retention_policy(RetentionPolicy(max_age="P30D", max_count=50_000))
        pruned = await dlq.prune_dead_letters()
    """

    max_age: str | None = "P180D"
    max_count: int | None = 10_000
    prune: PruneAction = "delete"
    statuses: Mapping[str, StatusRetention] = dataclasses.field(default_factory=default_statuses)

    def __post_init__(self) -> None:
        if self.max_age is not None:
            duration_ms(self.max_age, "max_age")
        count = self.max_count
        if count is not None and (isinstance(count, bool) or not isinstance(count, int)):
            raise TypeError(f"max_count must be an int or None, not {type(count).__name__}")
        if count is not None and count < 0:
            raise ValueError(f"max_count must be >= 0, got {count}")
        _check_action(self.prune, "prune")
        if not isinstance(self.statuses, Mapping):
            raise TypeError("statuses must be a mapping of status to StatusRetention")
        checked = {}
        for status, rule in self.statuses.items():
            try:
                key = DeadLetterStatus(status).value
            except ValueError:
                raise ValueError(f"statuses has an unknown status {status!r}") from None
            if not isinstance(rule, StatusRetention):
                raise TypeError(f"statuses[{status!r}] must be a StatusRetention")
            checked[key] = rule
        object.__setattr__(self, "statuses", checked)

    def rules(self) -> dict[str, tuple[int | None, PruneAction]]:
        """Per status: its age limit (ms, or ``None``) and action."""
        default_age = None if self.max_age is None else duration_ms(self.max_age, "max_age")
        out: dict[str, tuple[int | None, PruneAction]] = {}
        for status in DeadLetterStatus:
            rule = self.statuses.get(status.value)
            if rule is None:
                out[status.value] = (default_age, self.prune)
            else:
                age = None if rule.max_age is None else duration_ms(rule.max_age, "max_age")
                out[status.value] = (age, rule.prune or self.prune)
        return out

    def to_json(self) -> dict[str, Any]:
        """The stored form."""
        return {
            "maxAge": self.max_age, "maxCount": self.max_count, "prune": self.prune,
            "statuses": {s: {"maxAge": r.max_age, "prune": r.prune}
                         for s, r in self.statuses.items()},
        }  # fmt: skip

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> RetentionPolicy:
        """The policy of its stored form."""
        statuses = {
            s: StatusRetention(r.get("maxAge"), r.get("prune"))
            for s, r in (raw.get("statuses") or {}).items()
        }
        return cls(raw.get("maxAge"), raw.get("maxCount"), raw.get("prune", "delete"), statuses)


def _check_action(value: object, field: str) -> None:
    if value not in ("delete", "archive"):
        raise ValueError(f"{field} must be 'delete' or 'archive', got {value!r}")


def check_policy(value: object) -> RetentionPolicy:
    """``value`` if it is a :class:`RetentionPolicy`; raises naming ``policy``."""
    if not isinstance(value, RetentionPolicy):
        raise TypeError(f"policy must be a RetentionPolicy, not {type(value).__name__}")
    return value


async def load(client: Client, keys: QueueKeys) -> RetentionPolicy:
    """The stored policy, or the default one."""
    raw = await client.get(keys.dl_retention)
    if raw is None:
        return RetentionPolicy()
    return RetentionPolicy.from_json(json.loads(raw))


async def store(client: Client, keys: QueueKeys, policy: RetentionPolicy) -> None:
    """Store ``policy`` for every process to see."""
    await client.set(keys.dl_retention, json.dumps(check_policy(policy).to_json()))


async def prune(
    client: Client,
    keys: QueueKeys,
    max_events: int,
    policy: RetentionPolicy,
    *,
    now: int | None = None,
    batch: int = PRUNE_BATCH,
) -> tuple[int, int]:
    """Prune by ``policy`` until it is met (at most :data:`MAX_BATCHES` calls of ``batch``):
    ``(deleted, archived)``. First finishes what a purge stopped half-way over a minute ago
    left to delete (not counted here: it was purged)."""
    await detach.drop_leftovers(client, keys, max_events, older_than_ms=detach.LEFTOVER_AGE_MS)
    at = now_ms() if now is None else now
    args: list[Any] = [at, max_events, batch, "" if policy.max_count is None else
                       policy.max_count, policy.prune]  # fmt: skip
    for status, (age, action) in policy.rules().items():
        args += [status, "" if age is None else (at - age) * 1000, action]
    script = _scripts.load("prune_dead_letters")
    deleted = archived = 0
    for _ in range(MAX_BATCHES):
        d, a, more = await script(client, [keys.dl, keys.events, keys.meta, keys.job_prefix], args)
        deleted, archived = deleted + int(d), archived + int(a)
        if not int(more):
            break
    return deleted, archived
