"""OJS unique jobs (``options.unique``) on lazarus's deduplication.

A unique job's key is a digest of its type and of the ``args`` fields its policy selects; it is
the job's ``deduplication`` id in its queue, so the check and the add are one Lua script on
the queue's hash slot (``add_jobs``): two pushes of the same key never both add a job. That
makes the guarantee ``strong`` within a queue; the queue is always a dimension (the engine's
key lives in the queue's slot).

How long the key is held is the engine's: without ``period`` while the job has not ended
(``scheduled``, ``available``, ``pending``, ``active``, ``retryable``: OJS's default), with
``period`` for that long from the push, whatever becomes of the job but a cancel (a
cancelled job frees it at once).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any, Literal

from ..job_options import MAX_DURATION_MS
from .errors import OjsError
from .retry import duration_ms

OnConflict = Literal["reject", "use_existing", "replace"]
# The JSON format's 'ignore' is the OpenAPI document's 'use_existing': the push answers the
# job that holds the key, and adds nothing.
CONFLICTS: dict[str, OnConflict] = {
    "reject": "reject", "ignore": "use_existing", "use_existing": "use_existing",
    "replace": "replace",
}  # fmt: skip
# The states the engine holds a key in, without a period: those of a job not ended. A
# 'states' list may name these only, and only all of them without a period: the engine cannot
# narrow its check to some states, and a key held for a period covers every state but a
# cancelled job's.
LIVE_STATES = frozenset({"scheduled", "available", "pending", "active", "retryable"})
ENDED_STATES = frozenset({"completed", "discarded"})
FIELDS = frozenset({"key", "keys", "period", "on_conflict", "states"})


@dataclasses.dataclass(frozen=True)
class UniquePolicy:
    """A validated ``options.unique``: the args fields that make the key (``None``: all the
    args), the window in ms (0: while the job has not ended) and the conflict strategy."""

    fields: tuple[str, ...] | None
    period_ms: int
    on_conflict: OnConflict

    def key(self, job_type: str, args: list[Any]) -> str:
        """The job's uniqueness key: ``ojs:<sha256>`` of the type and the selected args as
        canonical JSON (keys sorted: the order of an object's fields does not matter), short
        enough for an engine key whatever the type's length. A field is looked up in each
        object of ``args``: its values in order, none when no object has it."""
        if self.fields is None:
            selected: Any = args
        else:
            selected = {name: [a[name] for a in args if isinstance(a, dict) and name in a]
                        for name in self.fields}  # fmt: skip
        canonical = json.dumps(
            [job_type, selected], sort_keys=True, separators=(",", ":"), ensure_ascii=False
        )
        digest = hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()
        return f"ojs:{digest}"

    def deduplication(self, job_type: str, args: list[Any], *, batch: bool) -> dict[str, Any]:
        """The engine's ``deduplication`` option of the job. ``replace`` (not in a batch, whose
        every conflict is a reject) takes the key from a holder still delayed that never ran."""
        dedup: dict[str, Any] = {"id": self.key(job_type, args)}
        if self.period_ms:
            dedup["ttl"] = self.period_ms
        if self.on_conflict == "replace" and not batch:
            dedup["replace"] = True
        return dedup


def _bad(message: str, field: str) -> OjsError:
    return OjsError(400, "invalid_request", message, details={"field": f"options.unique{field}"})


def parse_unique(raw: object) -> UniquePolicy | None:
    """Validate ``options.unique`` (``None`` when absent), naming the field of a 400."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise _bad("options.unique must be a JSON object", "")
    unknown = sorted(set(raw) - FIELDS)
    if unknown:
        raise _bad(f"options.unique has unknown fields: {unknown}", f".{unknown[0]}")
    if "key" in raw and "keys" in raw:
        raise _bad("options.unique takes key or keys (the same list), not both", ".keys")
    name = "keys" if "keys" in raw else "key"
    fields = raw.get(name)
    if fields is not None and (
        not isinstance(fields, list) or not all(isinstance(f, str) and f for f in fields)
    ):
        raise _bad(f"options.unique.{name} must be an array of args field names", f".{name}")
    period_ms = 0
    if raw.get("period") is not None:
        try:
            period_ms = duration_ms(raw["period"], "unique.period", MAX_DURATION_MS)
        except OjsError as exc:
            raise _bad(exc.message, ".period") from None
        if period_ms < 1:
            raise _bad("options.unique.period must be at least 1 ms", ".period")
    conflict = raw.get("on_conflict", "reject")
    if conflict not in CONFLICTS:
        raise _bad(f"options.unique.on_conflict must be one of {sorted(CONFLICTS)}, got "
                   f"{conflict!r}", ".on_conflict")  # fmt: skip
    _check_states(raw.get("states"), period_ms)
    return UniquePolicy(
        None if fields is None else tuple(dict.fromkeys(fields)), period_ms, CONFLICTS[conflict]
    )


def _check_states(states: object, period_ms: int) -> None:
    """Refuse a ``states`` list the engine cannot honour as asked: without a period it holds a
    key in every state of a job not ended (the list must name them all), with one in every
    state but ``cancelled`` (the list may name any of the others)."""
    if states is None:
        return
    if not isinstance(states, list) or not all(isinstance(s, str) for s in states):
        raise _bad("options.unique.states must be an array of job states", ".states")
    unknown = set(states) - LIVE_STATES - ENDED_STATES
    if unknown:
        raise _bad(f"options.unique.states: lazarus checks uniqueness against the states "
                   f"{sorted(LIVE_STATES | ENDED_STATES)}, not {sorted(unknown)}",
                   ".states")  # fmt: skip
    if not period_ms and set(states) != LIVE_STATES:
        raise _bad(f"options.unique.states: without a period lazarus checks every state of a "
                   f"job not ended, {sorted(LIVE_STATES)}, no more and no fewer; with a period, "
                   "every state but cancelled for that long", ".states")  # fmt: skip
