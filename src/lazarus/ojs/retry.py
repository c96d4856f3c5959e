"""OJS's retry policy: parsing, and the decision after a failed attempt (retry after a delay,
or the end: discard or dead letter). The decision is made here, in Python; the engine's
scripts then carry it out atomically."""

from __future__ import annotations

import dataclasses
import random
import re
from typing import Any, Literal

from .errors import OjsError

_DURATION = re.compile(
    r"^P(?!$)(?:(\d+)D)?(?:T(?=\d)(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$"
)
STRATEGIES = ("exponential", "linear", "constant", "none")
MAX_ATTEMPTS = 1000
MAX_INTERVAL_MS = 7 * 86_400_000  # a week
MAX_COEFFICIENT = 100.0


@dataclasses.dataclass(frozen=True)
class RetryPolicy:
    """A job's retry policy, defaults merged in (ojs-retry section 8)."""

    max_attempts: int = 3
    initial_interval_ms: int = 1000
    backoff_coefficient: float = 2.0
    max_interval_ms: int = 300_000
    jitter: bool = True
    non_retryable_errors: tuple[str, ...] = ()
    on_exhaustion: Literal["discard", "dead_letter"] = "discard"
    strategy: str = "exponential"

    def delay_ms(self, retry: int) -> int:
        """The delay before retry number ``retry`` (1 is the first retry)."""
        base = float(self.initial_interval_ms)
        if self.strategy == "linear":
            delay = base * retry
        elif self.strategy in ("constant", "none"):
            delay = base
        else:
            try:
                delay = base * self.backoff_coefficient ** (retry - 1)
            except OverflowError:  # far past any max_interval
                delay = float(self.max_interval_ms)
        delay = min(delay, self.max_interval_ms)
        if self.jitter:
            delay = min(delay * random.uniform(0.5, 1.5), self.max_interval_ms)
        return max(int(delay), 0)

    def is_non_retryable(self, error_type: str) -> bool:
        """Whether ``error_type`` matches ``non_retryable_errors`` (exactly, or by a prefix
        entry ending in ``.*``)."""
        for entry in self.non_retryable_errors:
            if entry == error_type:
                return True
            if entry.endswith(".*") and error_type.startswith(entry[:-1]):
                return True
        return False

    def to_json(self) -> dict[str, Any]:
        """The policy as the job envelope shows it."""
        return {
            "max_attempts": self.max_attempts,
            "initial_interval": _iso(self.initial_interval_ms),
            "backoff_coefficient": self.backoff_coefficient,
            "max_interval": _iso(self.max_interval_ms),
            "jitter": self.jitter,
            "non_retryable_errors": list(self.non_retryable_errors),
            "on_exhaustion": self.on_exhaustion,
            "backoff_strategy": self.strategy,
        }


def _iso(ms: int) -> str:
    return f"PT{ms / 1000:g}S"


def duration_ms(value: object, field: str, maximum: int = MAX_INTERVAL_MS) -> int:
    """An ISO 8601 duration (``PT1S``, ``PT5M``, ``P1DT2H``) in milliseconds, at most
    ``maximum``."""
    match = _DURATION.match(value) if isinstance(value, str) else None
    if match is None:
        raise _bad(f"{field} must be an ISO 8601 duration such as 'PT1S', got {value!r}", field)
    days, hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    total = (((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1000  # inf for 1e400 days
    if total > maximum:
        raise _bad(f"{field} must be at most {_iso(maximum)} ({maximum} ms), got {value!r}",
                   field)  # fmt: skip
    return int(total)


def _bad(message: str, field: str) -> OjsError:
    # A retry policy that parses but breaks a rule is unprocessable (422), as the spec's
    # conformance tests for max_attempts and backoff_coefficient require. The field is
    # named as the messages name it (retry.jitter), under options in the request.
    return OjsError(422, "invalid_request", message, details={"field": f"options.{field}"})


def _int_field(raw: dict[str, Any], field: str, default: int, minimum: int, maximum: int) -> int:
    value = raw.get(field, default)
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise _bad(f"retry.{field} must be an integer from {minimum} to {maximum}, got {value!r}",
                   f"retry.{field}")  # fmt: skip
    return value


def parse_policy(raw: object) -> RetryPolicy:
    """The retry policy of ``options.retry`` (``None`` for the defaults)."""
    if raw is None:
        return RetryPolicy()
    if not isinstance(raw, dict):
        raise _bad("options.retry must be a JSON object", "retry")
    defaults = RetryPolicy()
    coefficient = raw.get("backoff_coefficient", defaults.backoff_coefficient)
    number = not isinstance(coefficient, bool) and isinstance(coefficient, (int, float))
    if not number or not 1.0 <= coefficient <= MAX_COEFFICIENT:  # NaN compares false
        raise _bad(f"retry.backoff_coefficient must be a finite number from 1.0 to "
                   f"{MAX_COEFFICIENT:g}, got {coefficient!r}",
                   "retry.backoff_coefficient")  # fmt: skip
    errors = raw.get("non_retryable_errors", [])
    if not isinstance(errors, list) or not all(isinstance(e, str) for e in errors):
        raise _bad("retry.non_retryable_errors must be an array of strings",
                   "retry.non_retryable_errors")  # fmt: skip
    jitter = raw.get("jitter", True)
    if not isinstance(jitter, bool):
        raise _bad("retry.jitter must be a boolean", "retry.jitter")
    exhaustion = raw.get("on_exhaustion", "discard")
    if exhaustion not in ("discard", "dead_letter"):
        raise _bad(f"retry.on_exhaustion must be 'discard' or 'dead_letter', got {exhaustion!r}",
                   "retry.on_exhaustion")  # fmt: skip
    strategy = raw.get("backoff_strategy", "exponential")
    if strategy not in STRATEGIES:
        raise _bad(f"retry.backoff_strategy must be one of {list(STRATEGIES)}",
                   "retry.backoff_strategy")  # fmt: skip
    initial = raw.get("initial_interval")
    maximum = raw.get("max_interval")
    return RetryPolicy(
        max_attempts=_int_field(raw, "max_attempts", defaults.max_attempts, 0, MAX_ATTEMPTS),
        initial_interval_ms=defaults.initial_interval_ms if initial is None
        else duration_ms(initial, "retry.initial_interval"),
        backoff_coefficient=float(coefficient),
        max_interval_ms=defaults.max_interval_ms if maximum is None
        else duration_ms(maximum, "retry.max_interval"),
        jitter=jitter, non_retryable_errors=tuple(errors), on_exhaustion=exhaustion,
        strategy=strategy,
    )  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Decision:
    """What a failed attempt leads to: ``retry`` after ``delay_ms``, or ``discard`` /
    ``dead_letter``."""

    kind: Literal["retry", "discard", "dead_letter"]
    delay_ms: int = 0


def decide(policy: RetryPolicy, attempt: int, error_type: str, retryable: bool) -> Decision:
    """The outcome of failed attempt number ``attempt`` (1-indexed)."""
    if not retryable or policy.is_non_retryable(error_type) or attempt >= policy.max_attempts:
        return Decision(policy.on_exhaustion)
    return Decision("retry", policy.delay_ms(attempt))
