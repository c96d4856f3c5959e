"""Error text recorded per attempt is capped: huge messages and deep stacks stay small."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from lazarus import Job, Queue, Worker
from lazarus._failure import cap_middle, cap_text

from .faults import on_count

MakeWorker = Callable[..., Worker]

HUGE = 5 * 1024 * 1024


def _size(text: str) -> int:
    return len(text.encode())


async def test_a_five_megabyte_message_over_three_attempts_makes_a_small_dead_letter(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    # Given a processor whose exception carries 5 MB of text, deep in a call stack
    def deep(depth: int) -> None:
        if depth == 0:
            raise ValueError("x" * HUGE)
        deep(depth - 1)

    async def fail(job: Job) -> None:
        deep(500)

    await queue.add("n", None, attempts=3)
    worker = make_worker(fail, dead_letter_queue="jobs-dlq")

    # When all three attempts fail
    await asyncio.wait_for(on_count(worker, "deadLettered", 1).wait(), 30)

    # Then every recorded text is within the default caps, and says what was cut
    [letter] = await dlq.get_dead_letter_jobs()
    meta = letter.dead_letter
    assert meta is not None
    assert _size(meta.failed_reason) <= 4096
    assert meta.failed_reason.startswith("xxx")
    assert f"of {HUGE} bytes cut]" in meta.failed_reason
    assert len(meta.stacktrace) == 3 and len(meta.attempts) == 3
    for stack, attempt in zip(meta.stacktrace, meta.attempts):
        assert _size(stack) <= 16 * 1024
        assert _size(attempt.error) <= 4096
        assert "bytes cut ...]" in stack  # the middle of the frames
        # the first frames (where it started) and the last (where it was raised) are kept
        assert "in fail\n" in stack and "deep(500)" in stack
        assert 'raise ValueError("x" * HUGE)' in stack
        assert stack.rstrip().endswith("bytes cut]")  # the message inside the stack, too


async def test_caps_are_configurable_and_cut_between_utf8_characters(
    queue: Queue, make_worker: MakeWorker
) -> None:
    async def fail(job: Job) -> None:
        raise RuntimeError("é€😀" * 10_000)

    job = await queue.add("n", None)
    worker = make_worker(fail, max_error_bytes=300, max_stack_bytes=700)
    await asyncio.wait_for(on_count(worker, "failed", 1).wait(), 10)

    stored = await queue.get_job(job.id)
    assert stored is not None and stored.failed_reason is not None
    assert _size(stored.failed_reason) <= 300
    assert _size(stored.stacktrace[0]) <= 700
    assert "\ufffd" not in stored.failed_reason + stored.stacktrace[0]
    assert stored.failed_reason.startswith("é€😀é€😀")


def test_cut_text_keeps_whole_characters_and_says_how_much_went() -> None:
    text = "€" * 1000  # 3000 bytes

    capped = cap_text(text, 256)

    assert _size(capped) <= 256
    kept = capped.split(" [...")[0]
    assert set(kept) == {"€"}
    assert f"[... {3000 - _size(kept)} of 3000 bytes cut]" in capped


def test_cut_stack_keeps_the_first_and_last_lines() -> None:
    lines = [f"line {i}\n" for i in range(1000)]

    capped = cap_middle("".join(lines), 400)

    assert _size(capped) <= 400
    assert capped.startswith("line 0\nline 1\n")
    assert capped.endswith("line 998\nline 999\n")
    assert "bytes cut ...]\n" in capped


def test_short_text_is_left_alone() -> None:
    assert cap_text("boom", 256) == "boom"
    assert cap_middle("a\nb\n", 256) == "a\nb\n"


@pytest.mark.parametrize("field", ["max_error_bytes", "max_stack_bytes"])
@pytest.mark.parametrize("value", [0, 255, "4096"])
def test_worker_rejects_caps_too_small_to_hold_the_marker(
    redis_url: str, field: str, value: object
) -> None:
    with pytest.raises(ValueError, match=field):
        Worker("jobs", lambda j: None, connection=redis_url, autorun=False, **{field: value})
