"""The OJS conformance test format (suites/test-case-reference.md): JSONPath and templates."""

from __future__ import annotations

import json
import re
from typing import Any

MISSING = object()  # a path that does not resolve

TEMPLATE_RE = re.compile(r"\{\{\s*([^{}]+?)\s*\}\}")
_TOKEN_RE = re.compile(r"\.([^.\[\]]+)|\[(\*|\d+|\?\(@\.([^=]+)==(.+?)\))\]")


# -- JSONPath ------------------------------------------------------------------------------


def resolve(data: Any, path: str) -> Any:
    """The value at ``path`` ($, .field, [n], [*], [?(@.field=='value')]), or MISSING."""
    if not path.startswith("$"):
        return MISSING
    rest = path[1:]
    values = [data]
    wildcard = False
    pos = 0
    while pos < len(rest):
        match = _TOKEN_RE.match(rest, pos)
        if match is None:
            return MISSING
        pos = match.end()
        values = [v for v in (_step(value, match) for value in values) for v in v]
        if match.group(2) == "*":
            wildcard = True
        if not values:
            return MISSING
    return values if wildcard else values[0]


def _step(value: Any, match: re.Match[str]) -> list[Any]:
    field, index, filter_field, filter_value = match.groups()
    if field is not None:
        return [value[field]] if isinstance(value, dict) and field in value else []
    if not isinstance(value, list):
        return []
    if index == "*":
        return list(value)
    if filter_field is not None:
        wanted = filter_value.strip().strip("'\"")
        for item in value:
            if (
                isinstance(item, dict)
                and go_string(item.get(filter_field.strip(), MISSING)) == wanted
            ):
                return [item]
        return []
    i = int(index)
    return [value[i]] if i < len(value) else []


# -- templates -----------------------------------------------------------------------------


def template_value(expression: str, steps: dict[str, Any]) -> Any:
    """The value of ``steps.<id>.response.body.<path>``, or MISSING."""
    parts = expression.split(".", 4)
    if len(parts) < 4 or parts[0] != "steps" or parts[2] != "response" or parts[3] != "body":
        return MISSING
    step = steps.get(parts[1])
    if step is None:
        return MISSING
    body = step["body"]
    if len(parts) == 4:
        return body
    tail = parts[4]
    return resolve(body, "$" + ("" if tail.startswith("[") else ".") + tail)


def render(value: Any, steps: dict[str, Any]) -> Any:
    """``value`` with every template replaced (unresolved ones are left as they are)."""
    if isinstance(value, dict):
        return {render(k, steps): render(v, steps) for k, v in value.items()}
    if isinstance(value, list):
        return [render(v, steps) for v in value]
    if not isinstance(value, str):
        return value

    def substitute(match: re.Match[str]) -> str:
        found = template_value(match.group(1), steps)
        return match.group(0) if found is MISSING else _as_text(found)

    return TEMPLATE_RE.sub(substitute, value)


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None or isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def go_string(value: Any) -> str:
    """``value`` as Go's ``%v`` prints it (used by ``contains:``)."""
    if value is MISSING:
        return "<missing>"
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
