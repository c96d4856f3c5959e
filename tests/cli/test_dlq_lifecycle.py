"""``lazarus dlq flag | reopen | archive | set-status | settle``, ``replay --data /
--to-queue``, the timeline in ``dlq show`` and ``--status`` on lists."""

from __future__ import annotations

from lazarus import DeadLetterFilter, Queue

from .conftest import Invoke, MakeWorker, dead_letter, parsed


async def test_flag_archive_and_reopen_record_the_operator_and_note(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, invoke: Invoke
) -> None:
    [dl_id] = await dead_letter(queue, make_worker, ("charge", {"n": 1}))

    flagged = parsed(await invoke("dlq", "flag", "jobs-dlq", dl_id, "--operator", "ada",
                                  "--note", "odd", "--json"))  # fmt: skip
    result = await invoke("dlq", "archive", "jobs-dlq", dl_id, "--operator", "ada",
                          "--note", "refunded")  # fmt: skip
    again = await invoke("dlq", "archive", "jobs-dlq", dl_id, "--operator", "ada")

    assert flagged["status"] == "manual"
    assert result.exit_code == 0 and "archived" in result.stdout
    assert again.exit_code != 0 and "archived" in again.output
    listed = parsed(await invoke("dlq", "list", "jobs-dlq", "--status", "archived", "--json"))
    assert [row["id"] for row in listed["deadLetters"]] == [dl_id]
    shown = parsed(await invoke("dlq", "show", "jobs-dlq", dl_id, "--json"))
    assert [(c["to"], c["actor"], c["note"]) for c in shown["deadLetter"]["timeline"]] == [
        ("manual", "operator:ada", "odd"), ("archived", "operator:ada", "refunded"),
    ]  # fmt: skip
    text = await invoke("dlq", "show", "jobs-dlq", dl_id)
    assert "timeline (2)" in text.stdout and "refunded" in text.stdout

    reopened = parsed(await invoke("dlq", "reopen", "jobs-dlq", dl_id, "--json"))
    assert reopened["status"] == "pending"


async def test_an_operator_name_with_a_space_is_a_usage_error_naming_the_option(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, invoke: Invoke
) -> None:
    # Given a dead letter
    [dl_id] = await dead_letter(queue, make_worker, ("charge", {"n": 1}))

    # When the operator flags or replays it as "bob smith"
    for verb in ("flag", "replay"):
        result = await invoke("dlq", verb, "jobs-dlq", dl_id, "--operator", "bob smith")

        # Then the error names --operator (not the library's actor), and nothing changed
        assert result.exit_code == 2, result.output
        assert "Invalid value for '--operator': 'bob smith' must be a name" in result.output
        assert "actor" not in result.output
    assert await dlq.count_dead_letters(DeadLetterFilter(status="pending")) == 1
    assert await queue.get_waiting_count() == 0


async def test_an_empty_note_is_a_usage_error_naming_the_option(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, invoke: Invoke
) -> None:
    # Given a dead letter
    [dl_id] = await dead_letter(queue, make_worker, ("charge", {"n": 1}))

    # When the operator flags it with an empty note
    result = await invoke("dlq", "flag", "jobs-dlq", dl_id, "--note", "")

    # Then the error names --note, and nothing changed
    assert result.exit_code == 2, result.output
    assert "Invalid value for '--note': must be non-empty text" in result.output
    assert await dlq.count_dead_letters(DeadLetterFilter(status="pending")) == 1


async def test_set_status_with_expect_refuses_when_the_status_differs(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, invoke: Invoke
) -> None:
    [dl_id] = await dead_letter(queue, make_worker, ("charge", {"n": 1}))

    refused = await invoke("dlq", "set-status", "jobs-dlq", dl_id, "failed", "--expect", "manual")
    done = await invoke("dlq", "set-status", "jobs-dlq", dl_id, "failed", "--expect", "pending")

    assert refused.exit_code != 0 and "nothing changed" in refused.output
    assert done.exit_code == 0, done.output
    assert await dlq.count_dead_letters(DeadLetterFilter(status="failed")) == 1


async def test_replay_with_changed_payload_into_another_queue(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, invoke: Invoke, redis_url: str,
    prefix: str,
) -> None:  # fmt: skip
    [dl_id] = await dead_letter(queue, make_worker, ("charge", {"n": 1}))

    bad = await invoke("dlq", "replay", "jobs-dlq", dl_id, "--data", "{nope")
    report = parsed(await invoke("dlq", "replay", "jobs-dlq", dl_id, "--data", '{"n": 2}',
                                 "--to-queue", "review", "--note", "fixed", "--json"))  # fmt: skip

    assert bad.exit_code == 2 and "--data" in bad.output
    assert report["targetQueue"] == "review"
    async with Queue("review", connection=redis_url, prefix=prefix) as review:
        job = await review.get_job(report["newJobId"])
    assert job is not None and job.data == {"n": 2}
    letter = await dlq.peek_dead_letter(dl_id)
    assert letter is not None and letter.dead_letter is not None
    assert letter.dead_letter.timeline[-1].details["replacedData"] == '{"n":1}'
    assert letter.dead_letter.timeline[-1].note == "fixed"


async def test_settle_brings_back_a_dead_letter_whose_replay_was_cleaned(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, invoke: Invoke
) -> None:
    [dl_id] = await dead_letter(queue, make_worker, ("charge", {"n": 1}))
    await dlq.replay_dead_letter(dl_id)
    assert len(await queue.clean(0, state="waiting")) == 1  # the replayed job is gone

    assert parsed(await invoke("dlq", "settle", "jobs-dlq", "--json"))["settled"] == 1
    assert await dlq.get_dead_letter_count() == 1
