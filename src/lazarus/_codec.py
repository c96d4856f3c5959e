"""JSON encoding of payloads and return values, with size limits and errors that name the path.

Payloads are JSON, never pickle. Encoding is strict so that what a consumer decodes is what
the producer sent: non-string object keys, NaN and infinities are rejected rather than
silently changed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

DEFAULT_MAX_PAYLOAD_BYTES = 1024 * 1024
# Deeper values are refused: every surface that shows a payload (worker, HTTP API, dashboard)
# must be able to decode and re-encode it without running out of stack.
MAX_DEPTH = 128

_encoder = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def _one_shot_encoder() -> Callable[[Any], str]:
    """``_encoder.encode`` without building its C encoder again on every call (half its
    cost for a small payload). No check for circular references: :func:`encode` refuses
    them before (as too deep)."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # no C accelerator
        return _encoder.encode
    chunks = make(
        None, _encoder.default, json.encoder.encode_basestring, None, ":", ",", False, False,
        False,
    )  # fmt: skip
    return lambda value: "".join(chunks(value, 0))


_encode = _one_shot_encoder()


def text(value: object) -> str:
    """A Redis reply value as text: bytes decoded as UTF-8, anything else through ``str``."""
    return value.decode() if isinstance(value, bytes) else str(value)


def encode(value: Any, *, field: str = "data", max_bytes: int | None = None) -> str:
    """Encode ``value`` as compact JSON.

    Raises ``TypeError`` or ``ValueError`` naming the path of the first value JSON cannot
    represent (a non-JSON type, a non-str key, NaN, an integer too long to print, a string
    with a lone surrogate, nesting deeper than :data:`MAX_DEPTH` or a value that contains
    itself), and ``ValueError`` when the encoded size exceeds ``max_bytes``.
    """
    if value is None and (max_bytes is None or max_bytes >= 4):  # most processors return it
        return "null"
    if _needs_a_closer_look(value):
        _raise_at_offending_path(value, field, 1)
    try:
        text = _encode(value)
        # A lone surrogate fails to encode here, before it reaches Redis.
        size = len(text) if text.isascii() else len(text.encode())
    except (TypeError, ValueError, RecursionError) as exc:
        _raise_at_offending_path(value, field, 1)
        kind = TypeError if isinstance(exc, TypeError) else ValueError
        raise kind(f"{field} cannot be encoded as JSON: {exc}") from exc
    if max_bytes is not None and size > max_bytes:
        raise ValueError(f"{field} is {size} bytes encoded, over the limit of {max_bytes}")
    return text


def decode(raw: str | bytes | None) -> Any:
    """Decode JSON text stored by :func:`encode`; ``None`` stays ``None``."""
    if raw is None:
        return None
    return json.loads(raw)


def _needs_a_closer_look(value: Any) -> bool:
    """Whether ``value`` has a non-str key or nests deeper than :data:`MAX_DEPTH`: what the
    encoder would accept wrongly (it turns int keys into strings) or could not finish. A cheap
    walk without paths, run on every encode; a cycle shows up as depth."""
    if not isinstance(value, _CONTAINERS):
        return False
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            return True
        if isinstance(item, dict):
            for key, child in item.items():
                if not isinstance(key, str):
                    return True
                if isinstance(child, _CONTAINERS):
                    stack.append((child, depth + 1))
        else:
            for child in item:
                if isinstance(child, _CONTAINERS):
                    stack.append((child, depth + 1))
    return False


_CONTAINERS = (dict, list, tuple)


def _raise_at_offending_path(value: Any, path: str, depth: int) -> None:
    """Walk ``value`` and raise for the first part JSON cannot hold, naming its path."""
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, str):
        _check_text(value, path)
    elif isinstance(value, int):
        try:
            int.__repr__(value)
        except ValueError as exc:  # longer than sys.get_int_max_str_digits()
            raise ValueError(f"{path} is an integer too long to encode: {exc}") from None
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{path} is {value!r}, which JSON cannot represent")
    elif isinstance(value, _CONTAINERS):
        if depth > MAX_DEPTH:
            where = path if len(path) <= 80 else path[:80] + "..."  # starts with the field
            raise ValueError(
                f"{where} is nested more than {MAX_DEPTH} levels deep (or contains itself)"
            )
        _raise_in_container(value, path, depth)
    else:
        raise TypeError(f"{path} is of type {type(value).__name__}, which is not JSON-serialisable")


def _raise_in_container(value: Any, path: str, depth: int) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(
                    f"{path} has a key {key!r} of type {type(key).__name__}; keys must be str"
                )
            _check_text(key, f"{path} key {key!r}")
            _raise_at_offending_path(item, f"{path}[{key!r}]", depth + 1)
    else:
        for index, item in enumerate(value):
            _raise_at_offending_path(item, f"{path}[{index}]", depth + 1)


def _check_text(text: str, path: str) -> None:
    try:
        text.encode()
    except UnicodeEncodeError as exc:
        bad = text[exc.start]
        raise ValueError(
            f"{path} has a lone surrogate {bad!r} at index {exc.start}, which UTF-8 cannot encode"
        ) from None


def json_or(raw: str | None, default: Any) -> Any:
    """``raw`` decoded, or ``default`` when it is missing or not JSON (a dead letter of a job
    whose stored options could not be decoded keeps them as they were)."""
    try:
        return json.loads(raw) if raw else default
    except ValueError:
        return default


def optional_int(value: str | None) -> int | None:
    """``value`` as an int, or None when it is missing or empty."""
    return None if value is None or value == "" else int(value)
