"""Stack traces recorded for failed attempts."""

from __future__ import annotations

from lazarus._failure import format_stack


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
