"""``lazarus dlq list``, ``show`` and ``stats``."""

from __future__ import annotations

from lazarus import Queue

from .conftest import Invoke, MakeWorker, dead_letter, parsed


async def test_list_shows_dead_letters_newest_first_in_a_table(
    queue: Queue, make_worker: MakeWorker, invoke: Invoke
) -> None:
    # Given three dead letters
    ids = await dead_letter(
        queue, make_worker, ("charge", {"n": 1}), ("refund", {"n": 2}), ("charge", {"n": 3})
    )

    # When the operator lists them
    result = await invoke("dlq", "list", "jobs-dlq")

    # Then the table has one row per dead letter, newest first, and a count
    assert result.exit_code == 0, result.output
    rows = [line for line in result.stdout.splitlines() if any(i in line for i in ids)]
    assert [next(i for i in ids if i in row) for row in rows] == ids[::-1]
    assert "ValueError" in rows[0] and "jobs" in rows[0] and "attempts_exhausted" in rows[0]
    assert "3 matching dead letters in 'jobs-dlq'; showing 1-3" in result.stdout


async def test_list_json_applies_every_filter_and_paginates(
    queue: Queue, make_worker: MakeWorker, invoke: Invoke
) -> None:
    # Given dead letters of two names and two error types
    ids = await dead_letter(
        queue, make_worker,
        ("charge", {"n": 1, "error": "timeout"}), ("charge", {"n": 2}),
        ("refund", {"n": 3, "error": "timeout"}), ("charge", {"n": 4, "error": "timeout"}),
    )  # fmt: skip

    # When the operator filters by name and error type
    timeouts = parsed(await invoke(
        "dlq", "list", "jobs-dlq", "--name", "charge", "--error-type", "TimeoutError", "--json"
    ))  # fmt: skip
    # ... by the other filters
    by_text = parsed(await invoke("dlq", "list", "jobs-dlq", "--contains", '"n":2', "--json"))
    by_reason = parsed(await invoke(
        "dlq", "list", "jobs-dlq", "--name-prefix", "ref", "--failed-reason", "TIMED OUT",
        "--source-queue", "jobs", "--reason", "attempts_exhausted", "--since", "1h", "--json",
    ))  # fmt: skip
    in_future = parsed(await invoke("dlq", "list", "jobs-dlq", "--since", "2999-01-01", "--json"))
    page = parsed(await invoke("dlq", "list", "jobs-dlq", "--limit", "2", "--offset", "1",
                               "--json"))  # fmt: skip

    # Then each answer holds exactly the matches, newest first, with their fields
    assert [d["id"] for d in timeouts["deadLetters"]] == [ids[3], ids[0]]
    assert timeouts["total"] == 2
    first = timeouts["deadLetters"][0]
    assert first["name"] == "charge" and first["sourceQueue"] == "jobs"
    assert first["errorType"] == "TimeoutError" and first["reason"] == "attempts_exhausted"
    assert first["failedReason"] == "upstream timed out for charge"
    assert first["attemptsMade"] == 1 and first["deadLetteredAt"].endswith("Z")
    assert [d["id"] for d in by_text["deadLetters"]] == [ids[1]]
    assert [d["id"] for d in by_reason["deadLetters"]] == [ids[2]]
    assert in_future["total"] == 0 and in_future["deadLetters"] == []
    assert [d["id"] for d in page["deadLetters"]] == [ids[2], ids[1]]
    assert page["total"] == 4


async def test_show_prints_payload_metadata_attempts_and_stack_traces(
    queue: Queue, make_worker: MakeWorker, invoke: Invoke
) -> None:
    # Given a dead letter that failed twice
    [dead_id] = await dead_letter(queue, make_worker, ("charge", {"customer": "c_42"}), attempts=2)

    # When the operator shows it
    result = await invoke("dlq", "show", "jobs-dlq", dead_id)

    # Then the page has the metadata, the payload, both attempts and both stack traces
    assert result.exit_code == 0, result.output
    out = result.stdout
    for expected in (dead_id, "charge", "attempts_exhausted", "ValueError",
                     '"customer": "c_42"', "attempts (2)", "stack trace 1 of 2",
                     "stack trace 2 of 2", "Traceback (most recent call last)"):  # fmt: skip
        assert expected in out, expected
    assert "bad input: {'customer': 'c_42'}" in out


async def test_show_json_has_payload_and_every_dlq_meta_field_with_iso_times(
    queue: Queue, make_worker: MakeWorker, invoke: Invoke
) -> None:
    # Given a dead letter that failed twice
    [dead_id] = await dead_letter(queue, make_worker, ("charge", {"amount": 5}), attempts=2)

    # When the operator asks for its JSON
    document = parsed(await invoke("dlq", "show", "jobs-dlq", dead_id, "--json"))

    # Then it is the payload as sent plus the metadata, times as ISO 8601
    assert document["id"] == dead_id and document["payload"] == {"amount": 5}
    meta = document["deadLetter"]
    assert meta["sourceQueue"] == "jobs" and meta["attemptsMade"] == 2
    assert meta["deadLetteredAt"].endswith("Z") and meta["originalTimestamp"].endswith("Z")
    assert [a["attempt"] for a in meta["attempts"]] == [1, 2]
    assert all(a["startedAt"].endswith("Z") for a in meta["attempts"])
    assert len(meta["stacktrace"]) == 2 and "ValueError" in meta["stacktrace"][0]
    assert meta["originalOpts"]["attempts"] == 2


async def test_stats_counts_by_name_error_type_source_and_reason(
    queue: Queue, make_worker: MakeWorker, invoke: Invoke
) -> None:
    # Given three dead letters
    await dead_letter(
        queue, make_worker,
        ("charge", {"error": "timeout"}), ("charge", {}), ("refund", {"error": "timeout"}),
    )  # fmt: skip

    # When the operator asks for stats, as JSON, filtered, and as a table
    everything = parsed(await invoke("dlq", "stats", "jobs-dlq", "--json"))
    charges = parsed(await invoke("dlq", "stats", "jobs-dlq", "--name", "charge", "--json"))
    table = await invoke("dlq", "stats", "jobs-dlq")

    # Then the totals add up
    assert everything["total"] == 3
    assert everything["byName"] == {"charge": 2, "refund": 1}
    assert everything["byErrorType"] == {"TimeoutError": 2, "ValueError": 1}
    assert everything["bySourceQueue"] == {"jobs": 3}
    assert everything["byReason"] == {"attempts_exhausted": 3}
    assert everything["oldest"] <= everything["newest"]
    assert charges["total"] == 2 and charges["byName"] == {"charge": 2}
    assert table.exit_code == 0 and "3 dead letters in jobs-dlq" in table.stdout
    assert "TimeoutError" in table.stdout
