"""One dead letter for the whole story: replay makes it processing; the replayed job's
completion resolves it in the same script, a failure for good brings the same record back
(pending, or failed past max_replays) with every attempt kept; operators flag, reopen and
archive; settling catches replayed jobs that will never report back. Races included: rival
replays, a replay against an archive, a worker that dies holding the replayed job."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest
import redis.asyncio as aioredis

from lazarus import (
    DeadLetterFilter,
    Job,
    JobStateError,
    Queue,
    UnrecoverableError,
    Worker,
    _scripts,
)
from lazarus._connection import now_ms
from lazarus.dead_letter.lifecycle import check_actor

from .conftest import wait_until

MakeWorker = Callable[..., Worker]


async def reject(job: Job) -> None:
    raise UnrecoverableError(f"bad order {job.data}")


async def succeed(job: Job) -> Any:
    return job.data


async def one_dead_letter(queue: Queue, dlq: Queue, make_worker: MakeWorker) -> str:
    await queue.add("charge", {"n": 1})
    worker = make_worker(reject, dead_letter_queue=dlq.name)
    await wait_until(lambda: has_status(dlq, "pending", 1), message="a dead letter")
    await worker.close()
    [letter] = await dlq.get_dead_letter_jobs()
    return letter.id


async def has_status(dlq: Queue, status: str, count: int) -> bool:
    return await dlq.count_dead_letters(DeadLetterFilter(status=status)) == count


async def meta_of(dlq: Queue, dl_id: str) -> Any:
    letter = await dlq.peek_dead_letter(dl_id)
    assert letter is not None and letter.dead_letter is not None
    return letter.dead_letter


async def test_a_replayed_job_that_completes_resolves_its_dead_letter(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, raw: aioredis.Redis
) -> None:
    dl_id = await one_dead_letter(queue, dlq, make_worker)

    new_id = await dlq.replay_dead_letter(dl_id, actor="operator:ada", note="fixed")
    assert (await meta_of(dlq, dl_id)).status == "processing"
    make_worker(succeed, dead_letter_queue=dlq.name)
    await wait_until(lambda: has_status(dlq, "resolved", 1), message="resolved")

    meta = await meta_of(dlq, dl_id)
    assert [(c.from_, c.to, c.actor) for c in meta.timeline] == [
        ("pending", "processing", "operator:ada"), ("processing", "resolved", "policy"),
    ]  # fmt: skip
    assert meta.timeline[0].note == "fixed"
    assert meta.timeline[0].details == {"job": new_id, "queue": "jobs"}
    assert meta.timeline[1].details == {"job": new_id}
    assert (meta.replayed_by, meta.replay_job_id) == ("operator:ada", new_id)
    assert meta.last_replayed_at == meta.timeline[0].at
    assert await queue.get_job_state(new_id) == "completed"
    assert await dlq.get_dead_letter_count() == 0
    events = [f for _, f in await raw.xrange(dlq.keys.events) if f["event"] == "statusChanged"]
    assert [(e["from"], e["to"]) for e in events] == [
        ("pending", "processing"), ("processing", "resolved"),
    ]  # fmt: skip


async def test_a_replay_that_fails_again_comes_back_then_fails_past_max_replays(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    # Given a dead letter queue allowing two replays, and a worker that keeps failing
    dl_id = await one_dead_letter(queue, dlq, make_worker)
    await dlq.set_max_replays(2)
    assert await dlq.get_max_replays() == 2
    make_worker(reject, dead_letter_queue=dlq.name)

    # When it is replayed and fails: back to pending, the same record
    await dlq.replay_dead_letter(dl_id)
    await wait_until(lambda: has_status(dlq, "pending", 1), message="back to pending")
    meta = await meta_of(dlq, dl_id)
    assert (meta.status, meta.replay_count, len(meta.attempts)) == ("pending", 1, 2)

    # And again: past the limit it is failed (still live, still the same record)
    await dlq.replay_dead_letter(dl_id)
    await wait_until(lambda: has_status(dlq, "failed", 1), message="failed")
    meta = await meta_of(dlq, dl_id)
    assert (meta.replay_count, meta.attempts_made, len(meta.stacktrace)) == (2, 3, 3)
    assert [c.to for c in meta.timeline] == ["processing", "pending", "processing", "failed"]
    assert await dlq.get_dead_letter_count() == 1
    assert await dlq.count_dead_letters(DeadLetterFilter(status="processing")) == 0


async def test_replay_with_a_changed_payload_into_another_queue_resolves_from_there(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, redis_url: str, prefix: str
) -> None:
    dl_id = await one_dead_letter(queue, dlq, make_worker)
    seen: list[Any] = []

    async def review(job: Job) -> None:
        seen.append(job.data)

    new_id = await dlq.replay_dead_letter(
        dl_id, queue="review", data={"n": 2, "fixed": True}, actor="operator:bob"
    )
    make_worker(review, "review")
    await wait_until(lambda: has_status(dlq, "resolved", 1), message="resolved from review")

    assert seen == [{"n": 2, "fixed": True}]
    meta = await meta_of(dlq, dl_id)
    assert meta.replay_queue == "review"
    assert meta.timeline[0].details == {
        "job": new_id, "queue": "review", "replacedData": '{"n":1}',
    }  # fmt: skip
    letter = await dlq.peek_dead_letter(dl_id)
    assert letter is not None and letter.original_data == {"n": 2, "fixed": True}


@pytest.mark.parametrize("data", [{1, 2}, float("nan")])
async def test_a_changed_payload_that_is_not_json_is_refused_before_writing(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, data: Any
) -> None:
    dl_id = await one_dead_letter(queue, dlq, make_worker)
    with pytest.raises((TypeError, ValueError), match="data"):
        await dlq.replay_dead_letter(dl_id, data=data)
    assert (await meta_of(dlq, dl_id)).status == "pending"
    assert await queue.get_waiting_count() == 0


async def test_a_changed_payload_over_the_queues_size_limit_is_refused_before_writing(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, redis_url: str, prefix: str
) -> None:
    # Given a dead letter, and its dead letter queue opened with a 1 KiB payload limit
    dl_id = await one_dead_letter(queue, dlq, make_worker)
    small = Queue(dlq.name, connection=redis_url, prefix=prefix, max_payload_bytes=1024)

    # When an operator replays it with a 2 KiB payload
    try:
        with pytest.raises(ValueError, match="data is 2008 bytes encoded, over the limit of 1024"):
            await small.replay_dead_letter(dl_id, data={"x": "a" * 2_000})
    finally:
        await small.close()

    # Then nothing moved: the dead letter keeps its payload and nothing waits
    assert (await meta_of(dlq, dl_id)).status == "pending"
    letter = await dlq.peek_dead_letter(dl_id)
    assert letter is not None and letter.original_data == {"n": 1}
    assert await queue.get_waiting_count() == 0


async def test_a_replayed_job_failing_under_a_worker_without_dlq_returns_to_its_record(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    dl_id = await one_dead_letter(queue, dlq, make_worker)
    await dlq.replay_dead_letter(dl_id)

    make_worker(reject)  # no dead letter queue of its own
    await wait_until(lambda: has_status(dlq, "pending", 1), message="back to pending")

    assert (await meta_of(dlq, dl_id)).replay_count == 1
    assert await queue.get_failed_count() == 0


async def test_operator_actions_move_only_from_their_statuses(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    dl_id = await one_dead_letter(queue, dlq, make_worker)

    await dlq.flag_dead_letter(dl_id, actor="operator:ada", note="odd one")
    with pytest.raises(JobStateError, match="manual"):
        await dlq.flag_dead_letter(dl_id, actor="operator:ada")
    await dlq.archive_dead_letter(dl_id, actor="operator:ada", note="customer refunded")
    with pytest.raises(JobStateError):
        await dlq.replay_dead_letter(dl_id)  # archived: not replayable
    await dlq.reopen_dead_letter(dl_id, actor="operator:bob")
    await dlq.replay_dead_letter(dl_id)
    with pytest.raises(JobStateError, match="processing"):
        await dlq.archive_dead_letter(dl_id, actor="operator:bob")

    meta = await meta_of(dlq, dl_id)
    assert [(c.to, c.actor, c.note) for c in meta.timeline] == [
        ("manual", "operator:ada", "odd one"),
        ("archived", "operator:ada", "customer refunded"),
        ("pending", "operator:bob", None),
        ("processing", "operator:unnamed", None),
    ]


async def test_bulk_replay_takes_each_live_dead_letter_once(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    await queue.add_bulk([{"name": "charge", "data": {"n": i}} for i in range(6)])
    worker = make_worker(reject, dead_letter_queue=dlq.name)
    await wait_until(lambda: has_status(dlq, "pending", 6), message="six dead letters")
    await worker.close()
    ids = [j.id for j in await dlq.get_dead_letter_jobs()]
    await dlq.flag_dead_letter(ids[0], actor="policy")
    await dlq.archive_dead_letter(ids[1], actor="policy")

    assert await dlq.replay_all_dead_letters(dry_run=True) == 5
    assert await dlq.replay_all_dead_letters(actor="redriver", rule="timeouts") == 5
    assert await dlq.replay_all_dead_letters() == 0

    assert await queue.get_waiting_count() == 5
    assert await has_status(dlq, "processing", 5) and await has_status(dlq, "archived", 1)
    meta = await meta_of(dlq, ids[0])
    assert (meta.replayed_by, meta.replay_rule) == ("redriver", "timeouts")
    assert meta.timeline[-1].details["rule"] == "timeouts"


async def test_removing_a_replayed_job_puts_its_dead_letter_back_to_pending(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    dl_id = await one_dead_letter(queue, dlq, make_worker)
    new_id = await dlq.replay_dead_letter(dl_id)
    assert await dlq.settle_dead_letters() == 0  # its job waits: nothing to settle

    await queue.remove(new_id)
    assert await dlq.settle_dead_letters() == 0  # remove settled it already

    meta = await meta_of(dlq, dl_id)
    assert meta.status == "pending"
    assert meta.timeline[-1].note == "the replayed job was removed before it finished"
    assert await dlq.get_dead_letter_count() == 1


@pytest.mark.parametrize("sweeper_dlq", [None, "other-dlq"])
async def test_a_replayed_job_stalled_out_by_any_worker_goes_back_into_its_dead_letter(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, sweeper_dlq: str | None
) -> None:
    # Given a replayed job whose worker died holding it
    dl_id = await one_dead_letter(queue, dlq, make_worker)
    new_id = await dlq.replay_dead_letter(dl_id)
    await claim_and_die(queue, new_id)

    # When a worker of its queue with no dead letter queue, or another one, sweeps it out
    make_worker(succeed, lock_duration=300, stalled_interval=100, max_stalled_count=0,
                dead_letter_queue=sweeper_dlq)  # fmt: skip

    # Then it goes back into the dead letter it is a replay of, with the stall recorded:
    # not into the sweeper's dead letter queue, nor failed beside a pending dead letter
    async def back() -> bool:
        meta = await meta_of(dlq, dl_id)
        return meta.status == "pending" and meta.reason == "stalled"

    await wait_until(back, message="the stalled replay back in its dead letter")
    meta = await meta_of(dlq, dl_id)
    assert meta.replay_count == 1
    assert [a.outcome for a in meta.attempts][-1] == "stalled"
    assert await queue.get_failed_count() == 0 and await queue.get_job(new_id) is None
    assert await dlq.get_dead_letter_count() == 1
    if sweeper_dlq is not None:
        other = Queue(sweeper_dlq, connection=queue.client, prefix=queue.keys.prefix)
        assert await other.get_dead_letter_count() == 0
    assert await queue.client.hlen(queue.keys.moves) == 0


async def test_a_cleaned_replayed_job_is_settled_back_to_pending(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    dl_id = await one_dead_letter(queue, dlq, make_worker)
    await dlq.replay_dead_letter(dl_id)

    assert len(await queue.clean(0, state="waiting")) == 1
    assert await dlq.settle_dead_letters() == 1
    assert await dlq.settle_dead_letters() == 0

    meta = await meta_of(dlq, dl_id)
    assert meta.status == "pending"
    assert meta.timeline[-1].note == "the replayed job was removed before it finished"


async def test_a_worker_of_the_dlq_settles_a_cleaned_replay_on_its_own(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    dl_id = await one_dead_letter(queue, dlq, make_worker)
    await dlq.replay_dead_letter(dl_id)
    assert len(await queue.clean(0, state="waiting")) == 1

    make_worker(succeed, dead_letter_queue=dlq.name, stalled_interval=100)
    await wait_until(lambda: has_status(dlq, "pending", 1), message="settled by the sweep")

    assert (await meta_of(dlq, dl_id)).timeline[-1].actor == "policy"


async def claim_and_die(queue: Queue, job_id: str) -> None:
    """A worker claims ``job_id`` with a 1 ms lease and dies before it finishes."""
    reply = await _scripts.load("claim_jobs")(
        queue.client,
        [*queue.keys.group, queue.keys.reply("dead-worker", "claim")],
        [now_ms(), "dead-worker", 1, 1, 1000, "dead-call"],
    )
    assert reply[1][0] == job_id


async def test_a_worker_dying_before_resolution_leaves_it_to_the_next_attempt(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    # Given a replayed job whose worker died holding it (before completing)
    dl_id = await one_dead_letter(queue, dlq, make_worker)
    new_id = await dlq.replay_dead_letter(dl_id)
    await queue.client.hset(queue.keys.job(new_id), "atm", 2)  # a retry is allowed
    await claim_and_die(queue, new_id)
    assert (await meta_of(dlq, dl_id)).status == "processing"

    # When a live worker sweeps it back and completes it
    make_worker(
        succeed, dead_letter_queue=dlq.name, lock_duration=300, stalled_interval=100,
        max_stalled_count=1,
    )  # fmt: skip
    await wait_until(lambda: has_status(dlq, "resolved", 1), message="resolved")

    # Then the dead letter was resolved exactly once
    meta = await meta_of(dlq, dl_id)
    assert [c.to for c in meta.timeline] == ["processing", "resolved"]
    assert await queue.get_job_state(new_id) == "completed"


async def test_rival_replays_and_an_archive_of_one_dead_letter_leave_one_outcome(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, redis_url: str, prefix: str
) -> None:
    dl_id = await one_dead_letter(queue, dlq, make_worker)
    clients = [Queue(dlq.name, connection=redis_url, prefix=prefix) for _ in range(6)]
    try:
        results = await asyncio.gather(
            *(c.replay_dead_letter(dl_id) for c in clients[:5]),
            clients[5].archive_dead_letter(dl_id, actor="operator:ada"),
            return_exceptions=True,
        )
    finally:
        await asyncio.gather(*(c.close() for c in clients))

    new_ids = [r for r in results[:5] if isinstance(r, str)]
    archived = results[5] is None
    assert all(isinstance(r, (str, JobStateError)) or r is None for r in results), results
    assert len(new_ids) + int(archived) == 1
    assert await queue.get_waiting_count() == len(new_ids)
    meta = await meta_of(dlq, dl_id)
    assert meta.status == ("archived" if archived else "processing")
    assert len(meta.timeline) == 1


@pytest.mark.timeout(60)
async def test_a_worker_process_sigkilled_holding_a_replay_leaves_it_to_be_resolved_once(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, raw: aioredis.Redis, redis_url: str,
    prefix: str,
) -> None:  # fmt: skip
    # Given a dead letter replayed (with a payload that makes the processor hang) and taken by
    # a worker process, which is then SIGKILLed before it can finish
    dl_id = await one_dead_letter(queue, dlq, make_worker)
    marker = f"{prefix}:started"
    new_id = await dlq.replay_dead_letter(dl_id, data={"marker": marker})
    await queue.client.hset(queue.keys.job(new_id), "atm", 2)  # the stall is not terminal
    process = subprocess.Popen(
        [sys.executable, "-m", "lazarus.cli", "worker", "tests.procs:mark_then_hang",
         "--queue", "jobs", "--prefix", prefix, "--lock-duration", "500"],
        env={**os.environ, "LAZARUS_REDIS_URL": redis_url},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        await wait_until(lambda: raw.exists(marker), 20, "the subprocess to start the job")
        process.send_signal(signal.SIGKILL)
        process.wait(10)
    finally:
        if process.poll() is None:
            process.kill()
    assert (await meta_of(dlq, dl_id)).status == "processing"

    # When another worker sweeps the stalled replay and completes it
    make_worker(succeed, dead_letter_queue=dlq.name, stalled_interval=100)
    await wait_until(lambda: has_status(dlq, "resolved", 1), 20, "resolved")

    # Then the dead letter was resolved exactly once, by that job
    meta = await meta_of(dlq, dl_id)
    assert [(c.to, c.details.get("job")) for c in meta.timeline] == [
        ("processing", new_id), ("resolved", new_id),
    ]  # fmt: skip
    stored = await queue.get_job(new_id)
    assert stored is not None and stored.stalled_counter == 1


@pytest.mark.parametrize(
    "actor", ["", "operator", "operator:", "operator:two words", "operator:bob\n", "robot", 5]
)
def test_an_actor_that_is_not_redriver_policy_or_a_named_operator_is_refused(actor: object) -> None:
    with pytest.raises((TypeError, ValueError), match="actor"):
        check_actor(actor)
