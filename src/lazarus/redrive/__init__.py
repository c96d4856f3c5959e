"""The redrive service: rules that replay, flag or fail the pending dead letters of a dead
letter queue (:class:`Redriver`, ``lazarus redrive``), and alerts on its health."""

from .alerts import DEFAULT_ALERTS, Alert, AlertRule, prometheus_rules
from .config import RulesFile, parse_rules
from .rules import DEFAULT_RULE, RedriveRule
from .service import Redriver, RedriverStats

__all__ = [
    "DEFAULT_ALERTS",
    "DEFAULT_RULE",
    "Alert",
    "AlertRule",
    "RedriveRule",
    "Redriver",
    "RedriverStats",
    "RulesFile",
    "parse_rules",
    "prometheus_rules",
]
