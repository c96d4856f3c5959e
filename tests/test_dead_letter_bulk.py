"""Dead letter queues in bulk: replay-all and purge with filters, against a real Redis
(validation cases VAL-16..VAL-22 of the DLQ spec, plus every filter field, batching over
10,000 dead letters, and that count / find agree with what replay and purge then touch).
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any

import pytest
import redis.asyncio as aioredis

from lazarus import (
    DeadLetterFilter,
    Job,
    JobNotFoundError,
    Queue,
    Worker,
)
from lazarus._connection import now_ms
from lazarus._scripts import CALL_BUDGET_US

from .conftest import wait_until
from .procs import fail_as_told

MakeWorker = Callable[..., Worker]


# -- helpers -----------------------------------------------------------------------------------


async def holds(dlq: Queue, count: int) -> bool:
    return await dlq.get_dead_letter_count() == count


async def dead_letter(
    make_worker: MakeWorker,
    queue: Queue,
    dlq: Queue,
    jobs: Iterable[Mapping[str, Any]],
) -> None:
    """Add ``jobs`` to ``queue`` and run a worker until all of them are dead letters in
    ``dlq``. Each job's data says what the processor raises (see :func:`fail_as_told`)."""
    expected = await dlq.get_dead_letter_count() + len(await queue.add_bulk(jobs))
    worker = make_worker(fail_as_told, queue.name, dead_letter_queue=dlq.name)
    await wait_until(lambda: holds(dlq, expected), message=f"{expected} dead letters")
    await worker.close()


def labels(jobs: Iterable[Job]) -> set[str]:
    return {j.original_data["label"] for j in jobs}


async def dlq_labels(dlq: Queue) -> set[str]:
    return labels(await dlq.get_dead_letter_jobs())


def named(name: str, label: str, **data: Any) -> dict[str, Any]:
    return {"name": name, "data": {"label": label, **data}}


@pytest.fixture
async def other(redis_url: str, prefix: str) -> AsyncIterator[Queue]:
    """A second source queue, ``other``, on this test's prefix."""
    q = Queue("other", connection=redis_url, prefix=prefix)
    yield q
    await q.close()


# -- VAL-16..VAL-22 ----------------------------------------------------------------------------


async def test_replay_all_replays_every_dead_letter_into_its_source_and_empties_the_dlq(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    # Given three dead letters from "jobs"
    await dead_letter(make_worker, queue, dlq, [named("order", str(n)) for n in range(3)])

    # When all are replayed
    replayed = await dlq.replay_all_dead_letters()

    # Then three new jobs wait in "jobs" and the DLQ is empty
    assert replayed == 3
    assert labels(await queue.get_waiting()) == {"0", "1", "2"}
    assert await dlq.get_dead_letter_count() == 0


async def test_replay_all_with_a_name_filter_replays_only_jobs_of_that_name(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    # Given two "send-email" dead letters and one "charge-card"
    jobs = [named("send-email", "e1"), named("charge-card", "c1"), named("send-email", "e2")]
    await dead_letter(make_worker, queue, dlq, jobs)

    # When the "send-email" ones are replayed
    replayed = await dlq.replay_all_dead_letters(DeadLetterFilter(name="send-email"))

    # Then two were replayed and "charge-card" remains
    assert replayed == 2
    assert labels(await queue.get_waiting()) == {"e1", "e2"}
    assert await dlq_labels(dlq) == {"c1"}


async def test_replay_all_with_a_failed_reason_filter_matches_substrings_ignoring_case(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    # Given dead letters that failed with "ETIMEDOUT", "ECONNREFUSED" and "read etimedout"
    jobs = [
        named("call", "upper", message="ETIMEDOUT"),
        named("call", "refused", message="ECONNREFUSED"),
        named("call", "lower", message="read etimedout after 5s"),
    ]
    await dead_letter(make_worker, queue, dlq, jobs)

    # When those whose reason contains "ETIMEDOUT" are replayed
    replayed = await dlq.replay_all_dead_letters(DeadLetterFilter(failed_reason="ETIMEDOUT"))

    # Then both spellings were replayed and the ECONNREFUSED one remains
    assert replayed == 2
    assert labels(await queue.get_waiting()) == {"upper", "lower"}
    assert await dlq_labels(dlq) == {"refused"}


async def test_purge_all_removes_every_dead_letter_and_its_hash(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, raw: aioredis.Redis
) -> None:
    # Given five dead letters
    await dead_letter(make_worker, queue, dlq, [named("job", str(n)) for n in range(5)])
    ids = [j.id for j in await dlq.get_dead_letter_jobs()]

    # When all are purged
    purged = await dlq.purge_dead_letters()

    # Then the DLQ is empty, their hashes are gone and nothing was replayed
    assert purged == 5
    assert await dlq.get_dead_letter_count() == 0
    assert await raw.exists(*(dlq.keys.job(i) for i in ids)) == 0
    assert await queue.get_waiting_count() == 0


async def test_purge_all_with_a_name_filter_removes_only_jobs_of_that_name(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    # Given two "send-email" dead letters and one "charge-card"
    jobs = [named("send-email", "e1"), named("send-email", "e2"), named("charge-card", "c1")]
    await dead_letter(make_worker, queue, dlq, jobs)

    # When the "send-email" ones are purged
    purged = await dlq.purge_dead_letters(DeadLetterFilter(name="send-email"))

    # Then two were removed and "charge-card" remains
    assert purged == 2
    assert await dlq_labels(dlq) == {"c1"}


async def test_replay_all_sends_each_dead_letter_back_to_its_own_source_queue(
    queue: Queue, other: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    # Given two dead letters from "jobs" and one from "other" in one DLQ
    await dead_letter(make_worker, queue, dlq, [named("order", "j1"), named("order", "j2")])
    await dead_letter(make_worker, other, dlq, [named("notify", "o1")])

    # When all are replayed
    replayed = await dlq.replay_all_dead_letters()

    # Then each went home and the DLQ is empty
    assert replayed == 3
    assert labels(await queue.get_waiting()) == {"j1", "j2"}
    assert labels(await other.get_waiting()) == {"o1"}
    assert await dlq.get_dead_letter_count() == 0


async def test_every_operation_on_an_empty_dlq_returns_zero(dlq: Queue) -> None:
    # Given an empty DLQ / When / Then
    assert await dlq.get_dead_letter_count() == 0
    assert await dlq.get_dead_letter_jobs(0, 9) == []
    assert await dlq.count_dead_letters() == 0
    assert await dlq.find_dead_letters() == []
    assert await dlq.replay_all_dead_letters() == 0
    assert await dlq.purge_dead_letters() == 0


# -- single purge ------------------------------------------------------------------------------


async def test_purge_dead_letter_removes_that_one_and_a_second_purge_raises_job_not_found(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    # Given two dead letters
    await dead_letter(make_worker, queue, dlq, [named("job", "a"), named("job", "b")])
    first, second = await dlq.get_dead_letter_jobs()

    # When one is purged
    await dlq.purge_dead_letter(first.id)

    # Then only the other remains, and purging the first again finds nothing
    assert await dlq.peek_dead_letter(first.id) is None
    assert [j.id for j in await dlq.get_dead_letter_jobs()] == [second.id]
    with pytest.raises(JobNotFoundError):
        await dlq.purge_dead_letter(first.id)


# -- filters -----------------------------------------------------------------------------------


@pytest.fixture
async def mixed_dlq(queue: Queue, other: Queue, dlq: Queue, make_worker: MakeWorker) -> Queue:
    """A DLQ shared by "jobs" and "other" holding six labelled dead letters:

    ====== ====== ============ ================== ======================== ==================
    label  source name         error              message                  reason
    ====== ====== ============ ================== ======================== ==================
    1      jobs   send-email   TimeoutError       ETIMEDOUT to smtp        attempts_exhausted
    2      jobs   send-email   ConnectionError    ECONNREFUSED             attempts_exhausted
    3      jobs   charge-card  TimeoutError       etimedout on gateway     attempts_exhausted
    4      jobs   send-sms     UnrecoverableError invalid: a.b(+100%)      unrecoverable
    5      jobs   charge-card  DeadLetterError    fraud suspected          discarded
    6      other  send-email   TimeoutError       ETIMEDOUT in other       attempts_exhausted
    ====== ====== ============ ================== ======================== ==================
    """
    jobs = [
        ("send-email", "1", "TimeoutError", "ETIMEDOUT to smtp", {"to": "ada@example.com"}),
        ("send-email", "2", "ConnectionError", "ECONNREFUSED", {"to": "bob@example.com"}),
        ("charge-card", "3", "TimeoutError", "etimedout on gateway", {"card": "visa"}),
        ("send-sms", "4", "UnrecoverableError", "invalid: a.b(+100%)", {"to": "+100"}),
        ("charge-card", "5", "DeadLetterError", "fraud suspected", {"card": "amex"}),
    ]
    await dead_letter(
        make_worker,
        queue,
        dlq,
        [named(n, label, error=e, message=m, **extra) for n, label, e, m, extra in jobs],
    )
    await dead_letter(
        make_worker,
        other,
        dlq,
        [
            named(
                "send-email",
                "6",
                error="TimeoutError",
                message="ETIMEDOUT in other",
                to="cy@example.com",
            )
        ],
    )
    return dlq


FILTER_CASES: dict[str, tuple[DeadLetterFilter, set[str]]] = {
    "no filter": (DeadLetterFilter(), {"1", "2", "3", "4", "5", "6"}),
    "name": (DeadLetterFilter(name="send-email"), {"1", "2", "6"}),
    "name is exact": (DeadLetterFilter(name="send"), set()),
    "name + failed_reason": (
        DeadLetterFilter(name="send-email", failed_reason="etimedout"),
        {"1", "6"},
    ),
    "name + failed_reason + source_queue": (
        DeadLetterFilter(name="send-email", failed_reason="ETIMEDOUT", source_queue="jobs"),
        {"1"},
    ),
    "source_queue": (DeadLetterFilter(source_queue="other"), {"6"}),
    "error_type": (DeadLetterFilter(error_type="TimeoutError"), {"1", "3", "6"}),
    "error_type is exact": (DeadLetterFilter(error_type="Timeout"), set()),
    "reason unrecoverable": (DeadLetterFilter(reason="unrecoverable"), {"4"}),
    "reason discarded": (DeadLetterFilter(reason="discarded"), {"5"}),
    "reason attempts_exhausted": (
        DeadLetterFilter(reason="attempts_exhausted"),
        {"1", "2", "3", "6"},
    ),
    "name_prefix": (DeadLetterFilter(name_prefix="send-"), {"1", "2", "4", "6"}),
    "payload_contains": (DeadLetterFilter(payload_contains='"card":"amex"'), {"5"}),
    "payload_contains + source_queue": (
        DeadLetterFilter(payload_contains="example.com", source_queue="jobs"),
        {"1", "2"},
    ),
    "failed_reason with regex characters is literal": (
        DeadLetterFilter(failed_reason="A.B(+100%)"),
        {"4"},
    ),
    "failed_reason dot is no wildcard": (DeadLetterFilter(failed_reason="a?b("), set()),
    "failed_reason percent is no lua class": (DeadLetterFilter(failed_reason="%d"), set()),
    "nothing matches all": (
        DeadLetterFilter(name="charge-card", error_type="ConnectionError"),
        set(),
    ),
}


@pytest.mark.parametrize(("flt", "expected"), FILTER_CASES.values(), ids=list(FILTER_CASES))
async def test_count_and_find_select_exactly_the_dead_letters_a_filter_describes(
    mixed_dlq: Queue, flt: DeadLetterFilter, expected: set[str]
) -> None:
    # Given the mixed DLQ / When it is searched
    count = await mixed_dlq.count_dead_letters(flt)
    found = await mixed_dlq.find_dead_letters(flt)

    # Then count and find agree on exactly the expected dead letters
    assert labels(found) == expected
    assert count == len(found) == len(expected)


@pytest.mark.parametrize(("flt", "expected"), FILTER_CASES.values(), ids=list(FILTER_CASES))
async def test_replay_all_touches_exactly_what_find_returned(
    mixed_dlq: Queue, queue: Queue, other: Queue, flt: DeadLetterFilter, expected: set[str]
) -> None:
    # Given what find says a filter matches
    found = await mixed_dlq.find_dead_letters(flt)

    # When the filter is replayed
    replayed = await mixed_dlq.replay_all_dead_letters(flt)

    # Then exactly those went back to their source queues and the rest stayed
    assert replayed == len(found)
    back_home = await queue.get_waiting() + await other.get_waiting()
    assert labels(back_home) == labels(found) == expected
    for job in await other.get_waiting():
        assert job.original_data["label"] == "6"
    assert await dlq_labels(mixed_dlq) == {"1", "2", "3", "4", "5", "6"} - expected


@pytest.mark.parametrize(("flt", "expected"), FILTER_CASES.values(), ids=list(FILTER_CASES))
async def test_purge_all_touches_exactly_what_count_announced(
    mixed_dlq: Queue, queue: Queue, flt: DeadLetterFilter, expected: set[str]
) -> None:
    # Given what count says a filter matches
    count = await mixed_dlq.count_dead_letters(flt)

    # When the filter is purged
    purged = await mixed_dlq.purge_dead_letters(flt)

    # Then exactly those were removed and the rest stayed
    assert purged == count == len(expected)
    assert await dlq_labels(mixed_dlq) == {"1", "2", "3", "4", "5", "6"} - expected
    assert await queue.get_waiting_count() == 0


async def test_since_and_until_bound_the_dead_lettering_time_in_ms_or_aware_datetimes(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    # Given one dead letter, then (once the clock has moved on) another
    await dead_letter(make_worker, queue, dlq, [named("job", "early")])
    early = (await dlq.get_dead_letter_jobs(0, 0))[0].dead_letter
    assert early is not None

    async def clock_moved() -> bool:
        return now_ms() > early.dead_lettered_at

    await wait_until(clock_moved)
    await dead_letter(make_worker, queue, dlq, [named("job", "late")])
    late = (await dlq.get_dead_letter_jobs(0, 0))[0].dead_letter
    assert late is not None
    assert late.dead_lettered_at > early.dead_lettered_at

    def at(ms: int) -> datetime.datetime:
        return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)

    # When / Then: bounds are inclusive, in ms or as aware datetimes
    cases = {
        DeadLetterFilter(since=late.dead_lettered_at): {"late"},
        DeadLetterFilter(until=early.dead_lettered_at): {"early"},
        DeadLetterFilter(until=late.dead_lettered_at - 1): {"early"},
        DeadLetterFilter(since=early.dead_lettered_at, until=late.dead_lettered_at): {
            "early",
            "late",
        },
        DeadLetterFilter(since=at(late.dead_lettered_at)): {"late"},
        DeadLetterFilter(until=at(early.dead_lettered_at)): {"early"},
        DeadLetterFilter(since=late.dead_lettered_at + 1): set(),
    }
    for flt, expected in cases.items():
        assert labels(await dlq.find_dead_letters(flt)) == expected, flt
        assert await dlq.count_dead_letters(flt) == len(expected), flt

    # And replaying the "since" window moves only the later one
    assert await dlq.replay_all_dead_letters(DeadLetterFilter(since=at(late.dead_lettered_at))) == 1
    assert labels(await queue.get_waiting()) == {"late"}
    assert await dlq_labels(dlq) == {"early"}


def test_filter_rejects_naive_datetimes_inverted_bounds_and_non_string_fields() -> None:
    # Given / When / Then
    with pytest.raises(ValueError, match="timezone-aware"):
        DeadLetterFilter(since=datetime.datetime(2024, 1, 1))
    with pytest.raises(ValueError, match="since must not be after"):
        DeadLetterFilter(since=2_000, until=1_000)
    with pytest.raises(TypeError, match=r"filter\.name"):
        DeadLetterFilter(name=123)  # type: ignore[arg-type]


async def test_bulk_operations_reject_batch_sizes_outside_1_to_5000(dlq: Queue) -> None:
    # Given / When / Then
    for size in (0, 5001):
        with pytest.raises(ValueError, match="batch_size"):
            await dlq.replay_all_dead_letters(batch_size=size)
        with pytest.raises(ValueError, match="batch_size"):
            await dlq.purge_dead_letters(batch_size=size)


async def test_bulk_operations_refuse_a_progress_callback_that_is_not_callable_before_a_write(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    # Given four dead letters
    await dead_letter(make_worker, queue, dlq, [named("order", str(n)) for n in range(4)])

    # When bulk operations are given a progress callback that cannot be called
    for operation in (dlq.replay_all_dead_letters, dlq.purge_dead_letters):
        with pytest.raises(TypeError, match="on_progress"):
            await operation(batch_size=1, on_progress="print")  # type: ignore[arg-type]

    # Then none of the dead letters was touched
    assert await dlq.count_dead_letters(DeadLetterFilter(status="pending")) == 4
    assert await queue.get_waiting_count() == 0


async def test_find_pages_matches_newest_first_with_limit_and_offset(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    # Given six dead letters, dead-lettered in order, half of them named "keep"
    jobs = [named("keep" if n % 2 else "drop", str(n)) for n in range(6)]
    await queue.add_bulk(jobs)
    worker = make_worker(fail_as_told, dead_letter_queue="jobs-dlq", concurrency=1)
    await wait_until(lambda: holds(dlq, 6), message="6 dead letters")
    await worker.close()

    # When the "keep" matches are read a page at a time
    flt = DeadLetterFilter(name="keep")
    pages = [await dlq.find_dead_letters(flt, limit=2, offset=o) for o in (0, 2)]

    # Then they come newest first
    assert [[j.original_data["label"] for j in page] for page in pages] == [["5", "3"], ["1"]]


async def test_small_batches_replay_every_interleaved_match_once(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    # Given eleven dead letters in which matches and non-matches alternate
    jobs = [named("keep" if n % 2 else "replay", str(n)) for n in range(11)]
    await dead_letter(make_worker, queue, dlq, jobs)
    progress: list[int] = []

    # When the matches are replayed two dead letters per batch
    replayed = await dlq.replay_all_dead_letters(
        DeadLetterFilter(name="replay"), batch_size=2, on_progress=progress.append
    )

    # Then each of the six was replayed once and progress grew to six
    assert replayed == 6
    assert sorted(j.original_data["label"] for j in await queue.get_waiting()) == sorted(
        str(n) for n in range(0, 11, 2)
    )
    assert await dlq_labels(dlq) == {str(n) for n in range(1, 11, 2)}
    assert progress == sorted(progress)
    assert progress[-1] == 6


async def test_bulk_operations_skip_plain_jobs_in_the_dlq_queue(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, raw: aioredis.Redis
) -> None:
    # Given a DLQ holding a plain job (no dead-letter metadata) between two dead letters
    await dead_letter(make_worker, queue, dlq, [named("job", "a")])
    plain = await dlq.add("plain", {"label": "plain"})
    before = await raw.hgetall(dlq.keys.job(plain.id))
    await dead_letter(make_worker, queue, dlq, [named("job", "b")])

    # When everything is counted, replayed and purged
    counted = await dlq.count_dead_letters()
    replayed = await dlq.replay_all_dead_letters(DeadLetterFilter(name="job"))
    purged = await dlq.purge_dead_letters()

    # Then only the dead letters were touched and the plain job waits as it was
    assert (counted, replayed, purged) == (2, 2, 0)
    assert labels(await queue.get_waiting()) == {"a", "b"}
    assert [j.id for j in await dlq.get_waiting()] == [plain.id]
    assert await raw.hgetall(dlq.keys.job(plain.id)) == before


# -- ten thousand dead letters -----------------------------------------------------------------


@pytest.mark.timeout(300)
async def test_replay_and_purge_ten_thousand_dead_letters_in_batches(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    # Given 10,000 dead letters, every other one named "replay-me"
    total = 10_000
    await queue.add_bulk(
        {"name": "replay-me" if n % 2 == 0 else "keep-me", "data": {"n": n}} for n in range(total)
    )
    worker = make_worker(fail_as_told, dead_letter_queue="jobs-dlq", concurrency=50)
    await wait_until(lambda: holds(dlq, total), timeout=120, message=f"{total} dead letters")
    await worker.close()
    flt = DeadLetterFilter(name="replay-me")
    assert await dlq.count_dead_letters(flt) == total // 2
    progress: list[int] = []

    async def report(done: int) -> None:
        progress.append(done)

    # When the "replay-me" half is replayed 1,000 dead letters per batch
    replayed = await dlq.replay_all_dead_letters(flt, batch_size=1000, on_progress=report)

    # Then exactly that half went back, reported batch by batch, and the other half stayed
    assert replayed == total // 2
    assert len(progress) > 1
    assert progress == sorted(set(progress))
    assert progress[-1] == total // 2
    assert await queue.get_waiting_count() == total // 2
    assert {j.name for j in await queue.get_waiting()} == {"replay-me"}
    assert await dlq.get_dead_letter_count() == total // 2
    assert await dlq.count_dead_letters(DeadLetterFilter(name="keep-me")) == total // 2
    assert await dlq.count_dead_letters(flt) == 0

    # When everything left is purged
    purged = await dlq.purge_dead_letters(batch_size=1000)

    # Then the DLQ is empty
    assert purged == total // 2
    assert await dlq.get_dead_letter_count() == 0


class ContestedQueue(Queue):
    """A DLQ client that a rival client beats to one dead letter of every batch: right after
    each batch is found, and before the replay or purge it feeds, the rival purges the newest
    match."""

    rival: Queue
    stolen: int = 0

    async def _steal(self, matches: list[tuple[str, str]]) -> None:
        if matches:
            await self.rival.purge_dead_letter(matches[-1][0])
            self.stolen += 1

    async def _replay_batch(self, matches: list[tuple[str, str]], *args: Any) -> int:
        await self._steal(matches)
        return await super()._replay_batch(matches, *args)

    async def _purge_batch(self, matches: list[tuple[str, str]], *args: Any) -> int:
        await self._steal(matches)
        return await super()._purge_batch(matches, *args)


@pytest.mark.parametrize("operation", ["replay_all_dead_letters", "purge_dead_letters"])
async def test_bulk_operation_that_loses_part_of_a_batch_to_a_rival_still_reaches_the_rest(
    queue: Queue,
    dlq: Queue,
    make_worker: MakeWorker,
    redis_url: str,
    prefix: str,
    operation: str,
) -> None:
    # Given ten dead letters and a client that loses one match of every batch to a rival
    await dead_letter(make_worker, queue, dlq, [named("job", str(n)) for n in range(10)])
    contested = ContestedQueue("jobs-dlq", connection=redis_url, prefix=prefix)
    contested.rival = dlq

    # When it handles every match of a filter (a walk, not a whole-store purge) three dead
    # letters per batch
    try:
        handled = await getattr(contested, operation)(DeadLetterFilter(name="job"), batch_size=3)
    finally:
        await contested.close()

    # Then everything the rival did not take was handled, and nothing is left behind
    assert contested.stolen > 1
    assert handled + contested.stolen == 10
    assert await dlq.get_dead_letter_count() == 0


class CountedQueue(Queue):
    """A DLQ client that counts its bulk acts on their way at once. With ``gate``, the first
    act waits until a second one has begun (so a run that never overlaps them hangs)."""

    gate: asyncio.Event | None = None
    running: int = 0
    most: int = 0
    begun: int = 0
    budgets: set[int] = set()

    async def _replay_batch(self, matches: list[tuple[str, str]], *args: Any) -> int:
        self.budgets = self.budgets | {args[2]}  # each act's budget per script call, in µs
        self.begun += 1
        self.running += 1
        self.most = max(self.most, self.running)
        try:
            if self.gate is not None:
                if self.begun == 1:  # a run that never overlaps two acts times out here
                    await asyncio.wait_for(self.gate.wait(), 10)
                else:
                    self.gate.set()
            return await super()._replay_batch(matches, *args)
        finally:
            self.running -= 1


@pytest.mark.parametrize("rate", [None, 10_000.0])
async def test_bulk_replay_overlaps_two_batches_at_most_and_none_with_a_rate(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, redis_url: str, prefix: str,
    rate: float | None,
) -> None:  # fmt: skip
    # Given ten dead letters, replayed two per batch by a client that counts its acts
    await dead_letter(make_worker, queue, dlq, [named("job", str(n)) for n in range(10)])
    counted = CountedQueue("jobs-dlq", connection=redis_url, prefix=prefix)
    counted.gate = asyncio.Event() if rate is None else None

    # When every one is replayed, with and without a rate
    try:
        replayed = await counted.replay_all_dead_letters(batch_size=2, rate=rate)
    finally:
        await counted.close()

    # Then all went back once; without a rate two batches were on their way at once, never
    # more, their calls sharing a lone call's budget; with one, one batch at a time, each
    # call with a lone call's budget
    assert replayed == 10
    assert await queue.get_waiting_count() == 10
    assert counted.begun == 5
    assert counted.most == (2 if rate is None else 1)
    assert counted.budgets == ({CALL_BUDGET_US // 2} if rate is None else {CALL_BUDGET_US})


async def test_concurrent_bulk_replays_and_purges_leave_no_dead_letter_behind(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, redis_url: str, prefix: str
) -> None:
    # Given 200 dead letters and four clients of the same DLQ
    total = 200
    await dead_letter(make_worker, queue, dlq, [named("job", str(n)) for n in range(total)])
    clients = [Queue("jobs-dlq", connection=redis_url, prefix=prefix) for _ in range(4)]

    # When two replay everything while two purge everything, all in tiny batches, so that
    # they keep finding entries of their batch already taken by a rival
    try:
        counts = await asyncio.gather(
            clients[0].replay_all_dead_letters(batch_size=2),
            clients[1].purge_dead_letters(batch_size=3),
            clients[2].replay_all_dead_letters(batch_size=3),
            clients[3].purge_dead_letters(batch_size=2),
        )
    finally:
        await asyncio.gather(*(c.close() for c in clients))

    # Then every dead letter was handled exactly once and none was left behind
    replayed = counts[0] + counts[2]
    assert sum(counts) == total
    assert await queue.get_waiting_count() == replayed
    assert await dlq.get_dead_letter_count() == 0


async def test_failed_reason_filter_matches_non_ascii_reasons_and_ignores_ascii_case(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    # Given a dead letter whose reason mixes upper-case ASCII and non-ASCII letters
    await dead_letter(make_worker, queue, dlq, [named("job", "fr", message="ÉCHEC du réseau")])

    # When / Then: the reason matches itself, and ASCII letters match in any case
    for text in ("ÉCHEC du réseau", "ÉCHEC", "Échec", "ÉcHeC", "RéSEAU", "du ré"):
        assert await dlq.count_dead_letters(DeadLetterFilter(failed_reason=text)) == 1, text
    assert await dlq.count_dead_letters(DeadLetterFilter(failed_reason="ECHEC")) == 0


@pytest.mark.xfail(
    reason="query_dead_letters.lua folds case with Lua's byte-wise string.lower, which knows "
    "ASCII only, so non-ASCII letters must match in case: 'ÉCHEC' is not found by 'échec'",
    strict=True,
)
async def test_failed_reason_filter_ignores_the_case_of_non_ascii_letters(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    # Given a dead letter whose reason has an upper-case non-ASCII letter
    await dead_letter(make_worker, queue, dlq, [named("job", "fr", message="ÉCHEC du réseau")])

    # When / Then: the reason matches a filter with that letter in lower case
    assert await dlq.count_dead_letters(DeadLetterFilter(failed_reason="échec")) == 1
