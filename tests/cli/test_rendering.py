"""The pure helpers: time parsing for --since/--until, human durations, ISO times, and the
replay throttle's arithmetic."""

from __future__ import annotations

import asyncio
import datetime

import pytest

from lazarus import DeadLetterFilter
from lazarus.cli._bulk import BulkPlan, Throttle, batch_size_for
from lazarus.cli._options import parse_time
from lazarus.cli._render import duration, iso, truncate

UTC = datetime.timezone.utc
NOW = datetime.datetime(2025, 1, 15, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30m", datetime.datetime(2025, 1, 15, 11, 30, tzinfo=UTC)),
        ("2h", datetime.datetime(2025, 1, 15, 10, 0, tzinfo=UTC)),
        ("7d", datetime.datetime(2025, 1, 8, 12, 0, tzinfo=UTC)),
        ("1h30m", datetime.datetime(2025, 1, 15, 10, 30, tzinfo=UTC)),
        ("45s", datetime.datetime(2025, 1, 15, 11, 59, 15, tzinfo=UTC)),
        ("2025-01-10T08:00:00Z", datetime.datetime(2025, 1, 10, 8, 0, tzinfo=UTC)),
        ("2025-01-10T08:00:00", datetime.datetime(2025, 1, 10, 8, 0, tzinfo=UTC)),
        ("2025-01-10", datetime.datetime(2025, 1, 10, tzinfo=UTC)),
        ("2025-01-10T10:00:00+02:00", datetime.datetime(2025, 1, 10, 8, 0, tzinfo=UTC)),
    ],
)
def test_parse_time_reads_iso_times_and_relative_durations(
    text: str, expected: datetime.datetime
) -> None:
    assert parse_time(text, now=NOW) == expected


@pytest.mark.parametrize("text", ["yesterday", "2h ago", "10", "-5m", "", "2025-13-01"])
def test_parse_time_rejects_anything_else(text: str) -> None:
    assert parse_time(text, now=NOW) is None


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        (0, "0s"),
        (45, "45s"),
        (192, "3m 12s"),
        (3600, "1h"),
        (3660, "1h 1m"),
        (90061, "1d 1h"),
        (-5, "0s"),
    ],
)
def test_duration_shows_the_two_largest_units(seconds: float, expected: str) -> None:
    assert duration(seconds) == expected


def test_iso_is_utc_with_milliseconds() -> None:
    assert iso(1736942400123) == "2025-01-15T12:00:00.123Z"
    assert iso(None) is None


def test_truncate_keeps_short_single_lines_and_marks_cuts() -> None:
    assert truncate("short") == "short"
    assert truncate("x" * 100, 10) == "x" * 9 + "…"
    assert truncate("first\nsecond") == "first…"


def plan(batch_size: int, rate: float | None) -> BulkPlan:
    return BulkPlan("replay", "q", DeadLetterFilter(), False, True, batch_size, rate, True)


def test_a_rate_caps_the_batch_size_so_throttling_takes_small_steps() -> None:
    assert batch_size_for(plan(500, None)) == 500
    assert batch_size_for(plan(500, 20)) == 20
    assert batch_size_for(plan(5, 20)) == 5
    assert batch_size_for(plan(500, 0.5)) == 1


async def test_throttle_waits_until_done_over_rate_seconds_since_the_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a throttle at 10 per second, with sleeps recorded instead of slept
    waits: list[float] = []

    async def record(seconds: float) -> None:
        waits.append(seconds)

    throttle = Throttle(10)
    monkeypatch.setattr(asyncio, "sleep", record)

    # When a batch of 5 is reported done
    await throttle(5)

    # Then it waits what is left of the half second those 5 are allowed
    assert len(waits) == 1 and 0 < waits[0] <= 0.5


async def test_throttle_without_a_rate_never_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    waits: list[float] = []

    async def record(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr(asyncio, "sleep", record)
    await Throttle(None)(1000)
    assert waits == []
