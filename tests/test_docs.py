"""The examples in README.md and docs/*.md are run, so that they stay true.

A fenced block that opens with ```python and whose first line is ``# run`` is runnable. The
runnable blocks of one page run in order, as one program, in a namespace of their own (a later
block may use what an earlier one defined), against the test session's Redis through
``LAZARUS_REDIS_URL``. They run in a thread so that each ``asyncio.run`` gets its own event
loop. Examples use the default ``lazarus`` prefix; the keys a page creates are deleted after
it. Other ```python blocks are fragments and are not run.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

import pytest
import redis

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```python[^\n]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
MARK = "# run"
PAGE_TIMEOUT = 100.0


def examples(page: Path) -> list[tuple[int, str]]:
    """``(line, source)`` of every runnable block on ``page``, in order."""
    text = page.read_text(encoding="utf-8")
    found = []
    for match in FENCE.finditer(text):
        source = match.group(1)
        if source.strip() and source.splitlines()[0].strip() == MARK:
            line = text.count("\n", 0, match.start()) + 2  # the block's first line
            found.append((line, source))
    return found


def run_page(name: str, blocks: list[tuple[int, str]]) -> None:
    """Execute ``blocks`` in order in one namespace, in a new thread; re-raise any error."""
    errors: list[BaseException] = []

    def target() -> None:
        namespace: dict[str, Any] = {"__name__": "__main__"}
        try:
            for line, source in blocks:
                # Padding keeps line numbers in tracebacks equal to the page's own.
                code = compile("\n" * (line - 1) + source, name, "exec")
                exec(code, namespace)
        except BaseException as exc:  # handed over to the test's thread
            errors.append(exc)

    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    thread.join(PAGE_TIMEOUT)
    assert not thread.is_alive(), f"the examples of {name} did not finish in {PAGE_TIMEOUT}s"
    if errors:
        raise errors[0]


def lazarus_keys(client: redis.Redis) -> set[str]:
    return set(client.scan_iter(match="lazarus:*", count=1000))


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "page", [p for p in PAGES if examples(p)], ids=lambda p: str(p.relative_to(ROOT))
)
def test_runnable_examples_of_a_page_run_without_error(
    page: Path, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the session's Redis as the default connection
    monkeypatch.setenv("LAZARUS_REDIS_URL", redis_url)
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    before = lazarus_keys(client)
    try:
        # When the page's examples run, Then they raise nothing (their asserts included)
        run_page(str(page.relative_to(ROOT)), examples(page))
    finally:
        created = lazarus_keys(client) - before
        if created:
            client.unlink(*created)
        client.close()


@pytest.mark.parametrize(
    ("page", "minimum"),
    [
        ("README.md", 1),
        ("docs/dead-letters.md", 8),
        ("docs/queues-and-jobs.md", 2),
        ("docs/workers.md", 1),
        ("docs/events.md", 1),
        ("docs/embedded-redis.md", 1),
    ],
)
def test_pages_keep_their_runnable_examples(page: str, minimum: int) -> None:
    assert len(examples(ROOT / page)) >= minimum
