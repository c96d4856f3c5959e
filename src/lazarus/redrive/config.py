"""Redrive rules and alert rules from a TOML file (read with the standard library's
``tomllib``), and :class:`RulesFile`, which re-reads the file when it changes so that a running
redriver follows new rules without a restart.

Format (see docs/redrive.md)::

    [[rule]]
    name = "timeouts"
    strategy = "backoff"            # backoff | window | conditional | manual
    schedule = ["PT1M", "PT5M", 900000]   # ISO 8601 durations or ms
    max_replays = 3
    match = { error_type = "TimeoutError", source_queue = "payments" }

    [[alert]]
    name = "BigBacklog"
    metric = "backlog"
    op = ">"
    threshold = 500
    severity = "critical"
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..dead_letter import DeadLetterFilter
from ..dead_letter.retention import duration_ms
from .alerts import AlertRule
from .rules import RedriveRule

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 reads TOML with tomli
    import tomli as tomllib  # type: ignore[import-not-found]

log = logging.getLogger("lazarus.redrive")
_RULE_FIELDS = {
    "name", "strategy", "schedule", "max_replays", "failed_reason_pattern", "hours", "timezone",
    "health_url", "breaker_threshold", "breaker_cooldown", "match",
}  # fmt: skip


def parse_rules(text: str) -> tuple[list[RedriveRule], list[AlertRule] | None]:
    """The redrive rules and alert rules (``None`` when the file has none) of a TOML text;
    raises ``ValueError`` naming the rule and field at fault."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ValueError(f"rules file is not valid TOML: {error}") from None
    unknown = set(data) - {"rule", "alert"}
    if unknown:
        raise ValueError(f"rules file has unknown tables: {', '.join(sorted(unknown))}")
    rules = [_rule(i, raw) for i, raw in enumerate(_tables(data, "rule"))]
    alerts = None
    if "alert" in data:
        alerts = [_alert(i, raw) for i, raw in enumerate(_tables(data, "alert"))]
    return rules, alerts


def _tables(data: Mapping[str, Any], name: str) -> list[Mapping[str, Any]]:
    tables = data.get(name, [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise ValueError(f"{name} must be an array of tables ([[{name}]])")
    return tables


def _rule(index: int, raw: Mapping[str, Any]) -> RedriveRule:
    where = f"rule[{index}]"
    unknown = set(raw) - _RULE_FIELDS
    if unknown:
        raise ValueError(f"{where} has unknown fields: {', '.join(sorted(unknown))}")
    fields = dict(raw)
    try:
        if "match" in fields:
            if not isinstance(fields["match"], dict):
                raise ValueError("match must be a table")
            fields["match"] = DeadLetterFilter(**fields["match"])
        if "schedule" in fields:
            fields["schedule"] = [
                duration_ms(v, "schedule") if isinstance(v, str) else v for v in fields["schedule"]
            ]
        return RedriveRule(**fields)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{where}: {error}") from None


def _alert(index: int, raw: Mapping[str, Any]) -> AlertRule:
    try:
        return AlertRule(**raw)
    except (TypeError, ValueError) as error:
        raise ValueError(f"alert[{index}]: {error}") from None


class RulesFile:
    """A rules file, re-read when its modification time or size changes. A change that does
    not parse is logged and the rules in force stay."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._stamp = self._stat()
        self.rules, self.alerts = parse_rules(self.path.read_text(encoding="utf-8"))

    def _stat(self) -> tuple[int, int]:
        st = self.path.stat()
        return st.st_mtime_ns, st.st_size

    def current(self) -> tuple[RedriveRule, ...]:
        """The rules in force, re-read first if the file changed."""
        try:
            stamp = self._stat()
            if stamp != self._stamp:
                self._stamp = stamp
                self.rules, self.alerts = parse_rules(self.path.read_text(encoding="utf-8"))
                log.info("rules reloaded from %s: %d rules", self.path, len(self.rules))
        except (OSError, ValueError) as error:
            log.warning("rules file %s not reloaded, keeping the rules in force: %s",
                        self.path, error)  # fmt: skip
        return tuple(self.rules)
