"""``lazarus queues``."""

from __future__ import annotations

from lazarus import Queue

from .conftest import Invoke, MakeWorker, dead_letter, parsed


async def test_queues_table_shows_counts_and_dead_letter_depth_with_age(
    queue: Queue, make_worker: MakeWorker, invoke: Invoke
) -> None:
    # Given two dead letters and one waiting job
    await dead_letter(queue, make_worker, ("charge", {"n": 1}), ("charge", {"n": 2}))
    await queue.add("later", {"n": 3})

    # When the operator lists the queues
    result = await invoke("queues")

    # Then both queues are rows, the DLQ with its depth and the age of its oldest dead letter
    assert result.exit_code == 0, result.output
    rows = {line.split()[0]: line.split() for line in result.stdout.splitlines() if line.strip()}
    assert rows["jobs"][1:6] == ["1", "0", "0", "0", "0"]
    assert rows["jobs-dlq"][1] == "2"  # waiting: the dead letters themselves
    assert rows["jobs-dlq"][6] == "2"  # dead letters
    assert rows["jobs-dlq"][7].endswith("s")  # "0s" or "1s": an age, not a timestamp


async def test_queues_json_is_one_document_with_every_queue(
    queue: Queue, make_worker: MakeWorker, invoke: Invoke
) -> None:
    # Given one dead letter
    await dead_letter(queue, make_worker, ("charge", {"n": 1}))

    # When the operator asks for JSON
    document = parsed(await invoke("queues", "--json"))

    # Then each queue is an object with its counts and dead-letter fields
    by_name = {q["name"]: q for q in document["queues"]}
    assert set(by_name) == {"jobs", "jobs-dlq"}
    assert by_name["jobs"]["isDeadLetterQueue"] is False
    assert by_name["jobs"]["paused"] is False
    assert by_name["jobs-dlq"]["isDeadLetterQueue"] is True
    assert by_name["jobs-dlq"]["deadLetters"] == 1
    assert by_name["jobs-dlq"]["oldestDeadLetterAt"].endswith("Z")
    assert by_name["jobs-dlq"]["oldestDeadLetterAgeSeconds"] >= 0


async def test_queues_reports_when_there_are_none(invoke: Invoke) -> None:
    result = await invoke("queues")
    assert result.exit_code == 0
    assert "no queues under prefix" in result.stdout


async def test_a_dead_letter_queue_is_listed_once_a_worker_dead_letters_into_it(
    queue: Queue, make_worker: MakeWorker, invoke: Invoke
) -> None:
    # Given a DLQ that only a worker has written to (nobody made a Queue of it)
    await dead_letter(queue, make_worker, ("charge", {"n": 1}))

    # When the operator lists the queues, Then the DLQ is there
    document = parsed(await invoke("queues", "--json"))
    assert "jobs-dlq" in {q["name"] for q in document["queues"]}
