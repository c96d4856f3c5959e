"""``lazarus dlq list`` by cursor, across every dead letter queue, with and without a total;
``--status``; ``dlq find-original``; and the bulk commands handing rate and progress to the
library."""

from __future__ import annotations

from typing import Any

import pytest

from lazarus import Job, Queue
from lazarus.cli import _bulk

from ..conftest import wait_until
from .conftest import Invoke, MakeWorker, dead_letter, fail, parsed


async def dead_letter_elsewhere(make_worker: MakeWorker, source: Queue, *names: str) -> list[Job]:
    """Dead-letter one job per name from ``source`` into "other-dlq"; its dead letters."""
    worker = make_worker(fail, source.name, dead_letter_queue="other-dlq")
    for name in names:
        await source.add(name, {}, attempts=1)
    other = Queue("other-dlq", connection=source.client, prefix=source.prefix)

    async def arrived() -> bool:
        return await other.get_dead_letter_count() == len(names)

    await wait_until(arrived, message="dead letters in other-dlq")
    await worker.close()
    return await other.get_dead_letter_jobs()


async def test_list_pages_by_cursor_until_there_is_no_next_cursor(
    queue: Queue, make_worker: MakeWorker, invoke: Invoke
) -> None:
    # Given five dead letters
    ids = await dead_letter(queue, make_worker, *[(f"job-{i}", {"i": i}) for i in range(5)])

    # When the operator lists two at a time, passing back each next cursor
    pages: list[dict[str, Any]] = [parsed(await invoke("dlq", "list", "jobs-dlq", "--limit", "2",
                                                       "--json"))]  # fmt: skip
    while pages[-1]["nextCursor"] is not None:
        cursor = pages[-1]["nextCursor"]
        pages.append(parsed(await invoke("dlq", "list", "jobs-dlq", "--limit", "2",
                                         "--cursor", cursor, "--json")))  # fmt: skip

    # Then the pages hold every dead letter once, newest first, each with the exact total
    assert [[d["id"] for d in p["deadLetters"]] for p in pages] == [
        ids[4:2:-1], ids[2:0:-1], ids[:1]
    ]  # fmt: skip
    assert all(p["total"] == 5 for p in pages)
    assert pages[1]["cursor"] == pages[0]["nextCursor"]


async def test_list_prints_the_next_cursor_and_takes_it_back(
    queue: Queue, make_worker: MakeWorker, invoke: Invoke
) -> None:
    # Given three dead letters
    ids = await dead_letter(queue, make_worker, ("a", {}), ("b", {}), ("c", {}))

    # When the first page of two is printed as a table, and the printed cursor is passed back
    first = await invoke("dlq", "list", "jobs-dlq", "--limit", "2")
    assert first.exit_code == 0, first.output
    [line] = [x for x in first.stdout.splitlines() if x.startswith("next page: --cursor ")]
    second = await invoke("dlq", "list", "jobs-dlq", "--limit", "2",
                          "--cursor", line.removeprefix("next page: --cursor "))  # fmt: skip

    # Then the second page holds the oldest dead letter only, and says there is no more
    assert "3 matching dead letters in 'jobs-dlq'; showing 1-2" in first.stdout
    assert second.exit_code == 0, second.output
    assert ids[0] in second.stdout and ids[1] not in second.stdout
    assert "showing 1 more" in second.stdout and "next page" not in second.stdout


async def test_list_oldest_first_starts_at_the_other_end(
    queue: Queue, make_worker: MakeWorker, invoke: Invoke
) -> None:
    ids = await dead_letter(queue, make_worker, ("a", {}), ("b", {}), ("c", {}))

    first = parsed(await invoke("dlq", "list", "jobs-dlq", "--order", "oldest", "--limit", "2",
                                "--json"))  # fmt: skip
    rest = parsed(await invoke("dlq", "list", "jobs-dlq", "--order", "oldest", "--limit", "2",
                               "--cursor", first["nextCursor"], "--json"))  # fmt: skip

    assert [d["id"] for d in first["deadLetters"]] == ids[:2]
    assert [d["id"] for d in rest["deadLetters"]] == ids[2:]


async def test_a_cursor_that_is_not_one_or_is_for_the_other_order_is_a_usage_error(
    queue: Queue, make_worker: MakeWorker, invoke: Invoke
) -> None:
    await dead_letter(queue, make_worker, ("a", {}), ("b", {}))
    newest = parsed(await invoke("dlq", "list", "jobs-dlq", "--limit", "1", "--json"))

    garbage = await invoke("dlq", "list", "jobs-dlq", "--cursor", "not-a-cursor")
    other_order = await invoke("dlq", "list", "jobs-dlq", "--order", "oldest",
                               "--cursor", newest["nextCursor"])  # fmt: skip
    with_offset = await invoke("dlq", "list", "jobs-dlq", "--offset", "1",
                               "--cursor", newest["nextCursor"])  # fmt: skip

    for result in (garbage, other_order):
        assert result.exit_code == 2, result.output
        assert "Invalid value for '--cursor'" in result.output
        assert "Traceback" not in result.output
    assert with_offset.exit_code == 2 and "--cursor or --offset, not both" in with_offset.output


async def test_a_text_filter_lists_without_a_total_unless_count_is_asked(
    queue: Queue, make_worker: MakeWorker, invoke: Invoke
) -> None:
    # Given three dead letters, two of whose payloads hold "vip"
    await dead_letter(queue, make_worker, ("a", {"tier": "vip"}), ("b", {}), ("c", {"tier": "vip"}))

    # When they are listed by payload text, then the same with --count
    plain = parsed(await invoke("dlq", "list", "jobs-dlq", "--contains", "vip", "--json"))
    counted = parsed(await invoke("dlq", "list", "jobs-dlq", "--contains", "vip", "--count",
                                  "--json"))  # fmt: skip
    table = await invoke("dlq", "list", "jobs-dlq", "--contains", "vip")

    # Then the page is there without a total, and --count counts the matches
    assert len(plain["deadLetters"]) == 2 and plain["total"] is None
    assert counted["total"] == 2
    assert "the total is not counted, as that needs a scan (add --count)" in table.stdout


async def test_all_queues_lists_the_dead_letters_of_every_dead_letter_queue(
    queue: Queue, make_worker: MakeWorker, invoke: Invoke, redis_url: str, prefix: str
) -> None:
    # Given a dead letter in jobs-dlq and two in other-dlq
    async with Queue("other", connection=redis_url, prefix=prefix) as other:
        await dead_letter(queue, make_worker, ("mine", {}))
        await dead_letter_elsewhere(make_worker, other, "theirs-1", "theirs-2")

    # When every dead letter queue is listed, one at a time, and as a table
    first = parsed(await invoke("dlq", "list", "--all-queues", "--limit", "1", "--json"))
    rest = parsed(await invoke("dlq", "list", "--all-queues", "--cursor", first["nextCursor"],
                               "--json"))  # fmt: skip
    table = await invoke("dlq", "list", "--all-queues")

    # Then the pages hold all three, newest first, each naming its dead letter queue
    rows = first["deadLetters"] + rest["deadLetters"]
    assert [(r["name"], r["queue"]) for r in rows] == [
        ("theirs-2", "other-dlq"), ("theirs-1", "other-dlq"), ("mine", "jobs-dlq")
    ]  # fmt: skip
    assert first["allQueues"] and first["queue"] is None and first["total"] == 3
    assert table.exit_code == 0, table.output
    assert "dead letter queue" in table.stdout and "other-dlq" in table.stdout
    assert "3 matching dead letters in every dead letter queue" in table.stdout


async def test_list_needs_a_queue_or_all_queues_and_offset_one_queue_newest_first(
    invoke: Invoke,
) -> None:
    neither = await invoke("dlq", "list")
    both = await invoke("dlq", "list", "jobs-dlq", "--all-queues")
    offset_everywhere = await invoke("dlq", "list", "--all-queues", "--offset", "5")
    offset_oldest = await invoke("dlq", "list", "jobs-dlq", "--offset", "5", "--order", "oldest")

    for result in (neither, both, offset_everywhere, offset_oldest):
        assert result.exit_code == 2, result.output
    assert "give either a QUEUE or --all-queues" in neither.output
    assert "give either a QUEUE or --all-queues" in both.output
    assert "--offset needs a QUEUE" in offset_everywhere.output
    assert "--offset pages newest first only" in offset_oldest.output


async def test_status_filters_and_stats_count_by_status(
    queue: Queue, make_worker: MakeWorker, invoke: Invoke
) -> None:
    # Given two dead letters, both pending as every new dead letter is
    await dead_letter(queue, make_worker, ("a", {}), ("b", {}))

    # When they are listed and counted by status
    pending = parsed(await invoke("dlq", "list", "jobs-dlq", "--status", "pending", "--json"))
    resolved = parsed(await invoke("dlq", "list", "jobs-dlq", "--status", "resolved", "--json"))
    stats = parsed(await invoke("dlq", "stats", "jobs-dlq", "--json"))
    table = await invoke("dlq", "stats", "jobs-dlq")
    bad = await invoke("dlq", "list", "jobs-dlq", "--status", "lost")

    # Then the filter selects by status, and the stats group by it
    assert (
        pending["total"] == 2 and [d["status"] for d in pending["deadLetters"]] == ["pending"] * 2
    )
    assert resolved["total"] == 0 and resolved["deadLetters"] == []
    assert stats["byStatus"] == {"pending": 2}
    assert "status" in table.stdout and "pending" in table.stdout
    assert bad.exit_code == 2 and "Invalid value for '--status'" in bad.output


async def test_find_original_finds_the_dead_letter_of_a_job_in_any_dead_letter_queue(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, invoke: Invoke, redis_url: str, prefix: str
) -> None:
    # Given a dead letter in jobs-dlq and one in other-dlq
    [mine] = await dead_letter(queue, make_worker, ("mine", {"n": 1}))
    async with Queue("other", connection=redis_url, prefix=prefix) as other:
        [theirs] = await dead_letter_elsewhere(make_worker, other, "theirs")
    meta = (await dlq.peek_dead_letter(mine)).dead_letter  # type: ignore[union-attr]
    assert meta is not None and theirs.dead_letter is not None

    # When the operator asks where each original job went
    found = parsed(await invoke("dlq", "find-original", meta.original_job_id, "--json"))
    elsewhere = parsed(await invoke("dlq", "find-original", theirs.dead_letter.original_job_id,
                                    "--json"))  # fmt: skip
    shown = await invoke("dlq", "find-original", meta.original_job_id)
    narrowed = await invoke("dlq", "find-original", theirs.dead_letter.original_job_id,
                            "--queue", "jobs-dlq")  # fmt: skip
    unknown = await invoke("dlq", "find-original", "never-was")

    # Then each is found in its own dead letter queue, and a narrowed or unknown search says no
    assert (found["id"], found["queue"], found["payload"]) == (mine, "jobs-dlq", {"n": 1})
    assert (elsewhere["id"], elsewhere["queue"]) == (theirs.id, "other-dlq")
    assert shown.exit_code == 0 and mine in shown.stdout and "original job id" in shown.stdout
    assert narrowed.exit_code == 1
    assert f"no dead letter of job {theirs.dead_letter.original_job_id!r} in 'jobs-dlq'" in (
        narrowed.output
    )
    assert unknown.exit_code == 1 and "in any dead letter queue under prefix" in unknown.output


async def test_bulk_commands_hand_rate_and_progress_to_the_library(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, invoke: Invoke,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    # Given three dead letters, and the library's bulk methods watched (then called for real)
    await dead_letter(queue, make_worker, ("a", {}), ("b", {}), ("c", {}))
    calls: list[tuple[str, dict[str, Any]]] = []
    for method in ("replay_all_dead_letters", "purge_dead_letters"):
        real = getattr(Queue, method)

        async def watched(self: Queue, *args: Any, _real: Any = real, _name: str = method,
                          **kwargs: Any) -> Any:  # fmt: skip
            calls.append((_name, kwargs))
            return await _real(self, *args, **kwargs)

        monkeypatch.setattr(Queue, method, watched)

    # When the operator purges one name at a rate, and replays the rest with a progress bar
    purge = await invoke("dlq", "purge", "jobs-dlq", "--all", "--name", "a", "--rate", "500",
                         "--yes", "--json")  # fmt: skip
    replay = await invoke("dlq", "replay", "jobs-dlq", "--all", "--rate", "250", "--yes")

    # Then each call carried the rate, the replay a progress callback, and the work was done
    assert purge.exit_code == 0 and replay.exit_code == 0, replay.output
    assert [(name, kwargs["rate"]) for name, kwargs in calls] == [
        ("purge_dead_letters", 500.0), ("replay_all_dead_letters", 250.0)
    ]  # fmt: skip
    assert isinstance(calls[1][1]["on_progress"], _bulk.ProgressBar)
    assert await dlq.get_dead_letter_count() == 0
    assert sorted(j.name for j in await queue.get_waiting()) == ["b", "c"]
