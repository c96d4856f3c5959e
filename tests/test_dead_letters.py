"""Dead letter queues end to end: routing on terminal failure, metadata, events, inspection and
single replay, against a real Redis (validation cases VAL-01..VAL-15 of the DLQ spec, plus
payload fidelity, concurrent replay, placement on replay, stalls and explicit dead-lettering).

Bulk replay and purge, and the filters, live in ``test_dead_letter_bulk.py``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import redis.asyncio as aioredis

from lazarus import (
    Backoff,
    DeadLetterError,
    DeadLetterFilter,
    DeadLetterQueueOptions,
    Job,
    JobNotFoundError,
    JobStateError,
    NotADeadLetterError,
    Queue,
    QueueEvents,
    UnrecoverableError,
    Worker,
    _scripts,
)
from lazarus._connection import now_ms
from lazarus.dead_letter import replay
from lazarus.embedded import EmbeddedRedis
from lazarus.errors import ErrorCode

from .conftest import keys_of, wait_until

MakeWorker = Callable[..., Worker]


# -- helpers -----------------------------------------------------------------------------------


async def refuse_connection(job: Job) -> None:
    raise ConnectionRefusedError("Connection refused")


async def reject_as_unrecoverable(job: Job) -> None:
    raise UnrecoverableError("Invalid payload")


async def succeed(job: Job) -> str:
    return "ok"


async def holds(dlq: Queue, count: int) -> bool:
    return await dlq.get_dead_letter_count() == count


async def dead_letter_all(
    make_worker: MakeWorker,
    dlq: Queue,
    count: int,
    processor: Callable[[Job], Any] = reject_as_unrecoverable,
    queue_name: str = "jobs",
) -> None:
    """Run a worker on ``queue_name`` until ``dlq`` holds ``count`` dead letters, then stop it."""
    worker = make_worker(processor, queue_name, dead_letter_queue=dlq.name)
    await wait_until(lambda: holds(dlq, count), message=f"{count} dead letters in {dlq.name}")
    await worker.close()


async def only_dead_letter(dlq: Queue) -> Job:
    jobs = await dlq.get_dead_letter_jobs(0, -1)
    assert len(jobs) == 1, f"expected exactly one dead letter, found {len(jobs)}"
    return jobs[0]


def signal_on(worker: Worker, event: str, when: Callable[..., bool] = lambda *_: True) -> Any:
    """An asyncio.Event set the first time ``worker`` emits ``event`` with args that satisfy
    ``when``."""
    happened = asyncio.Event()

    def listener(*args: Any) -> None:
        if when(*args):
            happened.set()

    worker.on(event, listener)  # type: ignore[arg-type]
    return happened


@pytest.fixture
async def other(redis_url: str, prefix: str) -> AsyncIterator[Queue]:
    """A second source queue, ``other``, on this test's prefix."""
    q = Queue("other", connection=redis_url, prefix=prefix)
    yield q
    await q.close()


# -- routing on terminal failure (VAL-01..VAL-05) ----------------------------------------------


async def test_without_dead_letter_queue_an_exhausted_job_lands_in_failed_and_no_dlq_keys_exist(
    queue: Queue, make_worker: MakeWorker, raw: aioredis.Redis, prefix: str
) -> None:
    # Given a worker without a dead letter queue and a job with two attempts
    job = await queue.add("fail-job", {"n": 1}, attempts=2)
    worker = make_worker(refuse_connection)
    failed_for_good = signal_on(worker, "failed")

    # When the job fails twice
    await asyncio.wait_for(failed_for_good.wait(), 10)

    # Then it is in the source queue's failed set and no key of the DLQ exists
    assert await queue.get_job_state(job.id) == "failed"
    assert await queue.get_failed_count() == 1
    assert (await queue.get_job(job.id)).attempts_made == 2  # type: ignore[union-attr]
    assert {k for k in await keys_of(raw, prefix) if "{jobs-dlq}" in k} == set()


async def test_job_that_exhausts_its_retries_is_moved_to_the_dead_letter_queue(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    # Given a worker with a dead letter queue and a job with three attempts
    job = await queue.add("test-job", {"orderId": 123}, attempts=3)
    worker = make_worker(refuse_connection, dead_letter_queue="jobs-dlq")
    dead = signal_on(worker, "deadLettered")

    # When the job fails three times
    await asyncio.wait_for(dead.wait(), 10)

    # Then it is not in the failed set but waits in the DLQ with its metadata
    assert await queue.get_failed_count() == 0
    assert await queue.get_job_state(job.id) == "unknown"
    dead_letter = await only_dead_letter(dlq)
    assert dead_letter.data["orderId"] == 123
    meta = dead_letter.data["_dlqMeta"]
    assert meta["sourceQueue"] == "jobs"
    assert meta["failedReason"] == "Connection refused"
    assert meta["attemptsMade"] == 3
    assert meta["reason"] == "attempts_exhausted"


async def test_unrecoverable_error_sends_the_job_to_the_dlq_after_one_attempt(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    # Given a job with five attempts and a processor that raises UnrecoverableError
    await queue.add("email-job", {"to": "a@b.com"}, attempts=5)
    options = DeadLetterQueueOptions(queue_name="jobs-dlq")
    worker = make_worker(reject_as_unrecoverable, dead_letter_queue=options)
    dead = signal_on(worker, "deadLettered")

    # When the job is processed
    await asyncio.wait_for(dead.wait(), 10)

    # Then it is dead-lettered at once, as unrecoverable
    dead_letter = await only_dead_letter(dlq)
    assert dead_letter.data["_dlqMeta"]["attemptsMade"] == 1
    assert dead_letter.dead_letter is not None
    assert dead_letter.dead_letter.reason == "unrecoverable"
    assert dead_letter.dead_letter.failed_reason == "Invalid payload"
    assert dead_letter.dead_letter.error_type == "UnrecoverableError"


async def test_dead_letter_error_discards_the_job_at_once_whatever_attempts_remain(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    # Given a job with five attempts whose handler dead-letters it explicitly
    async def discard(job: Job) -> None:
        raise DeadLetterError("negative amount: needs a human")

    await queue.add("charge", {"amount": -5}, attempts=5)
    worker = make_worker(discard, dead_letter_queue="jobs-dlq")
    dead = signal_on(worker, "deadLettered")

    # When the job is processed
    await asyncio.wait_for(dead.wait(), 10)

    # Then it is in the DLQ after one attempt with reason "discarded"
    dead_letter = await only_dead_letter(dlq)
    meta = dead_letter.data["_dlqMeta"]
    assert meta["reason"] == "discarded"
    assert meta["attemptsMade"] == 1
    assert meta["failedReason"] == "negative amount: needs a human"
    assert meta["errorType"] == "DeadLetterError"


async def test_job_that_succeeds_on_its_last_attempt_completes_and_never_reaches_the_dlq(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    # Given a job with three attempts that fails twice, then succeeds
    runs = 0

    async def flaky(job: Job) -> str:
        nonlocal runs
        runs += 1
        if runs < 3:
            raise TimeoutError("transient")
        return "done"

    job = await queue.add("retry-job", {}, attempts=3, backoff={"type": "fixed", "delay": 10})
    worker = make_worker(flaky, dead_letter_queue="jobs-dlq")
    completed = signal_on(worker, "completed")

    # When it has run three times
    await asyncio.wait_for(completed.wait(), 10)

    # Then it is completed and the DLQ is empty
    assert runs == 3
    assert await queue.get_job_state(job.id) == "completed"
    assert await dlq.get_dead_letter_count() == 0


async def test_job_with_attempts_left_waits_delayed_and_reaches_the_dlq_only_when_exhausted(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    # Given a job with three attempts and a fixed backoff, and one worker slot, so that nothing
    # can claim the job while the worker awaits its "retrying" listener
    job = await queue.add("retry-job", {}, attempts=3, backoff={"type": "fixed", "delay": 100})
    states_while_retrying: list[tuple[str, int]] = []

    async def record_state(retried: Job, error: BaseException) -> None:
        state = await queue.get_job_state(job.id)
        states_while_retrying.append((state, await dlq.get_dead_letter_count()))

    worker = make_worker(refuse_connection, dead_letter_queue="jobs-dlq", concurrency=1)
    worker.on("retrying", record_state)
    dead = signal_on(worker, "deadLettered")

    # When the job fails on every attempt
    await asyncio.wait_for(dead.wait(), 10)

    # Then after each of the first two failures it was delayed, not dead-lettered
    assert states_while_retrying == [("delayed", 0), ("delayed", 0)]
    # And after the third it is in the DLQ
    assert (await only_dead_letter(dlq)).data["_dlqMeta"]["attemptsMade"] == 3


# -- metadata (VAL-06, VAL-07) -----------------------------------------------------------------


async def test_dead_letter_metadata_records_source_reason_stacktraces_attempts_and_times(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    # Given a job with two attempts and a fixed backoff
    job = await queue.add(
        "orders", {"orderId": 123}, attempts=2, backoff={"type": "fixed", "delay": 10}
    )
    before = now_ms()
    worker = make_worker(refuse_connection, dead_letter_queue="jobs-dlq")
    dead = signal_on(worker, "deadLettered")

    # When it fails twice with "Connection refused"
    await asyncio.wait_for(dead.wait(), 10)
    after = now_ms()

    # Then the dead letter keeps the payload and the whole failure history
    dead_letter = await only_dead_letter(dlq)
    data = dead_letter.data
    assert {k: v for k, v in data.items() if k != "_dlqMeta"} == {"orderId": 123}
    meta = data["_dlqMeta"]
    assert meta["sourceQueue"] == "jobs"
    assert meta["originalJobId"] == job.id
    assert meta["failedReason"] == "Connection refused"
    assert len(meta["stacktrace"]) == 2
    assert all("ConnectionRefusedError: Connection refused" in s for s in meta["stacktrace"])
    assert meta["attemptsMade"] == 2
    assert before <= meta["deadLetteredAt"] <= after
    assert meta["originalTimestamp"] == job.timestamp
    assert meta["originalOpts"]["attempts"] == 2
    assert meta["originalOpts"]["backoff"] == {"type": "fixed", "delay": 10}
    assert [a["attempt"] for a in meta["attempts"]] == [1, 2]
    assert {a["errorType"] for a in meta["attempts"]} == {"ConnectionRefusedError"}
    assert meta["replayCount"] == 0
    assert dead_letter.original_data == {"orderId": 123}
    assert dead_letter.id != job.id


async def test_dead_letter_keeps_the_original_job_name(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    # Given a job named "send-email"
    await queue.add("send-email", {"to": "a@b.com"})

    # When it fails terminally
    await dead_letter_all(make_worker, dlq, 1, refuse_connection)

    # Then the dead letter has the same name
    assert (await only_dead_letter(dlq)).name == "send-email"


# -- events (VAL-08) ---------------------------------------------------------------------------


async def test_dead_lettering_emits_dead_lettered_and_failed_on_source_and_waiting_on_dlq(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, redis_url: str, prefix: str
) -> None:
    # Given listeners on both queues' event streams and on the worker itself
    seen: dict[str, dict[str, str]] = {}
    arrived = {name: asyncio.Event() for name in ("deadLettered", "failed", "dlq-waiting")}

    def record(name: str) -> Callable[[dict[str, str], str], None]:
        def listener(args: dict[str, str], event_id: str) -> None:
            seen[name] = args
            arrived[name].set()

        return listener

    async with (
        QueueEvents("jobs", connection=redis_url, prefix=prefix) as source_events,
        QueueEvents("jobs-dlq", connection=redis_url, prefix=prefix) as dlq_events,
    ):
        source_events.on("deadLettered", record("deadLettered"))
        source_events.on("failed", record("failed"))
        dlq_events.on("waiting", record("dlq-waiting"))
        job = await queue.add("event-job", {}, attempts=1)
        worker = make_worker(refuse_connection, dead_letter_queue="jobs-dlq")
        local: dict[str, tuple[Any, ...]] = {}
        worker.on("failed", lambda *args: local.setdefault("failed", args))
        worker.on("deadLettered", lambda *args: local.setdefault("deadLettered", args))

        # When the job fails terminally
        await asyncio.wait_for(asyncio.gather(*(e.wait() for e in arrived.values())), 10)

    # Then the source stream announced both the failure and the move
    dead_letter = await only_dead_letter(dlq)
    assert seen["deadLettered"]["jobId"] == job.id
    assert seen["deadLettered"]["queue"] == "jobs"
    assert seen["deadLettered"]["deadLetterQueue"] == "jobs-dlq"
    assert seen["deadLettered"]["failedReason"] == "Connection refused"
    assert seen["deadLettered"]["deadLetterId"] == dead_letter.id
    assert seen["failed"]["jobId"] == job.id
    assert seen["failed"]["failedReason"] == "Connection refused"
    # And the DLQ stream announced the dead letter as waiting
    assert seen["dlq-waiting"]["jobId"] == dead_letter.id
    # And the worker's own callbacks fired with the job, the error and the dead letter's id
    failed_job, error = local["failed"]
    assert failed_job.id == job.id
    assert isinstance(error, ConnectionRefusedError)
    dead_job, dead_letter_id = local["deadLettered"]
    assert dead_job.id == job.id
    assert dead_letter_id == dead_letter.id


# -- worker configuration ----------------------------------------------------------------------


@pytest.mark.parametrize("dead_letter_queue", ["", "jobs", DeadLetterQueueOptions("jobs")])
async def test_worker_rejects_an_empty_dlq_name_or_its_own_queue_as_dlq(
    make_worker: MakeWorker, dead_letter_queue: Any
) -> None:
    # Given / When / Then: the worker refuses to be built
    with pytest.raises(ValueError, match="dead_letter_queue"):
        make_worker(succeed, dead_letter_queue=dead_letter_queue)


def test_dead_letter_queue_options_reject_an_empty_name_and_accept_a_queue_name() -> None:
    # Given / When / Then
    with pytest.raises(ValueError, match="non-empty"):
        DeadLetterQueueOptions(queue_name="")
    assert DeadLetterQueueOptions(queue_name="payments-dlq").queue_name == "payments-dlq"


# -- inspection (VAL-09..VAL-12) ---------------------------------------------------------------


async def test_dead_letter_count_is_the_number_of_dead_letters(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    # Given five jobs that fail for good
    await queue.add_bulk({"name": "job", "data": {"n": n}} for n in range(5))

    # When they are dead-lettered
    await dead_letter_all(make_worker, dlq, 5)

    # Then the DLQ counts five and the source queue is empty
    assert await dlq.get_dead_letter_count() == 5
    assert await queue.get_job_counts() == dict.fromkeys(
        ("waiting", "prioritized", "paused", "delayed", "active", "completed", "failed"), 0
    )


async def test_dead_letter_jobs_are_paginated_newest_first(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    # Given fifteen jobs dead-lettered one after another, in the order they were added
    await queue.add_bulk({"name": "job", "data": {"n": n}} for n in range(15))
    worker = make_worker(reject_as_unrecoverable, dead_letter_queue="jobs-dlq", concurrency=1)
    await wait_until(lambda: holds(dlq, 15), message="15 dead letters")
    await worker.close()

    # When the DLQ is read page by page
    first = await dlq.get_dead_letter_jobs(0, 9)
    second = await dlq.get_dead_letter_jobs(10, 14)
    beyond = await dlq.get_dead_letter_jobs(15, 19)

    # Then the pages hold ten and five dead letters, the newest first
    assert [j.original_data["n"] for j in first] == list(range(14, 4, -1))
    assert [j.original_data["n"] for j in second] == [4, 3, 2, 1, 0]
    assert beyond == []


async def test_peek_dead_letter_returns_the_dead_letter_with_its_metadata(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    # Given one dead letter
    job = await queue.add("peek-me", {"k": "v"})
    await dead_letter_all(make_worker, dlq, 1)
    listed = await only_dead_letter(dlq)

    # When it is peeked by id
    peeked = await dlq.peek_dead_letter(listed.id)

    # Then it carries the payload and the metadata
    assert peeked is not None
    assert peeked.data["k"] == "v"
    assert peeked.data["_dlqMeta"]["sourceQueue"] == "jobs"
    assert peeked.data["_dlqMeta"]["originalJobId"] == job.id
    assert peeked.dead_letter is not None
    assert peeked.dead_letter.source_queue == "jobs"


async def test_peek_dead_letter_of_a_missing_id_returns_none(dlq: Queue) -> None:
    # Given an empty DLQ / When / Then
    assert await dlq.peek_dead_letter("nonexistent") is None


# -- single replay (VAL-13..VAL-15) ------------------------------------------------------------


async def test_replay_puts_a_fresh_job_with_the_original_payload_and_options_in_the_source(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    # Given a dead letter from "jobs" that had three attempts and a backoff
    job = await queue.add(
        "order", {"orderId": 7}, attempts=3, backoff={"type": "fixed", "delay": 10}
    )
    await dead_letter_all(make_worker, dlq, 1, refuse_connection)
    dead_letter = await only_dead_letter(dlq)

    # When it is replayed
    new_id = await dlq.replay_dead_letter(dead_letter.id)

    # Then a new job with a new id waits in "jobs" with the original payload and options
    assert isinstance(new_id, str)
    assert new_id not in (dead_letter.id, job.id)
    assert await queue.get_job_state(new_id) == "waiting"
    replayed = await queue.get_job(new_id)
    assert replayed is not None
    assert replayed.name == "order"
    assert replayed.data == {"orderId": 7}
    assert replayed.dead_letter is None
    assert replayed.attempts_made == 0
    assert replayed.opts.attempts == 3
    assert replayed.opts.backoff == Backoff("fixed", 10)
    assert replayed.replay_count == 1
    # And the dead letter left the live ones: it waits, processing, for the new job
    assert await dlq.get_dead_letter_count() == 0
    kept = await dlq.peek_dead_letter(dead_letter.id)
    assert kept is not None and kept.dead_letter is not None
    assert (kept.dead_letter.status, kept.dead_letter.replay_job_id) == ("processing", new_id)
    assert replayed.replay_of == dead_letter.id
    assert replayed.replay_dead_letter_queue == dlq.name


async def test_replay_of_missing_dead_letter_raises_job_not_found(dlq: Queue) -> None:
    # Given an empty DLQ / When / Then
    with pytest.raises(JobNotFoundError):
        await dlq.replay_dead_letter("nonexistent")


async def test_replay_or_purge_of_a_plain_job_raises_not_a_dead_letter_and_leaves_it_alone(
    dlq: Queue, queue: Queue, raw: aioredis.Redis
) -> None:
    # Given a plain job (no dead-letter metadata) waiting in the DLQ queue
    plain = await dlq.add("plain", {"x": 1})
    before = await raw.hgetall(dlq.keys.job(plain.id))

    # When it is replayed or purged
    with pytest.raises(NotADeadLetterError):
        await dlq.replay_dead_letter(plain.id)
    with pytest.raises(NotADeadLetterError):
        await dlq.purge_dead_letter(plain.id)

    # Then it is untouched and nothing reached any source queue
    assert await raw.hgetall(dlq.keys.job(plain.id)) == before
    assert await dlq.get_job_state(plain.id) == "waiting"
    assert await queue.get_waiting_count() == 0


async def test_replay_can_override_attempts_and_priority(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, raw: aioredis.Redis
) -> None:
    # Given a dead letter of a job with one attempt and no priority
    await queue.add("job", {"n": 1})
    await dead_letter_all(make_worker, dlq, 1)
    dead_letter = await only_dead_letter(dlq)

    # When it is replayed with five attempts and priority 3
    new_id = await dlq.replay_dead_letter(dead_letter.id, attempts=5, priority=3)

    # Then the new job has those options and is prioritized
    replayed = await queue.get_job(new_id)
    assert replayed is not None
    assert (replayed.opts.attempts, replayed.opts.priority) == (5, 3)
    assert await raw.hget(queue.keys.job(new_id), "atm") == "5"
    assert await queue.get_job_state(new_id) == "prioritized"


# -- payload fidelity --------------------------------------------------------------------------

PAYLOADS = {
    "object": {"a": 1, "nested": {"empty_list": [], "empty_object": {}, "deep": [{}, []]}},
    "array": [1, "two", None, True, {"three": []}, [], {}],
    "string": 'héllo ✓ "quoted" \\ \n',
    "empty_string": "",
    "integer": 42,
    "float": 1.5,
    "negative": -17,
    "null": None,
    "true": True,
    "false": False,
    "beyond_2_53": 2**53 + 1,
    "beyond_2_64": 2**64 + 7,
    "negative_beyond_2_63": -(2**63) - 3,
    "big_ints_nested": {"ids": [2**53 + 1, 2**70], "obj": {"v": -(2**60) - 1}},
    "empty_list": [],
    "empty_object": {},
}


def exact(value: Any) -> str:
    """A rendering that tells True from 1 and 1.0 from 1."""
    return json.dumps(value)


@pytest.mark.parametrize("payload", PAYLOADS.values(), ids=list(PAYLOADS))
async def test_every_json_payload_round_trips_through_dead_lettering_and_replay(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, raw: aioredis.Redis, payload: Any
) -> None:
    # Given a job with this payload, as the producer stored it
    job = await queue.add("payload", payload)
    stored = await raw.hget(queue.keys.job(job.id), "data")

    # When it is dead-lettered
    await dead_letter_all(make_worker, dlq, 1)
    dead_letter = await only_dead_letter(dlq)

    # Then the dead letter shows the payload exactly, wrapped if it is not an object
    assert exact(dead_letter.original_data) == exact(payload)
    assert await raw.hget(dlq.keys.job(dead_letter.id), "data") == stored
    if isinstance(payload, dict):
        assert exact({k: v for k, v in dead_letter.data.items() if k != "_dlqMeta"}) == exact(
            payload
        )
    else:
        assert set(dead_letter.data) == {"_dlqValue", "_dlqMeta"}
        assert exact(dead_letter.data["_dlqValue"]) == exact(payload)
    assert dead_letter.data["_dlqMeta"]["sourceQueue"] == "jobs"

    # When it is replayed
    new_id = await dlq.replay_dead_letter(dead_letter.id)

    # Then the new job holds byte for byte what the producer stored
    assert await raw.hget(queue.keys.job(new_id), "data") == stored
    replayed = await queue.get_job(new_id)
    assert replayed is not None
    assert exact(replayed.data) == exact(payload)


# -- concurrent replay -------------------------------------------------------------------------


async def test_concurrent_replays_of_one_dead_letter_create_exactly_one_job(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, redis_url: str, prefix: str
) -> None:
    # Given one dead letter and ten clients, each with its own connection
    await queue.add("once", {"n": 1})
    await dead_letter_all(make_worker, dlq, 1)
    dead_letter = await only_dead_letter(dlq)
    clients = [Queue("jobs-dlq", connection=redis_url, prefix=prefix) for _ in range(10)]

    # When all of them replay it at the same time
    try:
        results = await asyncio.gather(
            *(c.replay_dead_letter(dead_letter.id) for c in clients), return_exceptions=True
        )
    finally:
        await asyncio.gather(*(c.close() for c in clients))

    # Then exactly one succeeds, the others find it replayed already (processing), and one
    # job exists in the source
    new_ids = [r for r in results if isinstance(r, str)]
    errors = [r for r in results if not isinstance(r, str)]
    assert len(new_ids) == 1
    assert len(errors) == 9
    assert all(isinstance(e, JobStateError) for e in errors), errors
    assert await queue.get_waiting_count() == 1
    assert [j.id for j in await queue.get_waiting()] == new_ids
    assert await dlq.get_dead_letter_count() == 0


# -- placement on replay -----------------------------------------------------------------------


async def test_replay_into_a_paused_source_queue_leaves_the_job_paused(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    # Given a dead letter whose source queue is then paused
    await queue.add("job", {"n": 1})
    await dead_letter_all(make_worker, dlq, 1)
    dead_letter = await only_dead_letter(dlq)
    await queue.pause()

    # When it is replayed
    new_id = await dlq.replay_dead_letter(dead_letter.id)

    # Then the new job is paused
    assert await queue.get_job_state(new_id) == "paused"
    assert (await queue.get_job_counts())["paused"] == 1


async def test_replay_of_a_prioritized_job_puts_it_back_prioritized(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    # Given a dead letter of a job added with priority 5
    await queue.add("urgent", {"n": 1}, priority=5)
    await dead_letter_all(make_worker, dlq, 1)
    dead_letter = await only_dead_letter(dlq)

    # When it is replayed
    new_id = await dlq.replay_dead_letter(dead_letter.id)

    # Then the new job is prioritized with the same priority
    assert await queue.get_job_state(new_id) == "prioritized"
    replayed = await queue.get_job(new_id)
    assert replayed is not None
    assert replayed.opts.priority == 5


async def test_replay_of_a_delayed_job_puts_it_back_delayed(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    # Given a dead letter of a job added with a delay (no worker runs after it died, so
    # nothing promotes the replayed job)
    await queue.add("later", {"n": 1}, delay=200)
    await dead_letter_all(make_worker, dlq, 1)
    dead_letter = await only_dead_letter(dlq)

    # When it is replayed
    before = now_ms()
    new_id = await dlq.replay_dead_letter(dead_letter.id)

    # Then the new job is delayed by the original delay
    assert await queue.get_job_state(new_id) == "delayed"
    due = await queue.client.zscore(queue.keys.delayed, new_id)
    assert due is not None
    assert due >= before + 200


async def test_replayed_job_that_dies_again_comes_back_with_replay_count_one(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    # Given a dead letter that is replayed
    await queue.add("doomed", {"n": 1})
    await dead_letter_all(make_worker, dlq, 1)
    first = await only_dead_letter(dlq)
    await dlq.replay_dead_letter(first.id)

    # When the replayed job fails for good again
    await dead_letter_all(make_worker, dlq, 1)

    # Then the same dead letter is back, pending, saying it was replayed once, with the
    # attempts of the first life and of the replay
    second = await only_dead_letter(dlq)
    assert second.id == first.id
    assert second.data["_dlqMeta"]["replayCount"] == 1
    assert second.dead_letter is not None
    assert second.dead_letter.replay_count == 1
    assert second.dead_letter.status == "pending"
    assert len(second.dead_letter.attempts) == 2 and len(second.dead_letter.stacktrace) == 2
    assert second.dead_letter.attempts_made == 2
    assert [(c.from_, c.to) for c in second.dead_letter.timeline] == [
        ("pending", "processing"), ("processing", "pending"),
    ]  # fmt: skip
    assert first.dead_letter is not None
    assert first.dead_letter.replay_count == 0


# -- stalls ------------------------------------------------------------------------------------


async def test_job_of_a_dead_worker_whose_stalls_are_exhausted_is_dead_lettered_as_stalled(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    # Given a job claimed by a worker that dies at once: a 1 ms lease that is never renewed
    job = await queue.add("stuck", {"n": 1}, attempts=3)
    claim = _scripts.load("claim_jobs")
    reply = await claim(
        queue.client,
        [*queue.keys.group, queue.keys.reply("dead-worker", "claim")],
        [now_ms(), "dead-worker", 1, 1, 1000, "dead-call"],
    )
    assert reply[1][0] == job.id
    assert await queue.get_job_state(job.id) == "active"

    # When a live worker that tolerates no stall sweeps the queue
    make_worker(
        succeed,
        dead_letter_queue="jobs-dlq",
        lock_duration=300,
        stalled_interval=100,
        max_stalled_count=0,
    )
    await wait_until(lambda: holds(dlq, 1), message="the stalled job in the DLQ")

    # Then the job was dead-lettered with reason "stalled", not completed by the live worker
    dead_letter = await only_dead_letter(dlq)
    assert dead_letter.dead_letter is not None
    assert dead_letter.dead_letter.reason == "stalled"
    assert dead_letter.dead_letter.original_job_id == job.id
    assert dead_letter.dead_letter.error_type == "Stalled"
    assert [a.outcome for a in dead_letter.dead_letter.attempts] == ["stalled"]
    assert dead_letter.dead_letter.attempts[0].worker == "dead-worker"
    assert await queue.get_job_state(job.id) == "unknown"
    assert await queue.get_completed_count() == 0


async def test_source_queue_and_dlq_from_two_queues_keep_their_own_names(
    queue: Queue, other: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    # Given jobs in two source queues that share one DLQ
    await queue.add("a", {"from": "jobs"})
    await other.add("b", {"from": "other"})

    # When both fail for good
    make_worker(reject_as_unrecoverable, "jobs", dead_letter_queue="jobs-dlq")
    make_worker(reject_as_unrecoverable, "other", dead_letter_queue="jobs-dlq")
    await wait_until(lambda: holds(dlq, 2), message="2 dead letters")

    # Then each dead letter names its own source queue
    sources = {
        j.original_data["from"]: j.data["_dlqMeta"]["sourceQueue"]
        for j in await dlq.get_dead_letter_jobs()
    }
    assert sources == {"jobs": "jobs", "other": "other"}


# -- a dead letter queue's own workers -----------------------------------------------------------


async def test_a_dead_letter_that_fails_for_good_on_a_dead_letter_queue_worker_moves_on_whole(
    redis_url: str, prefix: str, queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    # Given a dead letter, and a worker on the dead letter queue with a dead letter queue of
    # its own
    await queue.add("charge", {"n": 1})
    await dead_letter_all(make_worker, dlq, 1)
    last = Queue("jobs-dlq-dlq", connection=redis_url, prefix=prefix)

    # When that worker takes the dead letter, and it fails for good again
    await dead_letter_all(make_worker, last, 1, queue_name=dlq.name)

    # Then it is a dead letter of the last queue, with its payload, and in no other place
    moved = await only_dead_letter(last)
    assert moved.original_data == {"n": 1}
    assert await dlq.get_dead_letter_count() == 0
    assert await dlq.client.llen(dlq.keys.active) == 0
    await last.close()


async def test_a_replay_under_the_id_of_a_job_that_exists_leaves_both_alone(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    # Given a dead letter of job "order-1", and a new job added since under the same id
    await queue.add("charge", {"v": "first"}, job_id="order-1")
    await dead_letter_all(make_worker, dlq, 1)
    dead = await only_dead_letter(dlq)
    await queue.add("charge", {"v": "second"}, job_id="order-1")

    # When the dead letter is replayed under its original id (as OJS replays)
    [(new_id, result)] = await replay.replay(
        dlq.client, dlq.keys, dlq.max_events, queue.name, [(dead.id, replay.KEEP)],
        new_ids=["order-1"],
    )  # fmt: skip

    # Then the replay is refused: the job keeps its payload and its one place, and the dead
    # letter stays pending
    assert (new_id, result) == ("order-1", ErrorCode.JOB_EXISTS)
    job = await queue.get_job("order-1")
    assert job is not None and job.data == {"v": "second"}
    assert await queue.client.lpos(queue.keys.wait, "order-1", count=0) == [0]
    assert await dlq.count_dead_letters(DeadLetterFilter(status="pending")) == 1


@pytest.mark.timeout(60)
async def test_a_claim_on_a_dead_letter_queue_passes_an_index_entry_without_its_dead_letter() -> (
    None
):
    # Given, on a server of its own (a claim that looped would hold it for good), a dead
    # letter queue whose pending index names a dead letter that is gone, before a real one
    with EmbeddedRedis() as server:
        client = aioredis.Redis.from_url(server.url, decode_responses=True, socket_timeout=10)
        source, dlq = Queue("jobs", connection=client), Queue("jobs-dlq", connection=client)
        await source.add("charge", {"n": 1})
        worker = Worker("jobs", reject_as_unrecoverable, connection=client, block_timeout=0.2,
                        dead_letter_queue="jobs-dlq")  # fmt: skip
        await wait_until(lambda: holds(dlq, 1), message="a dead letter")
        await worker.close()
        [real] = await client.zrange(dlq.keys.dl_index("s", "pending"), 0, -1, withscores=True)
        await client.zadd(dlq.keys.dl_index("s", "pending"), {"gone": real[1] - 1})

        # When a worker of the dead letter queue claims
        taken: list[str] = []
        done = asyncio.Event()

        async def take(job: Job) -> None:
            taken.append(job.id)
            done.set()

        dlq_worker = Worker("jobs-dlq", take, connection=client, block_timeout=0.2)
        await asyncio.wait_for(done.wait(), 20)
        await dlq_worker.close()

        # Then it passed the stale entry, took the real dead letter, and the index is clean
        assert taken == [real[0]]
        assert await client.zrange(dlq.keys.dl_index("s", "pending"), 0, -1) == []
        await source.close()
        await dlq.close()
        await client.aclose()


async def test_a_dead_letter_cut_short_on_a_dead_letter_queue_worker_goes_back_into_the_store(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    # Given a dead letter that a worker of the dead letter queue runs, and that does not end
    await queue.add("charge", {"n": 1})
    await dead_letter_all(make_worker, dlq, 1)
    dead = await only_dead_letter(dlq)
    started = asyncio.Event()

    async def hang(job: Job) -> None:
        started.set()
        await asyncio.Event().wait()

    worker = make_worker(hang, dlq.name)
    await asyncio.wait_for(started.wait(), 10)
    assert await dlq.count_dead_letters(DeadLetterFilter(status="pending")) == 0

    # When that worker stops, handing it back
    await worker.close(timeout=0.1)

    # Then it is a pending dead letter of the store again, found as one, not a waiting job
    assert await dlq.count_dead_letters(DeadLetterFilter(status="pending")) == 1
    assert [j.id for j in await dlq.find_dead_letters(limit=10)] == [dead.id]
    assert await dlq.client.llen(dlq.keys.wait) == 0
    assert await dlq.get_job_state(dead.id) == "waiting"
