"""The dead letter store through the library: cursors that stay stable while dead letters
arrive and leave, exact counts and grouped statistics that agree with the entries, lookup by
the original job id, the view over every dead letter queue, bulk operations racing each other,
throttling, dry runs and the upgrade from the 0.1 layout."""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
import redis.asyncio as aioredis

from lazarus import (
    DeadLetterFilter,
    DeadLetterStatus,
    DeadLetterView,
    Job,
    Queue,
    Worker,
)
from lazarus._connection import now_ms
from lazarus._keys import QueueKeys
from lazarus.dead_letter import replay, store

from .conftest import wait_until
from .procs import fail_as_told

MakeWorker = Callable[..., Worker]
NAMES = ["email.send", "email.bounce", "sms.send", "push"]
ERRORS = ["TimeoutError", "KeyError", "ValueError"]
SOURCES = ["orders", "billing", "mail"]
REASONS = ["attempts_exhausted", "unrecoverable", "stalled", "discarded"]
T0 = 1_700_000_000_000


async def seed(
    raw: aioredis.Redis,
    dlq: Queue,
    count: int,
    *,
    rng: random.Random,
    start: int = 0,
    at: int | None = None,
    names: list[str] = NAMES,
) -> list[dict[str, Any]]:
    """Write ``count`` dead letters as lazarus 0.1 did (a hash in the waiting list) and move
    them into the store with the real migration; returns what each one holds."""
    keys = dlq.keys
    made = []
    async with raw.pipeline(transaction=False) as pipe:
        for n in range(start, start + count):
            letter = {
                "id": f"dl{n:05d}",
                "name": rng.choice(names),
                "dlq:errorType": rng.choice(ERRORS),
                "dlq:sourceQueue": rng.choice(SOURCES),
                "dlq:reason": rng.choice(REASONS),
                "dlq:deadLetteredAt": at or T0 + rng.randrange(0, 50) * 1000,
                "dlq:failedReason": rng.choice(["Read timed out", "boom", "Bad input a.b("]),
                "data": json.dumps({"n": n, "tag": rng.choice(["red", "blue"])}),
            }
            made.append(letter)
            fields = {k: v for k, v in letter.items() if k != "id"}
            pipe.hset(keys.job(letter["id"]), mapping={
                **fields, "timestamp": letter["dlq:deadLetteredAt"],
                "dlq:originalJobId": f"orig{n}", "dlq:originalOpts": '{"attempts":1,"delay":0}',
                "dlq:stacktrace": "[]", "dlq:attempts": "[]",
            })  # fmt: skip
            pipe.lpush(keys.wait, letter["id"])
        await pipe.execute()
    assert await dlq.migrate_dead_letters() == count
    return made


def matching(made: list[dict[str, Any]], flt: DeadLetterFilter) -> list[dict[str, Any]]:
    """What ``flt`` selects, decided in Python from what was written."""
    out = []
    for letter in made:
        checks = [
            flt.name is None or letter["name"] == flt.name,
            flt.name_prefix is None or letter["name"].startswith(flt.name_prefix),
            flt.error_type is None or letter["dlq:errorType"] == flt.error_type,
            flt.source_queue is None or letter["dlq:sourceQueue"] == flt.source_queue,
            flt.reason is None or letter["dlq:reason"] == flt.reason,
            flt.status in (None, DeadLetterStatus.PENDING),
            flt.since_ms is None or letter["dlq:deadLetteredAt"] >= flt.since_ms,
            flt.until_ms is None or letter["dlq:deadLetteredAt"] <= flt.until_ms,
            flt.failed_reason is None
            or flt.failed_reason.lower() in letter["dlq:failedReason"].lower(),
            flt.payload_contains is None or flt.payload_contains in letter["data"],
        ]
        if all(checks):
            out.append(letter)
    return out


def random_filter(rng: random.Random) -> DeadLetterFilter:
    options: dict[str, Any] = {}
    for field, values in [("name", NAMES), ("error_type", ERRORS), ("source_queue", SOURCES),
                          ("reason", REASONS), ("name_prefix", ["email", "sms", "x"]),
                          ("failed_reason", ["TIMED", "a.b("]),
                          ("payload_contains", ['"red"'])]:  # fmt: skip
        if rng.random() < 0.3:
            options[field] = rng.choice(values)
    if rng.random() < 0.3:
        options["since"] = T0 + rng.randrange(0, 25) * 1000
    if rng.random() < 0.3:
        options["until"] = T0 + rng.randrange(25, 50) * 1000
    if rng.random() < 0.1:
        options["status"] = rng.choice(["pending", "resolved"])
    return DeadLetterFilter(**options)


async def walk_all(dlq: Queue, flt: DeadLetterFilter, limit: int, order: str) -> list[str]:
    ids: list[str] = []
    page = await dlq.search_dead_letters(flt, limit=limit, order=order)  # type: ignore[arg-type]
    ids += [j.id for j in page.jobs]
    while page.next_cursor is not None:
        page = await dlq.search_dead_letters(
            flt,
            limit=limit,
            cursor=page.next_cursor,
            order=order,  # type: ignore[arg-type]
        )
        ids += [j.id for j in page.jobs]
    return ids


# -- counts, search and stats agree with the entries -----------------------------------------


@pytest.mark.parametrize("named", [1_000, 0], ids=["combinations by name", "by pattern"])
async def test_counts_pages_and_stats_agree_with_the_entries_for_random_filters(
    raw: aioredis.Redis, dlq: Queue, named: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given 400 dead letters with random fields, counted from combinations read by name (the
    # few a filter leaves open) or found by pattern (HSCAN MATCH, when they are too many)
    monkeypatch.setattr(store, "MAX_NAMED", named)
    rng = random.Random(7)
    made = await seed(raw, dlq, 400, rng=rng)

    for _ in range(40):
        flt = random_filter(rng)
        expected = matching(made, flt)
        newest_first = sorted(
            expected, key=lambda m: (m["dlq:deadLetteredAt"], m["id"]), reverse=True
        )

        # When the store counts, pages and groups them
        count = await dlq.count_dead_letters(flt)
        walked = await walk_all(dlq, flt, limit=7, order="newest")
        first = await dlq.find_dead_letters(flt, limit=10)
        stats = await dlq.get_dead_letter_stats(flt)

        # Then every answer is what the entries say
        assert count == len(expected), flt
        assert sorted(walked) == sorted(m["id"] for m in expected), flt
        assert len(walked) == len(set(walked)), flt
        times = [m["dlq:deadLetteredAt"] for m in newest_first]
        assert [j.dead_letter.dead_lettered_at for j in first] == times[:10]  # type: ignore[union-attr]
        assert stats.total == len(expected), flt
        assert stats.by_error_type == dict(Counter(m["dlq:errorType"] for m in expected)), flt
        assert stats.by_name == dict(Counter(m["name"] for m in expected)), flt
        assert stats.by_source_queue == dict(Counter(m["dlq:sourceQueue"] for m in expected))
        assert stats.by_reason == dict(Counter(m["dlq:reason"] for m in expected)), flt
        assert stats.by_status == ({"pending": len(expected)} if expected else {}), flt
        assert stats.oldest == min(times, default=None), flt
        assert stats.newest == max(times, default=None), flt


async def test_a_page_reports_the_exact_total_when_counters_answer(
    raw: aioredis.Redis, dlq: Queue
) -> None:
    rng = random.Random(3)
    made = await seed(raw, dlq, 120, rng=rng)
    flt = DeadLetterFilter(error_type="KeyError", source_queue="orders")

    page = await dlq.search_dead_letters(flt, limit=5)
    searched = await dlq.search_dead_letters(DeadLetterFilter(failed_reason="boom"), limit=5)

    assert page.total == len(matching(made, flt))
    assert searched.total is None


@pytest.mark.parametrize("prefix", ["a*", "a[", "a", "b.a", "n"])
async def test_counts_by_name_prefix_match_names_with_glob_characters_exactly(
    raw: aioredis.Redis, dlq: Queue, prefix: str
) -> None:
    # Given names that hold glob characters, and a name that holds another's prefix inside
    made = await seed(raw, dlq, 60, rng=random.Random(5), names=["a*b.x", "a[b].y", "ab.z",
                                                                 "b.a*", "xn1:a"])  # fmt: skip
    flt = DeadLetterFilter(name_prefix=prefix)

    # When they are counted and searched by a name prefix
    counted = await dlq.count_dead_letters(flt)
    page = await dlq.search_dead_letters(flt, limit=100)

    # Then both hold exactly the dead letters whose name starts with it
    expected = {letter["id"] for letter in matching(made, flt)}
    assert counted == page.total == len(expected)
    assert {j.id for j in page.jobs} == expected


async def test_counts_stay_exact_in_a_store_without_value_sets_of_every_field(
    raw: aioredis.Redis, dlq: Queue
) -> None:
    # Given a store whose source queues, error types and reasons have no value sets (as a
    # store written before they were kept)
    made = await seed(raw, dlq, 80, rng=random.Random(9))
    await raw.delete(*(dlq.keys.dl_values(code) for code in "qer"))
    filters = [
        DeadLetterFilter(name="sms.send", error_type="KeyError"),
        DeadLetterFilter(name_prefix="email"),
        DeadLetterFilter(name_prefix="zz"),
    ]

    # When dead letters are counted by several fields and by name prefix
    counted = [await dlq.count_dead_letters(flt) for flt in filters]

    # Then the counts are those of the entries
    assert counted == [len(matching(made, flt)) for flt in filters]
    assert counted[0] > 0 and counted[1] > 0


async def test_oldest_first_walk_is_the_reverse_of_newest_first(
    raw: aioredis.Redis, dlq: Queue
) -> None:
    await seed(raw, dlq, 90, rng=random.Random(11))
    flt = DeadLetterFilter(name_prefix="email")

    newest = await walk_all(dlq, flt, limit=8, order="newest")
    oldest = await walk_all(dlq, flt, limit=13, order="oldest")

    assert oldest == newest[::-1]
    assert len(newest) > 0


# -- cursors ----------------------------------------------------------------------------------


async def test_a_cursor_walk_sees_every_survivor_once_while_others_arrive_and_leave(
    raw: aioredis.Redis, dlq: Queue
) -> None:
    # Given 200 dead letters
    rng = random.Random(5)
    made = await seed(raw, dlq, 200, rng=rng)
    ids = [m["id"] for m in made]
    removed: set[str] = set()

    # When a walk pages through them while, between pages, some are purged and new ones arrive
    seen: list[str] = []
    page = await dlq.search_dead_letters(limit=9)
    seen += [j.id for j in page.jobs]
    extra = 0
    while page.next_cursor is not None:
        victims = rng.sample([i for i in ids if i not in removed], 3)
        for victim in victims:
            await dlq.purge_dead_letter(victim)
        removed.update(victims)
        await seed(raw, dlq, 2, rng=rng, start=1000 + extra)
        extra += 2
        page = await dlq.search_dead_letters(limit=9, cursor=page.next_cursor)
        seen += [j.id for j in page.jobs]

    # Then every original dead letter that was never removed was seen, and none twice
    survivors = set(ids) - removed
    assert survivors <= set(seen)
    assert len(seen) == len(set(seen))


async def test_a_cursor_from_another_order_or_not_from_us_is_refused(dlq: Queue) -> None:
    page = await dlq.search_dead_letters(limit=1)
    assert page.next_cursor is None

    with pytest.raises(ValueError, match="cursor"):
        await dlq.search_dead_letters(cursor="bm90IGEgY3Vyc29y")
    with pytest.raises(TypeError, match="cursor"):
        await dlq.search_dead_letters(cursor=5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="order"):
        await dlq.search_dead_letters(order="sideways")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="limit"):
        await dlq.search_dead_letters(limit=0)


@pytest.mark.parametrize(
    ("budget", "error"),
    [("x", TypeError), (True, TypeError), (-1, ValueError), (float("nan"), ValueError),
     (float("inf"), ValueError)],
)  # fmt: skip
async def test_a_time_budget_that_is_no_finite_number_of_seconds_is_refused_naming_it(
    raw: aioredis.Redis, dlq: Queue, redis_url: str, prefix: str, budget: object,
    error: type[Exception],
) -> None:  # fmt: skip
    # Given dead letters to search
    await seed(raw, dlq, 3, rng=random.Random(2))

    # When a search of one dead letter queue, or of them all, is given that budget
    # Then it is refused, naming time_budget
    with pytest.raises(error, match=r"^time_budget must be"):
        await dlq.search_dead_letters(time_budget=budget)  # type: ignore[arg-type]
    async with DeadLetterView(redis_url, prefix=prefix) as view:
        with pytest.raises(error, match=r"^time_budget must be"):
            await view.search(time_budget=budget)  # type: ignore[arg-type]


async def test_a_cursor_made_for_newest_first_is_refused_for_oldest_first(
    raw: aioredis.Redis, dlq: Queue
) -> None:
    await seed(raw, dlq, 5, rng=random.Random(1))
    page = await dlq.search_dead_letters(limit=2)
    assert page.next_cursor is not None

    with pytest.raises(ValueError, match="order"):
        await dlq.search_dead_letters(cursor=page.next_cursor, order="oldest")


def test_status_filter_accepts_the_enum_or_its_value_and_names_the_field() -> None:
    assert DeadLetterFilter(status="manual").status is DeadLetterStatus.MANUAL
    assert DeadLetterFilter(status=DeadLetterStatus.FAILED).exact() == {"s": "failed"}
    with pytest.raises(ValueError, match=r"filter\.status"):
        DeadLetterFilter(status="gone")
    with pytest.raises(ValueError, match=r"filter\.name"):
        DeadLetterFilter(name="\ud800")


def test_reason_filter_takes_a_dead_letter_reason_only_and_names_the_field() -> None:
    assert DeadLetterFilter(reason="stalled").exact() == {"r": "stalled"}
    for bogus in ("bogus", "STALLED", ""):
        # (it matched nothing, silently: a typo looked like an empty dead letter queue)
        with pytest.raises(ValueError, match=r"^filter\.reason must be one of attempts_exh"):
            DeadLetterFilter(reason=bogus)  # type: ignore[arg-type]


# -- lookups and the view over every dead letter queue ----------------------------------------


async def test_a_dead_letter_is_found_by_the_id_its_job_had_in_the_source_queue(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    [job] = await queue.add_bulk([{"name": "charge", "data": {"raise": "UnrecoverableError"}}])
    worker = make_worker(fail_as_told, dead_letter_queue="jobs-dlq")
    await wait_until(lambda: _holds(dlq, 1), message="one dead letter")
    await worker.close()

    found = await dlq.find_dead_letter_by_original_id(job.id)

    assert found is not None
    assert found.dead_letter is not None
    assert found.dead_letter.original_job_id == job.id
    assert found.dead_letter.status == "pending"
    assert await dlq.find_dead_letter_by_original_id("never-was") is None


async def test_the_view_lists_counts_and_finds_across_every_dead_letter_queue(
    redis_url: str, prefix: str, make_worker: MakeWorker
) -> None:
    # Given two source queues dead-lettering into two dead letter queues
    added: dict[str, Job] = {}
    for source, target in [("a", "a-dlq"), ("b", "b-dlq")]:
        async with Queue(source, connection=redis_url, prefix=prefix) as q:
            jobs = await q.add_bulk(
                {"name": f"{source}.job", "data": {"raise": "UnrecoverableError", "n": n}}
                for n in range(6)
            )
            added[source] = jobs[0]
        make_worker(fail_as_told, source, dead_letter_queue=target)
    async with DeadLetterView(redis_url, prefix=prefix) as view:
        await wait_until(lambda: _counted(view, 12), message="twelve dead letters")

        # When the view is asked
        queues = await view.dead_letter_queues()
        by_queue = await view.count(DeadLetterFilter(source_queue="b"))
        stats = await view.stats()
        pages: list[str] = []
        page = await view.search(limit=5)
        pages += [j.id for j in page.jobs]
        while page.next_cursor:
            page = await view.search(limit=5, cursor=page.next_cursor)
            pages += [j.id for j in page.jobs]
        found = await view.find_by_original_id(added["b"].id)

    # Then it sees both queues as one store
    assert queues == ["a-dlq", "b-dlq"]
    assert by_queue == 6
    assert stats.total == 12
    assert stats.by_source_queue == {"a": 6, "b": 6}
    assert len(pages) == 12 and len(set(pages)) == 12
    assert found is not None and found.queue_name == "b-dlq"


async def test_the_view_walks_every_queue_in_one_arrival_order(
    raw: aioredis.Redis, redis_url: str, prefix: str
) -> None:
    # Given three dead letter queues whose dead letters interleave in time, with ties
    made: list[tuple[int, str, str]] = []
    for name, seed_value in [("x-dlq", 1), ("y-dlq", 2), ("z-dlq", 3)]:
        async with Queue(name, connection=redis_url, prefix=prefix) as q:
            for letter in await seed(raw, q, 30, rng=random.Random(seed_value)):
                made.append((letter["dlq:deadLetteredAt"], name, letter["id"]))

    # When the view walks them newest first in small pages
    async with DeadLetterView(redis_url, prefix=prefix) as view:
        walked: list[tuple[int, str, str]] = []
        page = await view.search(limit=4)
        while True:
            walked += [(j.dead_letter.dead_lettered_at, j.queue_name, j.id)  # type: ignore[union-attr]
                       for j in page.jobs]  # fmt: skip
            if page.next_cursor is None:
                break
            page = await view.search(limit=4, cursor=page.next_cursor)

    # Then every dead letter comes once, in time order
    assert sorted(walked) == sorted(made)
    assert [w[0] for w in walked] == sorted((m[0] for m in made), reverse=True)


# -- bulk operations --------------------------------------------------------------------------


async def test_filtered_bulk_replay_racing_filtered_purge_handles_every_match_once(
    raw: aioredis.Redis, dlq: Queue, redis_url: str, prefix: str
) -> None:
    # Given 600 dead letters, of which one error type matches both operations' filter
    made = await seed(raw, dlq, 600, rng=random.Random(9))
    flt = DeadLetterFilter(error_type="KeyError")
    expected = {m["id"] for m in matching(made, flt)}
    rival = Queue(dlq.name, connection=redis_url, prefix=prefix)

    # When a bulk replay and a bulk purge of the same filter run at once, in small batches
    try:
        replayed, purged = await asyncio.gather(
            dlq.replay_all_dead_letters(flt, batch_size=7),
            rival.purge_dead_letters(flt, batch_size=5),
        )
    finally:
        await rival.close()

    # Then each match was handled by exactly one of them and nothing else was touched
    assert replayed + purged == len(expected)
    assert replayed > 0 and purged > 0
    assert await dlq.count_dead_letters(flt) == 0
    assert await dlq.get_dead_letter_count() == 600 - len(expected)
    new_jobs = 0
    for source in SOURCES:
        new_jobs += await raw.llen(QueueKeys(prefix, source).wait)
    assert new_jobs == replayed


async def test_bulk_replay_reports_progress_and_a_dry_run_touches_nothing(
    raw: aioredis.Redis, dlq: Queue
) -> None:
    made = await seed(raw, dlq, 50, rng=random.Random(2))
    flt = DeadLetterFilter(source_queue="orders")
    expected = len(matching(made, flt))
    progress: list[int] = []

    would = await dlq.replay_all_dead_letters(flt, dry_run=True)
    assert would == expected
    assert await dlq.count_dead_letters(flt) == expected

    done = await dlq.replay_all_dead_letters(flt, batch_size=4, on_progress=progress.append)

    assert done == expected
    assert progress == sorted(progress)
    assert progress[-1] == expected
    assert len(progress) >= expected // 4


async def test_bulk_purge_with_a_rate_works_in_batches_no_larger_than_the_rate(
    raw: aioredis.Redis, dlq: Queue
) -> None:
    await seed(raw, dlq, 30, rng=random.Random(4))
    progress: list[int] = []

    done = await dlq.purge_dead_letters(rate=10, on_progress=progress.append)

    assert done == 30
    assert all(b - a <= 10 for a, b in zip([0, *progress], progress))
    with pytest.raises(ValueError, match="rate"):
        await dlq.purge_dead_letters(rate=0)


async def test_bulk_operations_leave_dead_letters_that_arrive_meanwhile(
    raw: aioredis.Redis, dlq: Queue
) -> None:
    # Given twenty dead letters, and more arriving while a bulk purge runs
    await seed(raw, dlq, 20, rng=random.Random(6))
    arrived: list[dict[str, Any]] = []

    async def arrive(done: int) -> None:
        if not arrived:
            later = now_ms() + 60_000
            arrived.extend(await seed(raw, dlq, 3, rng=random.Random(8), start=500, at=later))

    # When the purge ends
    purged = await dlq.purge_dead_letters(batch_size=5, on_progress=arrive)

    # Then it took the twenty it started with, and left the arrivals
    assert purged == 20
    assert sorted(j.id for j in await dlq.get_dead_letter_jobs()) == sorted(
        a["id"] for a in arrived
    )


# -- the upgrade from 0.1 -------------------------------------------------------------------


async def test_migration_moves_old_dead_letters_into_the_store_and_is_safe_to_repeat(
    raw: aioredis.Redis, dlq: Queue
) -> None:
    await raw.hset(dlq.keys.job("plain"), mapping={"name": "n", "data": "1"})
    await raw.lpush(dlq.keys.wait, "plain")
    await seed(raw, dlq, 12, rng=random.Random(12))

    again = await dlq.migrate_dead_letters()

    assert again == 0
    assert await dlq.get_dead_letter_count() == 12
    assert await raw.lrange(dlq.keys.wait, 0, -1) == ["plain"]
    assert await dlq.get_job_state("dl00003") == "waiting"
    assert (await dlq.get_job_counts())["waiting"] == 13


# -- a worker on a dead letter queue --------------------------------------------------------


async def test_a_worker_on_a_dead_letter_queue_takes_dead_letters_out_of_the_store(
    raw: aioredis.Redis, dlq: Queue, make_worker: MakeWorker
) -> None:
    await seed(raw, dlq, 5, rng=random.Random(13))
    handled: list[str] = []

    async def handle(job: Job) -> None:
        assert job.dead_letter is not None
        handled.append(job.id)

    make_worker(handle, dlq.name)
    await wait_until(lambda: _completed(dlq, 5), message="five dead letters handled")

    assert await dlq.get_dead_letter_count() == 0
    assert await dlq.count_dead_letters() == 0
    assert await raw.hlen(dlq.keys.dl_counts) == 0
    assert len(handled) == 5


async def _holds(dlq: Queue, count: int) -> bool:
    return await dlq.get_dead_letter_count() == count


async def _completed(dlq: Queue, count: int) -> bool:
    return await dlq.get_completed_count() == count


async def _counted(view: DeadLetterView, count: int) -> bool:
    return await view.count() == count


# -- bulk operations keep every index exact ----------------------------------------------------


async def store_audit(raw: aioredis.Redis, dlq: Queue) -> dict[str, Any]:
    """The store's index keys as they are, and as the dead letter hashes say they should be."""
    dl = dlq.keys.dl
    ids: set[str] = set()
    for status in DeadLetterStatus:
        ids |= set(await raw.zrange(dlq.keys.dl_index("s", status.value), 0, -1))
    codes = {"q": "dlq:sourceQueue", "n": "name", "e": "dlq:errorType", "r": "dlq:reason",
             "s": "dlq:status"}  # fmt: skip
    expected: dict[str, set[str]] = {}
    combos: Counter[str] = Counter()
    origins = {}
    for dl_id in ids:
        fields = await raw.hgetall(dlq.keys.job(dl_id))
        values = [fields.get(codes[c], "pending" if c == "s" else "") for c in "qners"]
        for code, value in zip("qners", values):
            expected.setdefault(f"{dl}i:{code}:{value}", set()).add(dl_id)
        combos["".join(f"{c}{len(v.encode())}:{v}" for c, v in zip("qners", values))] += 1
        origins[fields["dlq:originalJobId"]] = dl_id
    actual = {}
    async for key in raw.scan_iter(match=f"{dl}i:*", count=1000):
        actual[key] = set(await raw.zrange(key, 0, -1))
    return {
        "indexes": (actual, expected),
        "counts": ({k: int(v) for k, v in (await raw.hgetall(f"{dl}c")).items()}, dict(combos)),
        **{f"values {code}": (set(await raw.zrange(f"{dl}v:{code}", 0, -1)),
                              {k[len(f"{dl}i:{code}:"):] for k in expected
                               if k.startswith(f"{dl}i:{code}:")})
           for code in "qners"},
        "origins": (await raw.hgetall(f"{dl}o"), origins),
    }  # fmt: skip


async def test_one_by_one_arrivals_transitions_and_purges_keep_every_index_exact(
    raw: aioredis.Redis, queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    # Given jobs a worker dead-letters one by one, several sharing each combination of values
    plan = [(n, e) for n in ("a", "b") for e in ("TimeoutError", "ValueError")] * 3
    for name, error in plan:
        await queue.add(name, {"error": error})
    make_worker(fail_as_told, dead_letter_queue=dlq.name)
    await wait_until(lambda: _holds(dlq, len(plan)), message="every job dead-lettered")
    letters = await dlq.find_dead_letters(limit=100)
    assert all(len(j.id) == 28 and int(j.id, 16) >= 0 for j in letters)
    assert len({j.id for j in letters}) == len(plan)

    # When some change status one at a time (one leaves a status, and its combination, empty
    # behind it) and others are purged or removed one at a time (the last of an error type
    # among them)
    by_combo: dict[tuple[str, str], list[Job]] = {}
    for job in letters:
        assert job.dead_letter is not None
        by_combo.setdefault((job.name, job.dead_letter.error_type), []).append(job)
    for job in by_combo[("a", "TimeoutError")]:
        await dlq.archive_dead_letter(job.id, actor="operator:ops")
    await dlq.flag_dead_letter(by_combo[("b", "TimeoutError")][0].id, actor="operator:ops")
    await dlq.reopen_dead_letter(by_combo[("b", "TimeoutError")][0].id, actor="operator:ops")
    for job in by_combo[("a", "ValueError")]:
        await dlq.purge_dead_letter(job.id)
    for job in by_combo[("b", "ValueError")]:
        await dlq.remove(job.id)

    # Then every index, count, set of values and lookup is what the hashes say
    for part, (actual, expected) in (await store_audit(raw, dlq)).items():
        assert actual == expected, part
    assert set(await raw.zrange(f"{dlq.keys.dl}v:s", 0, -1)) == {"archived", "pending"}
    assert set(await raw.zrange(f"{dlq.keys.dl}v:e", 0, -1)) == {"TimeoutError"}


async def test_bulk_purge_and_replay_leave_every_index_count_and_lookup_exact(
    raw: aioredis.Redis, dlq: Queue
) -> None:
    # Given 400 dead letters of every kind
    await seed(raw, dlq, 400, rng=random.Random(11))

    # When one filter's matches are purged and another's replayed, in small batches, and
    # a batch names one dead letter twice
    purged = await dlq.purge_dead_letters(DeadLetterFilter(source_queue="mail"), batch_size=7)
    purged += await dlq.purge_dead_letters(DeadLetterFilter(name="push"), batch_size=5)
    replayed = await dlq.replay_all_dead_letters(
        DeadLetterFilter(error_type="KeyError"), batch_size=9
    )
    (twice,) = [j.id for j in await dlq.find_dead_letters(DeadLetterFilter(), limit=1)]
    again = await replay.purge(dlq.client, dlq.keys, dlq.max_events, [twice, twice])

    # Then every index, count, set of names and statuses and original id lookup is exactly
    # what the remaining dead letters' hashes say
    assert purged > 0 and replayed > 0 and again == [1, -1]
    audit = await store_audit(raw, dlq)
    for part, (actual, expected) in audit.items():
        assert actual == expected, part
    # And filtered reads see the live dead letters only, not the replayed (processing) ones
    expected_ids = audit["indexes"][1]
    dl = dlq.keys.dl
    for flt, index in [(DeadLetterFilter(error_type="KeyError"), f"{dl}i:e:KeyError"),
                       (DeadLetterFilter(name="sms.send"), f"{dl}i:n:sms.send")]:  # fmt: skip
        live = expected_ids.get(index, set()) & expected_ids.get(f"{dl}i:s:pending", set())
        found = await dlq.find_dead_letters(flt, limit=1000)
        assert {j.id for j in found} == live and await dlq.count_dead_letters(flt) == len(live)


async def test_a_call_that_outlasts_several_steps_of_index_writes_keeps_the_store_exact(
    raw: aioredis.Redis, dlq: Queue
) -> None:
    # Given 300 dead letters of every kind
    ids = [letter["id"] for letter in await seed(raw, dlq, 300, rng=random.Random(13))]

    # When one call replays 120 of them and another purges 130 (so each writes its index
    # changes in several steps, every 32 dead letters), each naming one dead letter again
    # after its first step
    budget = 60_000_000
    replayed = await replay.replay(
        dlq.client, dlq.keys, dlq.max_events, "jobs",
        [(i, replay.KEEP) for i in [*ids[:100], ids[5], *ids[100:119]]], budget_us=budget,
    )  # fmt: skip
    purged = await replay.purge(
        dlq.client, dlq.keys, dlq.max_events, [*ids[150:200], ids[151], *ids[200:279]],
        budget_us=budget,
    )  # fmt: skip

    # Then each was handled once
    assert [state for _, state in replayed] == ["waiting"] * 100 + [-6] + ["waiting"] * 19
    assert purged == [1] * 50 + [-1] + [1] * 79
    counts = [int(f["count"]) for _, f in await raw.xrange(dlq.keys.events)
              if f.get("event") == "purged"]  # fmt: skip
    assert sum(counts) == 129 and max(counts) > 32  # a call wrote several steps
    # And every index, count, set of values and original id lookup is what the hashes say
    audit = await store_audit(raw, dlq)
    for part, (actual, expected) in audit.items():
        assert actual == expected, part
    assert len(audit["indexes"][1][f"{dlq.keys.dl}i:s:processing"]) == 119
    assert not [key for key in [dlq.keys.job(i) for i in ids[150:279]] if await raw.exists(key)]


async def test_replay_and_purge_send_again_what_a_call_left_until_each_item_has_its_result(
    raw: aioredis.Redis, dlq: Queue
) -> None:
    # Given 40 dead letters
    ids = [letter["id"] for letter in await seed(raw, dlq, 40, rng=random.Random(5))]

    # When half is replayed and half purged (one named twice, one unknown) with a time budget
    # that lets each script call handle four
    replayed = await replay.replay(dlq.client, dlq.keys, dlq.max_events, "jobs",
                                   [(i, replay.KEEP) for i in ids[:20]], budget_us=1)  # fmt: skip
    purged = await replay.purge(
        dlq.client, dlq.keys, dlq.max_events, [*ids[20:], ids[20], "nope"], budget_us=1
    )

    # Then every item has its own result, in order, and each new job is its own dead letter's
    assert [state for _, state in replayed] == ["waiting"] * 20
    jobs = QueueKeys(dlq.keys.prefix, "jobs")
    assert [await raw.hget(jobs.job(new_id), "replayOf") for new_id, _ in replayed] == ids[:20]
    assert purged == [1] * 20 + [-1, -1]
    # And it took many calls: each 'purged' event counts four at most
    counts = [int(f["count"]) for _, f in await raw.xrange(dlq.keys.events)
              if f.get("event") == "purged"]  # fmt: skip
    assert sum(counts) == 20 and len(counts) >= 5 and max(counts) <= 4
    assert await dlq.count_dead_letters() == 0


async def test_a_substring_search_out_of_time_returns_a_cursor_that_resumes_where_it_stopped(
    raw: aioredis.Redis, dlq: Queue
) -> None:
    # Given more dead letters than one bounded step examines, none of which match
    await seed(raw, dlq, 1200, rng=random.Random(5))
    flt = DeadLetterFilter(payload_contains="no such text")

    # When searched with no time to spare, page after page
    pages = [await dlq.search_dead_letters(flt, time_budget=0)]
    while pages[-1].next_cursor is not None:
        pages.append(
            await dlq.search_dead_letters(flt, cursor=pages[-1].next_cursor, time_budget=0)
        )

    # Then each page took one step of at most 500 entries, and together they reached the end
    assert all(page.jobs == [] for page in pages)
    assert len(pages) == 3


@pytest.mark.parametrize("order", ["newest", "oldest"])
async def test_pages_over_several_live_statuses_follow_one_arrival_order(
    raw: aioredis.Redis, dlq: Queue, order: str
) -> None:
    # Given dead letters spread over the three live statuses, and some replayed
    made = await seed(raw, dlq, 240, rng=random.Random(3))
    ids = [letter["id"] for letter in made]
    for n, dl_id in enumerate(ids):
        if n % 5 == 1:
            await dlq.set_dead_letter_status(dl_id, "manual", actor="operator:ada")
        elif n % 5 == 2:
            await dlq.set_dead_letter_status(dl_id, "failed", actor="operator:ada")
    await dlq.replay_all_dead_letters(DeadLetterFilter(status="pending", name="push"))

    # When every live dead letter is walked page by page, without a filter and by name
    walked = await walk_all(dlq, DeadLetterFilter(), 7, order)
    named = await walk_all(dlq, DeadLetterFilter(name="email.send"), 5, order)

    # Then the pages follow the arrival order over all three statuses, each entry once
    entries: list[tuple[float, str]] = []
    for status in ("pending", "manual", "failed"):
        entries += await raw.zrange(dlq.keys.dl_index("s", status), 0, -1, withscores=True)
    entries.sort(key=lambda e: (e[1], e[0]), reverse=order == "newest")
    expected = [dl_id for dl_id, _score in entries]
    assert walked == expected
    by_name = {letter["id"] for letter in made if letter["name"] == "email.send"}
    assert named == [dl_id for dl_id in expected if dl_id in by_name]
