"""The ``start`` and ``end`` of the range getters (``get_waiting``, ``get_dead_letter_jobs``,
``get_job_logs``, ...): inclusive indexes, ``-1`` for the last, as Redis's LRANGE and ZRANGE
take them."""

from __future__ import annotations

# What Redis reads as an index: a signed 64-bit integer.
MIN_INDEX, MAX_INDEX = -(2**63), 2**63 - 1


def check_range(start: object, end: object) -> tuple[int, int]:
    """``(start, end)`` when both are ints (not bools) Redis takes as an index; else raise
    ``TypeError`` or ``ValueError`` naming ``start`` or ``end``."""
    return _index(start, "start"), _index(end, "end")


def _index(value: object, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{field} must be an int, not {type(value).__name__}")
    if not MIN_INDEX <= value <= MAX_INDEX:
        raise ValueError(f"{field} must be a 64-bit index (-2**63 to 2**63 - 1), got {value}")
    return value
