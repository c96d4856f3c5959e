"""JSON encoding of payloads and return values, with size limits and errors that name the path.

Payloads are JSON, never pickle. Encoding is strict so that what a consumer decodes is what
the producer sent: non-string object keys, NaN and infinities are rejected rather than
silently changed.
"""

from __future__ import annotations

import json
import math
from typing import Any

DEFAULT_MAX_PAYLOAD_BYTES = 1024 * 1024

_encoder = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def encode(value: Any, *, field: str = "data", max_bytes: int | None = None) -> str:
    """Encode ``value`` as compact JSON.

    Raises ``TypeError`` naming the path of the first value JSON cannot represent, and
    ``ValueError`` when the encoded size exceeds ``max_bytes``.
    """
    try:
        text = _encoder.encode(value)
    except (TypeError, ValueError):
        _raise_at_offending_path(value, field)
        raise
    _check_keys(value, field)
    if max_bytes is not None:
        size = len(text.encode())
        if size > max_bytes:
            raise ValueError(f"{field} is {size} bytes encoded, over the limit of {max_bytes}")
    return text


def decode(raw: str | bytes | None) -> Any:
    """Decode JSON text stored by :func:`encode`; ``None`` stays ``None``."""
    if raw is None:
        return None
    return json.loads(raw)


def _raise_at_offending_path(value: Any, path: str) -> None:
    """Walk ``value`` and raise for the first leaf JSON cannot hold."""
    if value is None or isinstance(value, (str, bool, int)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{path} is {value!r}, which JSON cannot represent")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(
                    f"{path} has a key {key!r} of type {type(key).__name__}; keys must be str"
                )
            _raise_at_offending_path(item, f"{path}[{key!r}]")
        return
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _raise_at_offending_path(item, f"{path}[{index}]")
        return
    raise TypeError(f"{path} is of type {type(value).__name__}, which is not JSON-serialisable")


def _check_keys(value: Any, path: str) -> None:
    """``json`` turns int and float keys into strings; reject them so data round-trips."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, dict):
            for key, child in item.items():
                if not isinstance(key, str):
                    raise TypeError(
                        f"{where} has a key {key!r} of type {type(key).__name__}; keys must be str"
                    )
                if isinstance(child, (dict, list, tuple)):
                    stack.append((child, f"{where}[{key!r}]"))
        elif isinstance(item, (list, tuple)):
            for index, child in enumerate(item):
                if isinstance(child, (dict, list, tuple)):
                    stack.append((child, f"{where}[{index}]"))
