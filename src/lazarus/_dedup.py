"""The ``deduplication`` option of an add: BullMQ's deduplication, atomic with the add.

``{"id": key}`` makes the job the holder of ``key`` until it completes, fails (or is
dead-lettered) or is removed; ``{"id": key, "ttl": ms}`` for ``ttl`` milliseconds from the
add, whatever happens to the job. An add whose key is held writes nothing, emits
``deduplicated`` and returns the holder.

Debouncing: with ``"extend": True`` (and a ``ttl``) an add whose key is held starts the ttl
again, so the key is held until ``ttl`` ms after the last of a burst of adds; with
``"replace": True`` an add whose key a **delayed** job holds deletes that job and is added in
its place (with a ``delay``, the last of a burst runs once the burst is over).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from ._checks import check_int
from ._connection import Client, reports_unavailable
from ._keys import QueueKeys, validate_name
from .job_options import MAX_DURATION_MS


class Deduplication(NamedTuple):
    """A validated ``deduplication`` option: its id, ttl (ms, 0 for none) and modes."""

    id: str
    ttl: int
    extend: bool = False
    replace: bool = False

    @classmethod
    def parse(cls, value: Any) -> Deduplication | None:
        """Validate ``value`` (``None`` or ``{"id": str, "ttl": ms}``), naming the field."""
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise TypeError(f"deduplication must be a dict, not {type(value).__name__}")
        unknown = set(value) - {"id", "ttl", "extend", "replace"}
        if unknown:
            raise ValueError(f"deduplication has unknown keys: {sorted(unknown)}")
        if "id" not in value:
            raise ValueError("deduplication.id is required")
        dedup_id = validate_name(value["id"], "deduplication.id")
        ttl = value.get("ttl")
        if ttl is not None:
            ttl = check_int(ttl, "deduplication.ttl", minimum=1, maximum=MAX_DURATION_MS)
        extend, replace = (_flag(value, name) for name in ("extend", "replace"))
        if extend and ttl is None:
            raise ValueError("deduplication.extend needs deduplication.ttl: the ttl to start again")
        return cls(dedup_id, ttl or 0, extend, replace)

    def args(self) -> list[Any]:
        return [self.id, self.ttl, ("e" if self.extend else "") + ("r" if self.replace else "")]


def _flag(value: Mapping[str, Any], name: str) -> bool:
    flag = value.get(name, False)
    if not isinstance(flag, bool):
        raise TypeError(f"deduplication.{name} must be a bool, not {type(flag).__name__}")
    return flag


NO_DEDUPLICATION = ["", 0, ""]
"""The add_jobs arguments of a job without deduplication, in a call where another has it."""


class DeduplicationMixin:
    """The deduplication half of :class:`~lazarus.Queue`."""

    keys: QueueKeys
    _client: Client

    @reports_unavailable
    async def get_deduplication_job_id(self, deduplication_id: str) -> str | None:
        """The id of the job that holds ``deduplication_id``, or ``None``."""
        key = self.keys.dedup(validate_name(deduplication_id, "deduplication_id"))
        holder = await self._client.get(key)
        if holder is None:
            return None
        return holder.decode() if isinstance(holder, bytes) else str(holder)

    @reports_unavailable
    async def remove_deduplication_key(self, deduplication_id: str) -> bool:
        """Free ``deduplication_id`` at once, so that the next add with it adds a job;
        returns whether it was held."""
        key = self.keys.dedup(validate_name(deduplication_id, "deduplication_id"))
        return bool(await self._client.delete(key))
