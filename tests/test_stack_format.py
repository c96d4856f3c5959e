"""Stack traces recorded for failed attempts."""

from __future__ import annotations

import json
import traceback

import pytest

from lazarus._failure import exception_line, failed_attempt, format_stack


def test_stack_lists_frames_and_the_cause_first() -> None:
    try:
        try:
            {}["missing"]
        except KeyError as inner:
            raise ValueError("outer failure") from inner
    except ValueError as exc:
        text = format_stack(exc, max_message_bytes=4096, max_bytes=16384)

    assert text.startswith("Traceback (most recent call last):")
    assert text.index("KeyError: 'missing'") < text.index("ValueError: outer failure")
    assert "in test_stack_lists_frames_and_the_cause_first" in text
    assert 'raise ValueError("outer failure") from inner' in text


class _Outer:
    class NestedError(Exception):
        pass


class _UnprintableError(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text")


class _NowhereError(Exception):
    pass


_NowhereError.__module__ = None  # type: ignore[assignment]


def _with_note() -> BaseException:
    error = ValueError("noted")
    if hasattr(error, "add_note"):  # Python 3.11+
        error.add_note("a note the processor added")
    return error


@pytest.mark.parametrize(
    "error",
    [
        ValueError("plain"),
        ValueError(""),
        ValueError(),
        KeyError("missing"),
        OSError(2, "No such file", "/tmp/x"),
        _Outer.NestedError("nested class"),
        _UnprintableError(),
        _NowhereError("module of None"),
        SyntaxError("bad", ("job.py", 3, 5, "x = = 1\n")),
        _with_note(),
        ValueError("é ✓ \ud800 surrogate"),
        type("MainError", (Exception,), {"__module__": "__main__"})("from main"),
    ],
    ids=repr,
)
def test_an_exceptions_line_is_what_traceback_prints(error: BaseException) -> None:
    expected = "".join(traceback.format_exception_only(type(error), error))
    assert exception_line(error) == expected


@pytest.mark.parametrize(
    "error", ["plain", "", 'quotes " and \\ backslash', "é ✓ 日本", "\ud800 lone", "tab\tnew\nline"]
)
def test_a_failed_attempts_record_is_the_json_of_its_fields(error: str) -> None:
    record = {
        "attempt": 3, "startedAt": 1_700_000_000_123, "finishedAt": 1_700_000_000_456,
        "worker": "host:1234:ab12", "outcome": "failed", "error": error, "errorType": "KeyError",
    }  # fmt: skip
    made = failed_attempt(3, 1_700_000_000_123, 1_700_000_000_456, "host:1234:ab12", error,
                          "KeyError")  # fmt: skip
    assert made == json.dumps(record)
    assert json.loads(made) == record
