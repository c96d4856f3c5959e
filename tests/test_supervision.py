"""Incidents: a failing loop logs one line per change of state, not one per attempt."""

from __future__ import annotations

import logging

import pytest
from redis.exceptions import (
    AuthenticationError,
    BusyLoadingError,
    InvalidResponse,
    OutOfMemoryError,
    ResponseError,
)
from redis.exceptions import ConnectionError as RedisConnectionError

from lazarus._supervision import MAX_BACKOFF, Incident, is_configuration_error

log = logging.getLogger("lazarus.test")


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [f"{r.levelname} {r.getMessage()}" for r in caplog.records]


def test_the_same_failure_again_and_again_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="lazarus.test")
    incident = Incident(log, "claiming")

    for _ in range(50):
        incident.failed(RedisConnectionError("refused"))
    incident.succeeded()
    incident.succeeded()

    assert _lines(caplog) == [
        "WARNING claiming failed: ConnectionError: refused; retrying with backoff",
        "INFO claiming works again after 50 failed attempts over 0 s",
    ]


def test_a_new_kind_of_failure_is_logged_and_a_reminder_comes_when_due(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="lazarus.test")
    incident = Incident(log, "renewal", reminder=0)

    incident.failed(RedisConnectionError("refused"))
    incident.failed(OutOfMemoryError("command not allowed"))
    incident.failed(OutOfMemoryError("command not allowed"))

    assert [line.split(":")[0] for line in _lines(caplog)] == [
        "WARNING renewal failed",
        "WARNING renewal failed again, differently",
        "WARNING renewal still failing after 3 attempts over 0 s",
    ]


def test_backoff_grows_with_jitter_up_to_its_cap() -> None:
    incident = Incident(log, "x")
    waits = []
    for _ in range(30):
        incident.failed(RedisConnectionError("refused"))
        waits.append(incident.backoff())

    assert all(0 < wait <= MAX_BACKOFF for wait in waits)
    assert waits[0] < 0.5 and max(waits[-5:]) > 2


@pytest.mark.parametrize(
    ("error", "configuration"),
    [
        (AuthenticationError("invalid username-password pair"), True),
        (ResponseError("DB index is out of range"), True),
        (InvalidResponse("Protocol error"), True),
        (RedisConnectionError("Connection refused"), False),
        (BusyLoadingError("Redis is loading"), False),
        (OutOfMemoryError("command not allowed"), False),
        (ResponseError("BUSY Redis is busy running a script"), False),
    ],
)
def test_only_settings_redis_refuses_count_as_configuration_errors(
    error: Exception, configuration: bool
) -> None:
    assert is_configuration_error(error) is configuration
