"""Redrive rules: which pending dead letters a rule applies to, and what its strategy decides.

A rule is a filter (:class:`~lazarus.DeadLetterFilter`: source queue, name or name prefix,
error type, reason, ``failed_reason`` substring; plus ``failed_reason_pattern``, a regular
expression) and a strategy:

- ``backoff``: replay once ``schedule[replay count]`` (ms; the last entry repeats) has passed
  since the dead letter arrived or last changed status (default 1, 5, 15, 30, 60 minutes);
- ``window``: replay while the hour in ``timezone`` is one of ``hours`` (default 2, 3, 4);
- ``conditional``: replay while ``gate`` (a callable, sync or async) or ``health_url`` (HTTP
  2xx) says yes and the rule's circuit breaker is closed;
- ``manual``: flag the dead letter ``manual`` for a human, and raise an alert.

Past ``max_replays`` replays a dead letter becomes ``failed``, whatever the strategy.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
import zoneinfo
from collections.abc import Awaitable, Callable, Sequence
from typing import Literal

from .._keys import validate_name
from ..dead_letter import DeadLetterFilter

Strategy = Literal["backoff", "window", "conditional", "manual"]
STRATEGIES = ("backoff", "window", "conditional", "manual")
DEFAULT_SCHEDULE = (60_000, 300_000, 900_000, 1_800_000, 3_600_000)
Gate = Callable[[], "bool | Awaitable[bool]"]
Decision = Literal["replay", "manual", "failed", "wait"]


@dataclasses.dataclass(frozen=True)
class Candidate:
    """What a redriver knows of a pending dead letter when it decides."""

    id: str
    source_queue: str
    name: str
    error_type: str
    reason: str
    failed_reason: str
    dead_lettered_at: int
    status_at: int | None
    replay_count: int

    @property
    def since(self) -> int:
        """When the dead letter's current wait began (ms): arrival or last status change."""
        return max(self.dead_lettered_at, self.status_at or 0)


@dataclasses.dataclass(frozen=True)
class RedriveRule:
    """One rule of a redriver: which dead letters (``match``; ``None`` for all) and what to do.

    Example::

        RedriveRule(DeadLetterFilter(error_type="TimeoutError"), strategy="backoff",
                    schedule=[60_000, 300_000], max_replays=3, name="timeouts")
    """

    match: DeadLetterFilter | None = None
    strategy: Strategy = "backoff"
    schedule: Sequence[int] = DEFAULT_SCHEDULE
    max_replays: int = 5
    name: str | None = None
    failed_reason_pattern: str | None = None
    hours: Sequence[int] = (2, 3, 4)
    timezone: str = "UTC"
    gate: Gate | None = None
    health_url: str | None = None
    breaker_threshold: int = 5
    breaker_cooldown: int = 60_000

    def __post_init__(self) -> None:
        if self.name is not None:  # each replay records it as its rule, checked the same way
            validate_name(self.name, "name")
        if self.match is not None and not isinstance(self.match, DeadLetterFilter):
            raise TypeError(f"match must be a DeadLetterFilter or None, not {self.match!r}")
        if self.match is not None and (self.match.payload_contains or self.match.timed):
            raise ValueError("match must not use payload_contains, since or until")
        if self.strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}")
        object.__setattr__(self, "schedule", tuple(self.schedule))
        if not self.schedule or not all(_count(v) and v >= 0 for v in self.schedule):
            raise ValueError("schedule must be a non-empty list of ints (ms) >= 0")
        for field in ("max_replays", "breaker_threshold", "breaker_cooldown"):
            if not _count(getattr(self, field)) or getattr(self, field) < 0:
                raise ValueError(f"{field} must be an int >= 0")
        self._check_pattern()
        self._check_window()
        if self.strategy == "conditional" and (self.gate is None) == (self.health_url is None):
            raise ValueError("a conditional rule needs exactly one of gate and health_url")
        if self.health_url is not None and not re.match(r"^https?://", str(self.health_url)):
            raise ValueError("health_url must be an http:// or https:// URL")

    def _check_pattern(self) -> None:
        if self.failed_reason_pattern is not None:
            try:
                re.compile(self.failed_reason_pattern)
            except (re.error, TypeError) as error:
                raise ValueError(
                    f"failed_reason_pattern is not a regular expression: {error}"
                ) from None

    def _check_window(self) -> None:
        object.__setattr__(self, "hours", tuple(self.hours))
        if not all(_count(h) and 0 <= h <= 23 for h in self.hours):
            raise ValueError("hours must be ints from 0 to 23")
        try:
            zoneinfo.ZoneInfo(self.timezone)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError, TypeError):
            raise ValueError(f"timezone {self.timezone!r} is not a known time zone") from None

    @property
    def label(self) -> str:
        """The rule's name, or its strategy when it has none."""
        return self.name or self.strategy

    def matches(self, dl: Candidate) -> bool:
        """Whether this rule applies to ``dl``."""
        if self.failed_reason_pattern and not re.search(self.failed_reason_pattern,
                                                        dl.failed_reason):  # fmt: skip
            return False
        flt = self.match
        if flt is None:
            return True
        checks = (
            (flt.source_queue, dl.source_queue), (flt.name, dl.name),
            (flt.error_type, dl.error_type),
            (None if flt.reason is None else str(flt.reason), dl.reason),
        )  # fmt: skip
        if any(want is not None and want != have for want, have in checks):
            return False
        if flt.name_prefix and not dl.name.startswith(flt.name_prefix):
            return False
        return not flt.failed_reason or flt.failed_reason.lower() in dl.failed_reason.lower()

    def decide(self, dl: Candidate, now: int) -> Decision:
        """What to do with ``dl`` at ``now`` (ms), leaving gates and breakers aside."""
        if dl.replay_count >= self.max_replays:
            return "failed"
        if self.strategy == "manual":
            return "manual"
        if self.strategy == "backoff":
            return "replay" if now >= self.due_at(dl) else "wait"
        if self.strategy == "window":
            return "replay" if self.in_window(now) else "wait"
        return "replay"

    def due_at(self, dl: Candidate) -> int:
        """When a backoff rule replays ``dl`` (ms)."""
        return dl.since + self.schedule[min(dl.replay_count, len(self.schedule) - 1)]

    def in_window(self, now: int) -> bool:
        """Whether ``now`` (ms) falls in one of the rule's hours in its time zone."""
        zone = zoneinfo.ZoneInfo(self.timezone)
        return datetime.datetime.fromtimestamp(now / 1000, zone).hour in self.hours


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


DEFAULT_RULE = RedriveRule(strategy="manual", name="default")


def check_rules(rules: object) -> tuple[RedriveRule, ...]:
    """``rules`` as a tuple of :class:`RedriveRule`; raises naming ``rules``."""
    if isinstance(rules, (str, bytes)) or not isinstance(rules, Sequence):
        raise TypeError("rules must be a list of RedriveRule")
    for index, rule in enumerate(rules):
        if not isinstance(rule, RedriveRule):
            raise TypeError(f"rules[{index}] must be a RedriveRule, not {type(rule).__name__}")
    return tuple(rules)


def first_match(rules: Sequence[RedriveRule], dl: Candidate) -> RedriveRule:
    """The first rule that matches ``dl``, else :data:`DEFAULT_RULE`."""
    return next((rule for rule in rules if rule.matches(dl)), DEFAULT_RULE)
