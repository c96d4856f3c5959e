"""The pure helpers: time parsing for --since/--until, human durations, ISO times, and the
bulk progress bar."""

from __future__ import annotations

import datetime

import pytest
from rich.progress import Progress

from lazarus.cli._bulk import ProgressBar
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


def test_progress_bar_follows_the_library_and_grows_past_the_count() -> None:
    # Given a bar for 10 counted matches
    progress = Progress()
    bar = ProgressBar(progress, 10)

    # When the library reports 5 handled, then 12 (more arrived than were counted)
    bar(5)
    first = progress.tasks[0].completed, progress.tasks[0].total
    bar(12)

    # Then the bar shows each report, and its total grows to what was handled
    assert first == (5, 10)
    assert (progress.tasks[0].completed, progress.tasks[0].total) == (12, 12)
