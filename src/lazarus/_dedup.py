"""The ``deduplication`` option of an add: BullMQ's deduplication, atomic with the add.

``{"id": key}`` makes the job the holder of ``key`` until it completes, fails (or is
dead-lettered) or is removed; ``{"id": key, "ttl": ms}`` for ``ttl`` milliseconds from the
add, whatever happens to the job. An add whose key is held writes nothing, emits
``deduplicated`` and returns the holder.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from ._checks import check_int
from ._connection import Client, reports_unavailable
from ._keys import QueueKeys, validate_name
from .job_options import MAX_DURATION_MS


class Deduplication(NamedTuple):
    """A validated ``deduplication`` option: its id and ttl (ms, 0 for none)."""

    id: str
    ttl: int

    @classmethod
    def parse(cls, value: Any) -> Deduplication | None:
        """Validate ``value`` (``None`` or ``{"id": str, "ttl": ms}``), naming the field."""
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise TypeError(f"deduplication must be a dict, not {type(value).__name__}")
        unknown = set(value) - {"id", "ttl"}
        if unknown:
            raise ValueError(f"deduplication has unknown keys: {sorted(unknown)}")
        if "id" not in value:
            raise ValueError("deduplication.id is required")
        dedup_id = validate_name(value["id"], "deduplication.id")
        ttl = value.get("ttl")
        if ttl is None:
            return cls(dedup_id, 0)
        return cls(
            dedup_id, check_int(ttl, "deduplication.ttl", minimum=1, maximum=MAX_DURATION_MS)
        )

    def args(self) -> list[Any]:
        return [self.id, self.ttl]


NO_DEDUPLICATION = ["", 0]
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
