"""``lazarus dlq replay`` and ``purge``: one by id, or all that match, with --dry-run,
confirmation and --yes."""

from __future__ import annotations

import pytest

from lazarus import DeadLetterFilter, Queue
from lazarus._connection import now_ms
from lazarus.cli import _options
from lazarus.cli._bulk import BulkPlan, tally_of

from ..conftest import wait_until
from .conftest import Invoke, MakeWorker, dead_letter, parsed


async def test_replay_of_one_dead_letter_puts_a_new_job_in_its_source_queue(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, invoke: Invoke
) -> None:
    # Given two dead letters
    first, second = await dead_letter(
        queue, make_worker, ("charge", {"n": 1}), ("charge", {"n": 2})
    )

    # When the operator replays the first
    result = await invoke("dlq", "replay", "jobs-dlq", first)

    # Then it left the DLQ and a job with its payload waits in the source queue
    assert result.exit_code == 0, result.output
    assert f"replayed {first} (charge) into 'jobs' as job" in result.stdout
    assert [j.id for j in await dlq.get_dead_letter_jobs()] == [second]
    [waiting] = await queue.get_waiting()
    assert waiting.original_data == {"n": 1} and waiting.id in result.stdout


async def test_replay_json_names_the_new_job(
    queue: Queue, make_worker: MakeWorker, invoke: Invoke
) -> None:
    [dead_id] = await dead_letter(queue, make_worker, ("charge", {"n": 1}))

    document = parsed(await invoke("dlq", "replay", "jobs-dlq", dead_id, "--json"))

    assert document["id"] == dead_id and document["sourceQueue"] == "jobs"
    assert await queue.get_job(document["newJobId"]) is not None


async def test_replay_all_with_a_filter_and_yes_replays_only_the_matches(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, invoke: Invoke
) -> None:
    # Given two timeouts and one other failure
    ids = await dead_letter(
        queue, make_worker,
        ("charge", {"n": 1, "error": "timeout"}), ("charge", {"n": 2}),
        ("charge", {"n": 3, "error": "timeout"}),
    )  # fmt: skip

    # When the operator replays every timeout, confirmed up front
    result = await invoke(
        "dlq", "replay", "jobs-dlq", "--all", "--error-type", "TimeoutError", "--yes",
        "--batch-size", "1",
    )  # fmt: skip

    # Then both timeouts are back in the source queue and the other is still dead
    assert result.exit_code == 0, result.output
    assert "2 dead letters match in 'jobs-dlq'" in result.stdout
    assert "replayed 2 dead letters into their source queues" in result.stdout
    assert sorted(j.original_data["n"] for j in await queue.get_waiting()) == [1, 3]
    assert [j.id for j in await dlq.get_dead_letter_jobs()] == [ids[1]]


async def test_replay_all_with_a_rate_replays_everything(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, invoke: Invoke
) -> None:
    await dead_letter(queue, make_worker, ("a", {}), ("b", {}), ("c", {}))

    document = parsed(await invoke("dlq", "replay", "jobs-dlq", "--all", "--rate", "1000",
                                   "--yes", "--json"))  # fmt: skip

    assert document["matched"] == 3 and document["replayed"] == 3
    assert await dlq.get_dead_letter_count() == 0
    assert len(await queue.get_waiting()) == 3


async def test_dry_run_shows_the_count_and_first_ids_and_changes_nothing(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, invoke: Invoke
) -> None:
    # Given three dead letters
    ids = await dead_letter(queue, make_worker, ("a", {}), ("b", {}), ("c", {}))

    # When the operator previews a replay and a purge of all of them
    replay = await invoke("dlq", "replay", "jobs-dlq", "--all", "--dry-run")
    purge = parsed(await invoke("dlq", "purge", "jobs-dlq", "--all", "--dry-run", "--json"))

    # Then both tell what they would touch, and nothing moved
    assert replay.exit_code == 0, replay.output
    assert "3 dead letters match" in replay.stdout and "nothing was changed" in replay.stdout
    assert all(i in replay.stdout for i in ids)
    assert {**purge, "asOf": 0} == {"queue": "jobs-dlq", "action": "purge", "dryRun": True,
                                    "matched": 3, "sample": ids[::-1], "purged": 0,
                                    "asOf": 0, "inAll": 0}  # fmt: skip
    assert purge["asOf"] <= now_ms()
    assert await dlq.get_dead_letter_count() == 3
    assert await queue.get_waiting() == []


async def test_bulk_action_without_yes_and_without_a_terminal_is_refused(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, invoke: Invoke
) -> None:
    # Given two dead letters
    await dead_letter(queue, make_worker, ("a", {}), ("b", {}))

    # When a script replays and purges them without --yes (the runner's stdin is no terminal)
    replay = await invoke("dlq", "replay", "jobs-dlq", "--all")
    purge = await invoke("dlq", "purge", "jobs-dlq", "--all", "--json")

    # Then both are refused with a message that says how to go ahead, and nothing changed
    for result, verb in ((replay, "replay"), (purge, "purge")):
        assert result.exit_code == 1
        assert f"refusing to {verb} 2 dead letters in 'jobs-dlq' without confirmation" in (
            result.output
        )
        assert "--yes" in result.output and "Traceback" not in result.output
    assert await dlq.get_dead_letter_count() == 2


async def test_purge_of_one_dead_letter_deletes_only_it(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, invoke: Invoke
) -> None:
    first, second = await dead_letter(queue, make_worker, ("a", {}), ("b", {}))

    result = await invoke("dlq", "purge", "jobs-dlq", first)

    assert result.exit_code == 0, result.output
    assert f"purged {first} (a) from 'jobs-dlq'" in result.stdout
    assert [j.id for j in await dlq.get_dead_letter_jobs()] == [second]
    assert await dlq.get_job(first) is None


async def test_purge_all_with_a_filter_and_yes_deletes_the_matches(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, invoke: Invoke
) -> None:
    # Given dead letters of two names
    ids = await dead_letter(queue, make_worker, ("legacy", {}), ("charge", {}), ("legacy", {}))

    # When the operator purges every "legacy" one
    result = await invoke("dlq", "purge", "jobs-dlq", "--all", "--name", "legacy", "--yes")

    # Then only the charge is left and nothing was replayed
    assert result.exit_code == 0, result.output
    assert "purged 2 dead letters" in result.stdout
    assert [j.id for j in await dlq.get_dead_letter_jobs()] == [ids[1]]
    assert await queue.get_waiting() == []


async def test_replay_all_as_of_an_earlier_run_leaves_what_arrived_after_it(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, invoke: Invoke
) -> None:
    # Given a run that began (and stopped) after two dead letters, and one that came later
    await dead_letter(queue, make_worker, ("a", {}), ("b", {}))
    began = now_ms()
    await wait_until(lambda: _after(began), message="the clock to move on")
    (late,) = await dead_letter(queue, make_worker, ("c", {}))

    # When the operator resumes it with the moment it printed
    document = parsed(await invoke("dlq", "replay", "jobs-dlq", "--all", "--as-of", str(began),
                                   "--yes", "--json"))  # fmt: skip
    shown = await invoke("dlq", "purge", "jobs-dlq", "--all", "--dry-run")

    # Then the two replay, the later one stays; a new run prints the moment to resume it with
    assert (document["matched"], document["replayed"], document["asOf"]) == (2, 2, began)
    assert sorted(j.name for j in await queue.get_waiting()) == ["a", "b"]
    assert [j.id for j in await dlq.get_dead_letter_jobs()] == [late]
    assert "1 dead letter matches in 'jobs-dlq', as of " in shown.stdout
    resumed = await invoke("dlq", "replay", "jobs-dlq", "--all", "--yes")
    assert "the same command with --as-of " in resumed.stdout


async def test_a_resumed_run_counts_in_all_what_the_run_it_resumes_did(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, invoke: Invoke
) -> None:
    # Given a replay of every dead letter whose process was killed after it replayed two of
    # three, before it said so: the command's run, as of `began`, cut short
    await dead_letter(queue, make_worker, ("a", {}), ("a", {}), ("b", {}))
    began = now_ms()
    flt = DeadLetterFilter()
    plan = BulkPlan("replay", "jobs-dlq", flt, dry_run=False, yes=True, batch_size=500,
                    rate=None, as_json=True)  # fmt: skip
    first = await dlq.replay_all_dead_letters(
        DeadLetterFilter(name="a"), as_of=began, tally=tally_of(plan, began)
    )

    # When the operator runs the same command again with its moment
    resumed = await invoke("dlq", "replay", "jobs-dlq", "--all", "--as-of", str(began), "--yes")
    document = parsed(await invoke("dlq", "replay", "jobs-dlq", "--all", "--as-of", str(began),
                                   "--yes", "--json"))  # fmt: skip

    # Then it replays the third, and says that three were replayed in all
    assert first == 2
    assert resumed.exit_code == 0, resumed.output
    assert "replayed 1 dead letter into their source queues (3 in all" in resumed.stdout
    assert (document["replayed"], document["inAll"]) == (0, 3)
    assert sorted(j.name for j in await queue.get_waiting()) == ["a", "a", "b"]


async def _after(moment: int) -> bool:
    return now_ms() > moment


async def test_as_of_resumes_a_bulk_run_only(invoke: Invoke) -> None:
    result = await invoke("dlq", "replay", "jobs-dlq", "abc", "--as-of", "1")

    assert result.exit_code == 2
    assert "--as-of resumes a run of --all; with an ID give none" in result.output


async def test_replay_needs_exactly_one_of_id_and_all(invoke: Invoke) -> None:
    neither = await invoke("dlq", "replay", "jobs-dlq")
    both = await invoke("dlq", "replay", "jobs-dlq", "abc", "--all")
    id_with_filter = await invoke("dlq", "purge", "jobs-dlq", "abc", "--name", "x")

    assert neither.exit_code == both.exit_code == id_with_filter.exit_code == 2
    assert "give either a dead letter ID or --all" in neither.output
    assert "give either a dead letter ID or --all" in both.output
    assert "with an ID give none" in id_with_filter.output


async def test_at_a_terminal_the_operator_is_asked_and_no_keeps_everything(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, invoke: Invoke,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    # Given two dead letters and an operator at a terminal
    await dead_letter(queue, make_worker, ("a", {}), ("b", {}))
    monkeypatch.setattr(_options, "stdin_is_interactive", lambda: True)

    # When they answer no to a purge, then yes to a replay
    declined = await invoke("dlq", "purge", "jobs-dlq", "--all", input="n\n")
    accepted = await invoke("dlq", "replay", "jobs-dlq", "--all", input="y\n")

    # Then the purge did nothing and the replay replayed both
    assert declined.exit_code == 1
    assert "Purge 2 dead letters in 'jobs-dlq'? [y/N]" in declined.output
    assert "Aborted" in declined.output
    assert accepted.exit_code == 0, accepted.output
    assert "replayed 2 dead letters" in accepted.output
    assert await dlq.get_dead_letter_count() == 0
    assert len(await queue.get_waiting()) == 2
