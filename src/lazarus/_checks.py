"""The checks of numeric arguments and options that many calls share. Each returns the value
when it is good and otherwise raises naming the field, before anything is written."""

from __future__ import annotations

import math
from typing import TypeGuard


def check_int(value: object, field: str, *, minimum: int, maximum: int | None = None) -> int:
    """``value`` when it is an int (not a bool) from ``minimum`` to ``maximum``; a value of
    another type raises TypeError, one out of range ValueError, both naming ``field``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{field} must be an int, not {type(value).__name__}")
    if value < minimum or (maximum is not None and value > maximum):
        bound = f"between {minimum} and {maximum}" if maximum is not None else f">= {minimum}"
        raise ValueError(f"{field} must be {bound}, got {value}")
    return value


def at_least(value: object, field: str, minimum: int = 1, maximum: int | None = None) -> int:
    """``value`` when it is an int (not a bool) >= ``minimum`` (and <= ``maximum``); else
    ValueError naming ``field``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{field} must be an int >= {minimum}, got {value!r}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{field} must be at most {maximum}, got {value!r}")
    return value


def _number(value: object) -> TypeGuard[int | float]:
    return not isinstance(value, bool) and isinstance(value, (int, float))


def positive_number(value: object, field: str) -> float:
    """``value`` as a float when it is a number > 0 (not a bool, not NaN); else ValueError
    naming ``field``."""
    if not _number(value) or not value > 0:
        raise ValueError(f"{field} must be a number > 0, got {value!r}")
    return float(value)


def positive_or_none(value: object, field: str, unit: str = "") -> float | None:
    """``value`` as a float when it is a number > 0 (not a bool, not NaN), ``None`` for
    ``None``; else ValueError naming ``field`` (and the ``unit`` it counts in, if given)."""
    if value is None:
        return None
    if not _number(value) or not value > 0:
        raise ValueError(f"{field} must be a number > 0{unit and f' ({unit})'} or None, "
                         f"got {value!r}")  # fmt: skip
    return float(value)


def seconds(value: object, field: str, *, zero: bool = False) -> float:
    """``value`` as a finite number of seconds, > 0 (or >= 0 with ``zero``); else ValueError
    naming ``field``."""
    if (
        not _number(value) or not math.isfinite(value)
        or value < 0 or (value == 0 and not zero)
    ):  # fmt: skip
        bound = ">= 0" if zero else "> 0"
        raise ValueError(f"{field} must be a finite number of seconds {bound}, got {value!r}")
    return float(value)
