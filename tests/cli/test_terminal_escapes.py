"""Text from jobs never reaches the terminal as a command: job names, errors, stack traces and
worker names with escape sequences are printed with those characters escaped."""

from __future__ import annotations

import asyncio
import json

from lazarus import Job, Queue

from .conftest import Invoke, MakeWorker

HOSTILE = "\x1b]0;pwned\x07\x1b[2J\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\\x9b31m"
RAW = ("\x1b", "\x07", "\x9b")


async def raise_hostile(job: Job) -> None:
    raise RuntimeError(f"boom {HOSTILE}")


async def test_list_show_and_json_print_control_characters_escaped(
    queue: Queue, make_worker: MakeWorker, invoke: Invoke
) -> None:
    # Given a dead letter whose name and error carry terminal escape sequences
    arrived: list[str] = []
    done = asyncio.Event()
    worker = make_worker(raise_hostile, dead_letter_queue="jobs-dlq")
    worker.on("deadLettered", lambda _job, dl_id: (arrived.append(dl_id), done.set()))
    await queue.add(f"name{HOSTILE}", {"text": HOSTILE})
    await asyncio.wait_for(done.wait(), 10)
    await worker.close()

    # When the operator lists it, shows it and reads it as JSON
    listed = await invoke("dlq", "list", "jobs-dlq")
    shown = await invoke("dlq", "show", "jobs-dlq", arrived[0])
    as_json = await invoke("dlq", "show", "jobs-dlq", arrived[0], "--json")

    # Then no raw control character reaches the terminal, and the escapes are visible
    for result in (listed, shown, as_json):
        assert result.exit_code == 0, result.output
        assert not any(c in result.stdout for c in RAW), repr(result.stdout)
    assert "\\x1b]0;pwned\\x07" in shown.stdout
    assert "\\x9b31m" in shown.stdout
    # and JSON still decodes to the exact text
    document = json.loads(as_json.stdout)
    assert document["deadLetter"]["failedReason"] == f"boom {HOSTILE}"
    assert document["payload"] == {"text": HOSTILE}
