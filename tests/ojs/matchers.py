"""The matchers of the OJS conformance test format (suites/test-case-reference.md). Each
check returns ``None`` when it passes, else a message saying why not."""

from __future__ import annotations

import json
import re
from typing import Any

from .dsl import MISSING, go_string

UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
UUIDV7_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
DATETIME_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")


def check(value: Any, matcher: Any, tolerance_pct: float = 50.0) -> str | None:
    """Whether ``value`` (MISSING when the path did not resolve) satisfies ``matcher``."""
    if isinstance(matcher, dict):
        return _check_object(value, matcher, tolerance_pct)
    if isinstance(matcher, list):
        if not isinstance(value, list) or len(value) != len(matcher):
            return f"expected an array of {len(matcher)}, got {_show(value)}"
        for i, (v, m) in enumerate(zip(value, matcher)):
            problem = check(v, m, tolerance_pct)
            if problem:
                return f"[{i}]: {problem}"
        return None
    if isinstance(matcher, str):
        return _check_string(value, matcher, tolerance_pct)
    if matcher is None:
        return None if value is None else f"expected null, got {_show(value)}"
    if isinstance(matcher, bool):
        return None if value is matcher else f"expected {matcher}, got {_show(value)}"
    if _is_number(value) and value == matcher:
        return None
    return f"expected {matcher!r}, got {_show(value)}"


def _show(value: Any) -> str:
    return "nothing" if value is MISSING else json.dumps(value)[:200]


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_PATTERNS: list[tuple[re.Pattern[str], Any]] = []


def _string_rule(pattern: str) -> Any:
    def register(func: Any) -> Any:
        _PATTERNS.append((re.compile(pattern, re.S), func))
        return func

    return register


@_string_rule(r"^any$")
def _any(value: Any, _m: re.Match[str], _t: float) -> bool:
    return value is not MISSING and value is not None


@_string_rule(r"^absent$")
def _absent(value: Any, _m: re.Match[str], _t: float) -> bool:
    return value is MISSING or value is None


@_string_rule(r"^exists$")
def _exists(value: Any, _m: re.Match[str], _t: float) -> bool:
    return value is not MISSING


@_string_rule(r"^string:non_?empty$")
def _nonempty(value: Any, _m: re.Match[str], _t: float) -> bool:
    return isinstance(value, str) and value != ""


@_string_rule(r"^string:uuid$")
def _uuid(value: Any, _m: re.Match[str], _t: float) -> bool:
    return isinstance(value, str) and UUID_RE.match(value) is not None


@_string_rule(r"^string:uuidv7$")
def _uuidv7(value: Any, _m: re.Match[str], _t: float) -> bool:
    return isinstance(value, str) and UUIDV7_RE.match(value) is not None


@_string_rule(r"^string:datetime$")
def _datetime(value: Any, _m: re.Match[str], _t: float) -> bool:
    return isinstance(value, str) and DATETIME_RE.match(value) is not None


@_string_rule(r"^string:contains:(.*)$")
def _contains_text(value: Any, m: re.Match[str], _t: float) -> bool:
    return isinstance(value, str) and m.group(1) in value


@_string_rule(r"^string:pattern\((.*)\)$")
def _pattern(value: Any, m: re.Match[str], _t: float) -> bool:
    return isinstance(value, str) and re.search(m.group(1), value) is not None


@_string_rule(r"^number:positive$")
def _positive(value: Any, _m: re.Match[str], _t: float) -> bool:
    return _is_number(value) and value > 0


@_string_rule(r"^number:non_negative$")
def _non_negative(value: Any, _m: re.Match[str], _t: float) -> bool:
    return _is_number(value) and value >= 0


@_string_rule(r"^number:range\(\s*(-?[\d.]+)\s*,\s*(-?[\d.]+)\s*\)$")
def _range(value: Any, m: re.Match[str], _t: float) -> bool:
    return _is_number(value) and float(m.group(1)) <= value <= float(m.group(2))


@_string_rule(r"^~(-?[\d.]+)$")
def _approximately(value: Any, m: re.Match[str], tolerance_pct: float) -> bool:
    expected = float(m.group(1))
    return _is_number(value) and abs(value - expected) <= approx_tolerance(expected, tolerance_pct)


@_string_rule(r"^array:non_?empty$")
def _array_nonempty(value: Any, _m: re.Match[str], _t: float) -> bool:
    return isinstance(value, list) and len(value) > 0


@_string_rule(r"^array:empty$")
def _array_empty(value: Any, _m: re.Match[str], _t: float) -> bool:
    return isinstance(value, list) and len(value) == 0


@_string_rule(r"^array:length(?::(\d+)|\((\d+)\))$")
def _array_length(value: Any, m: re.Match[str], _t: float) -> bool:
    return isinstance(value, list) and len(value) == int(m.group(1) or m.group(2))


@_string_rule(r"^array:min(?:_length)?:(\d+)$")
def _array_min(value: Any, m: re.Match[str], _t: float) -> bool:
    return isinstance(value, list) and len(value) >= int(m.group(1))


@_string_rule(r"^contains:(.*)$")
def _contains(value: Any, m: re.Match[str], _t: float) -> bool:
    return isinstance(value, list) and any(go_string(v) == m.group(1) for v in value)


@_string_rule(r"^not_contains:(.*)$")
def _not_contains(value: Any, m: re.Match[str], _t: float) -> bool:
    return isinstance(value, list) and all(go_string(v) != m.group(1) for v in value)


@_string_rule(r"^one_of:(.*)$")
def _one_of(value: Any, m: re.Match[str], _t: float) -> bool:
    return go_string(value) in [part.strip() for part in m.group(1).split(",")]


def approx_tolerance(expected: float, tolerance_pct: float) -> float:
    """max(expected * tolerance_pct / 100, 100)."""
    return max(abs(expected) * tolerance_pct / 100, 100.0)


def _check_string(value: Any, matcher: str, tolerance_pct: float) -> str | None:
    for pattern, rule in _PATTERNS:
        m = pattern.match(matcher)
        if m is not None:
            return None if rule(value, m, tolerance_pct) else f"{_show(value)} is not {matcher!r}"
    if value == matcher:  # a literal
        return None
    return f"expected {matcher!r}, got {_show(value)}"


_TYPES = {
    "string": lambda v: isinstance(v, str),
    "number": _is_number,
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
}


def _check_object(value: Any, matcher: dict[str, Any], tolerance_pct: float) -> str | None:
    if not any(k.startswith("$") or k == "range" for k in matcher):
        return None if value == matcher else f"expected {matcher!r}, got {_show(value)}"
    for op, arg in matcher.items():
        problem = _operator(value, op, arg, tolerance_pct)
        if problem:
            return problem
    return None


def _operator(value: Any, op: str, arg: Any, tolerance_pct: float) -> str | None:
    present = value is not MISSING
    if op == "$exists":
        return None if present == bool(arg) else f"$exists {arg}: got {_show(value)}"
    if op == "$type":
        ok = present and _TYPES.get(arg, lambda v: False)(value)
        return None if ok else f"expected a {arg}, got {_show(value)}"
    if op == "$match":
        ok = isinstance(value, str) and re.search(arg, value) is not None
        return None if ok else f"{_show(value)} does not match {arg!r}"
    if op in ("$in", "$or"):
        if any(check(value, alt, tolerance_pct) is None for alt in arg):
            return None
        return f"{_show(value)} matches none of {arg!r}"
    if op == "$size":
        if not isinstance(value, list):
            return f"expected an array, got {_show(value)}"
        return _operator(len(value), "$eq", arg, tolerance_pct) if not isinstance(arg, dict) \
            else _check_object(len(value), arg, tolerance_pct)  # fmt: skip
    if op == "$empty":
        empty = value is MISSING or value in (None, "", {}, [])
        return None if empty == bool(arg) else f"$empty {arg}: got {_show(value)}"
    if op == "range":
        ok = _is_number(value) and value >= arg.get("min", float("-inf")) \
            and value <= arg.get("max", float("inf"))  # fmt: skip
        return None if ok else f"{_show(value)} not in range {arg}"
    comparisons = {"$eq": lambda a, b: a == b, "$gte": lambda a, b: a >= b,
                   "$gt": lambda a, b: a > b, "$lte": lambda a, b: a <= b,
                   "$lt": lambda a, b: a < b}  # fmt: skip
    if op in comparisons:
        ok = _is_number(value) and comparisons[op](value, arg)
        return None if ok else f"{_show(value)} fails {op} {arg}"
    return f"unknown operator {op!r}"
