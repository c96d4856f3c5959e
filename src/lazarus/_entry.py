"""How a failure enters the dead letter queue: which exceptions skip the remaining attempts
(a worker's ``non_retryable``), and what a job that fails for good becomes (its
``on_exhaustion`` option: ``dead_letter``, ``fail`` or ``discard``)."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from typing import Literal

OnExhaustion = Literal["dead_letter", "fail", "discard"]
ON_EXHAUSTION = ("dead_letter", "fail", "discard")
NonRetryable = type[BaseException] | str


def check_non_retryable(value: Iterable[NonRetryable] | None) -> tuple[NonRetryable, ...]:
    """A worker's ``non_retryable``: exception classes, or name patterns (``fnmatch`` globs,
    matched against the class name and its dotted path: ``"*Timeout*"``,
    ``"billing.errors.*"``). Raises naming ``non_retryable``."""
    if value is None:
        return ()
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise TypeError("non_retryable must be a list of exception classes or name patterns")
    items = tuple(value)
    for item in items:
        if isinstance(item, str):
            if not item.strip():
                raise ValueError("non_retryable patterns must be non-empty")
        elif not (isinstance(item, type) and issubclass(item, BaseException)):
            raise TypeError(
                f"non_retryable items must be exception classes or str patterns, not {item!r}"
            )
    return items


def is_non_retryable(error: BaseException, rules: tuple[NonRetryable, ...]) -> bool:
    """Whether ``error`` matches one of the rules: an instance of a class, or a class (its own
    or an ancestor's) whose name or dotted path matches a pattern."""
    for rule in rules:
        if isinstance(rule, type):
            if isinstance(error, rule):
                return True
            continue
        for cls in type(error).__mro__:
            names = (cls.__name__, f"{cls.__module__}.{cls.__qualname__}")
            if any(fnmatch.fnmatchcase(n, rule) for n in names):
                return True
    return False


def check_on_exhaustion(value: object) -> OnExhaustion | None:
    """A job's ``on_exhaustion`` (``None``: dead-letter when the worker has a dead letter
    queue, else fail). Raises naming ``on_exhaustion``."""
    if value is None:
        return None
    if value not in ON_EXHAUSTION:
        raise ValueError(
            f"on_exhaustion must be one of {', '.join(ON_EXHAUSTION)} or None, got {value!r}"
        )
    return value  # type: ignore[return-value]
