"""A bulk replay or purge resumed with the ``as_of`` of a run that stopped half-way: it
touches what had arrived by then, and replays none of what was replayed since, even a dead
letter whose replay failed back into the store. A tally counts what a run and its resumptions
did, even what a process did after its last report."""

from __future__ import annotations

import datetime
from collections.abc import Callable

import pytest

from lazarus import DeadLetterFilter, Queue, Worker
from lazarus._connection import now_ms

from .conftest import wait_until
from .test_dead_letter_bulk import dead_letter, dlq_labels, labels, named

MakeWorker = Callable[..., Worker]


async def statuses(dlq: Queue) -> dict[str, str]:
    """Each dead letter's status, by its label."""
    jobs = await dlq.get_dead_letter_jobs()
    return {j.original_data["label"]: j.dead_letter.status for j in jobs if j.dead_letter}


async def test_a_replay_resumed_with_its_as_of_replays_none_twice(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    # Given six dead letters, and a bulk replay that began at `began`
    await dead_letter(make_worker, queue, dlq, [named("job", f"d{n}") for n in range(6)])
    began = now_ms()
    # And what it replayed before its process died (d0..d2), pending once more since: their
    # jobs were removed before they ran (they keep their place in the store)
    first = {j.id for j in await dlq.get_dead_letter_jobs() if j.original_data["label"] < "d3"}
    for dl_id in first:
        await queue.remove(await dlq.replay_dead_letter(dl_id))
    assert {k for k, v in (await statuses(dlq)).items() if v == "pending"} == {
        "d0", "d1", "d2", "d3", "d4", "d5"
    }  # fmt: skip
    # And a dead letter that arrived after the replay began
    await dead_letter(make_worker, queue, dlq, [named("job", "late")])

    # When the replay is resumed with the moment it began
    replayed = await dlq.replay_all_dead_letters(as_of=began)

    # Then it replays the three it had not reached, and neither the late one nor the three
    # replayed since it began
    assert replayed == 3
    assert labels(await queue.get_waiting()) == {"d3", "d4", "d5"}
    assert {k for k, v in (await statuses(dlq)).items() if v == "pending"} == {
        "d0", "d1", "d2", "late"
    }  # fmt: skip

    # And a new replay (beginning now) replays those four
    assert await dlq.replay_all_dead_letters() == 4


async def test_a_purge_resumed_with_its_as_of_leaves_later_dead_letters(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    # Given three dead letters, a purge's beginning, then two more dead letters
    await dead_letter(make_worker, queue, dlq, [named("job", f"a{n}") for n in range(3)])
    began = datetime.datetime.now(datetime.timezone.utc)
    await wait_until(lambda: _after(began), message="the clock to move on")
    await dead_letter(make_worker, queue, dlq, [named("job", f"b{n}") for n in range(2)])

    # When the whole store, then a filter, are purged as of that beginning
    purged = await dlq.purge_dead_letters(as_of=began)
    filtered = await dlq.purge_dead_letters(DeadLetterFilter(name="job"), as_of=began)

    # Then the three went, and the two that arrived later stay
    assert (purged, filtered) == (3, 0)
    assert await dlq_labels(dlq) == {"b0", "b1"}


async def test_a_tally_counts_what_every_call_given_it_replayed_and_nothing_else(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    # Given six dead letters, two of them named "early", and a bulk replay that began at
    # `began`, whose process replayed the two "early" ones, counted them in its tally
    # "run-1", and died before it told anyone
    await dead_letter(make_worker, queue, dlq, [named("early", f"d{n}") for n in range(2)])
    await dead_letter(make_worker, queue, dlq, [named("job", f"d{n}") for n in range(2, 6)])
    began = now_ms()
    unreported = await dlq.replay_all_dead_letters(
        DeadLetterFilter(name="early"), as_of=began, tally="run-1"
    )
    # And one more dead letter replayed by someone else, with another tally
    (rival,) = [j.id for j in await dlq.get_dead_letter_jobs() if j.original_data["label"] == "d5"]
    await dlq.replay_dead_letter(rival)

    # When the run is resumed with its moment and its tally
    resumed = await dlq.replay_all_dead_letters(as_of=began, tally="run-1")

    # Then the tally holds what the run and its resumption replayed, and not the rival's
    assert (unreported, resumed) == (2, 3)
    assert await dlq.get_dead_letter_tally("run-1") == 5
    assert labels(await queue.get_waiting()) == {f"d{n}" for n in range(6)}
    # And a tally never counted reads 0, and a dry run counts nothing
    assert await dlq.replay_all_dead_letters(dry_run=True, tally="dry") == 0
    assert await dlq.get_dead_letter_tally("dry") == 0


async def test_a_tally_counts_the_dead_letters_of_a_filtered_and_of_a_whole_store_purge(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    # Given five dead letters, two of them named "early"
    await dead_letter(make_worker, queue, dlq, [named("early", f"a{n}") for n in range(2)])
    await dead_letter(make_worker, queue, dlq, [named("job", f"b{n}") for n in range(3)])

    # When a filtered purge (one by one), then a purge of the whole store (detached at
    # once), count in the same tally
    filtered = await dlq.purge_dead_letters(DeadLetterFilter(name="early"), tally="purge-1")
    whole = await dlq.purge_dead_letters(tally="purge-1")

    # Then the tally holds both
    assert (filtered, whole) == (2, 3)
    assert await dlq.get_dead_letter_tally("purge-1") == 5
    assert await dlq.get_dead_letter_count() == 0


@pytest.mark.parametrize(
    ("tally", "error", "match"),
    [(7, TypeError, "tally must be a str"), ("", ValueError, "tally must not be empty"),
     ("a b", ValueError, "tally 'a b' has ' '")],
)  # fmt: skip
async def test_a_bad_tally_is_refused_naming_it_before_any_write(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, tally: object, error: type, match: str
) -> None:
    await dead_letter(make_worker, queue, dlq, [named("job", "a")])

    with pytest.raises(error, match=match):
        await dlq.replay_all_dead_letters(tally=tally)  # type: ignore[arg-type]
    with pytest.raises(error, match=match):
        await dlq.purge_dead_letters(tally=tally)  # type: ignore[arg-type]
    with pytest.raises(error, match=match):
        await dlq.get_dead_letter_tally(tally)  # type: ignore[arg-type]

    assert await statuses(dlq) == {"a": "pending"}


async def _after(moment: datetime.datetime) -> bool:
    return now_ms() > int(moment.timestamp() * 1000)


@pytest.mark.parametrize(
    ("as_of", "error", "match"),
    [("yesterday", TypeError, "as_of must be an int"), (-1, ValueError, "as_of must be"),
     (datetime.datetime(2025, 1, 1), ValueError, "as_of must be timezone-aware")],
)  # fmt: skip
async def test_a_bad_as_of_is_refused_naming_it_before_any_write(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, as_of: object, error: type, match: str
) -> None:
    await dead_letter(make_worker, queue, dlq, [named("job", "a")])

    with pytest.raises(error, match=match):
        await dlq.replay_all_dead_letters(as_of=as_of)  # type: ignore[arg-type]
    with pytest.raises(error, match=match):
        await dlq.purge_dead_letters(as_of=as_of)  # type: ignore[arg-type]

    assert await statuses(dlq) == {"a": "pending"}
