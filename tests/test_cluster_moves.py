"""Dead-lettering into a dead letter queue in another Redis Cluster slot: the two-step move
(src/lazarus/_moves.py), on a real local cluster. Exactly one dead letter, never none; the
source's events once; a move a crash interrupted is finished by the sweep, once."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis.asyncio.cluster import RedisCluster

from lazarus import Job, Queue, UnrecoverableError, Worker, _moves, _scripts
from lazarus._connection import connect, now_ms
from lazarus.dead_letter import replay

from .cluster import LocalCluster
from .conftest import wait_until


@pytest.fixture
async def client(redis_cluster: LocalCluster) -> AsyncIterator[RedisCluster]:
    value = connect(redis_cluster.url)
    assert isinstance(value, RedisCluster)
    await value.initialize()
    yield value
    await value.aclose()


@pytest.fixture
def cprefix() -> str:
    return f"m{uuid.uuid4().hex[:12]}"


@pytest.fixture
async def pair(client: RedisCluster, cprefix: str) -> AsyncIterator[tuple[Queue, Queue]]:
    """'jobs' and 'jobs-dlq': two slots, on two different masters."""
    queue = Queue("jobs", connection=client, prefix=cprefix)
    dlq = Queue("jobs-dlq", connection=client, prefix=cprefix)
    slots = [client.keyslot(q.keys.wait) for q in (queue, dlq)]
    nodes = {client.nodes_manager.get_node_from_slot(s).name for s in slots}
    assert len(set(slots)) == 2 and len(nodes) == 2
    yield queue, dlq
    await queue.close()
    await dlq.close()


async def reject(job: Job) -> None:
    await job.log("giving up")
    raise UnrecoverableError("bad payload")


async def first_dead_letter(client: RedisCluster, cprefix: str) -> tuple[str, str]:
    """Run a rejecting worker on 'jobs' until it dead-letters a job into 'jobs-dlq': that
    job's id and its dead letter's."""
    moved: list[tuple[str, str]] = []
    worker = Worker("jobs", reject, connection=client, prefix=cprefix,
                    dead_letter_queue="jobs-dlq", block_timeout=0.2)  # fmt: skip
    worker.on("deadLettered", lambda job, dl_id: moved.append((job.id, dl_id)))

    async def dead_lettered() -> bool:
        return bool(moved)

    await wait_until(dead_lettered, 20, "a job dead-lettered")
    await worker.close()
    return moved[0]


async def half_moved(client: RedisCluster, cprefix: str, monkeypatch: Any) -> tuple[str, str]:
    """As first_dead_letter, with a worker that dies between the two steps of its move (its
    process would be gone: the second step never runs)."""

    async def crash(*_args: Any) -> bool:
        raise ConnectionError("the process died here")

    monkeypatch.setattr(_moves, "finish", crash)
    try:
        return await first_dead_letter(client, cprefix)
    finally:
        monkeypatch.undo()


async def dead_letter_one(client: RedisCluster, cprefix: str, queue: Queue, data: Any) -> str:
    """Add a job to ``queue`` and let a worker dead-letter it; its dead letter's id."""
    await queue.add("n", data)
    return (await first_dead_letter(client, cprefix))[1]


async def _events(queue: Queue, kind: str) -> list[dict[str, str]]:
    entries: Any = await queue.client.xrange(queue.keys.events)
    return [fields for _id, fields in entries if fields.get("event") == kind]


async def test_a_job_dead_letters_into_a_queue_in_another_slot_once(
    client: RedisCluster, cprefix: str, pair: tuple[Queue, Queue]
) -> None:
    # Given twenty jobs on 'jobs' and a worker whose dead letter queue lives elsewhere
    queue, dlq = pair
    jobs = await queue.add_bulk([{"name": "n", "data": i} for i in range(20)])
    local: list[str] = []
    worker = Worker("jobs", reject, connection=client, prefix=cprefix,
                    dead_letter_queue="jobs-dlq", block_timeout=0.2, concurrency=4)  # fmt: skip
    worker.on("deadLettered", lambda _job, dl_id: local.append(dl_id))

    # When every job fails for good
    async def all_arrived() -> bool:
        return await dlq.get_dead_letter_count() == 20

    await wait_until(all_arrived, 20, "twenty dead letters")
    await worker.close()

    # Then each is one dead letter, with its payload and logs, under the id the worker named
    letters = await dlq.get_dead_letter_jobs()
    assert sorted(d.dead_letter.original_job_id for d in letters if d.dead_letter) == sorted(
        j.id for j in jobs
    )
    assert sorted(d.id for d in letters) == sorted(local)
    assert (await dlq.get_job_logs(letters[0].id)).logs == ["giving up"]
    # And the source emitted failed and deadLettered once per job, the target waiting once
    assert len(await _events(queue, "deadLettered")) == 20
    assert len(await _events(queue, "failed")) == 20
    assert len(await _events(dlq, "waiting")) == 20
    # And no move is left half-done, nor any job behind
    assert await client.hlen(queue.keys.moves) == 0
    assert await queue.get_job_counts() == {k: 0 for k in await queue.get_job_counts()}


async def test_a_move_interrupted_after_its_first_step_is_finished_by_the_sweep_once(
    client: RedisCluster, cprefix: str, pair: tuple[Queue, Queue], monkeypatch: Any
) -> None:
    # Given a worker that dies between the two steps of every move (its process would be
    # gone: the second step never runs)
    queue, dlq = pair
    job = await queue.add("n", {"v": 1})
    moved = [(await half_moved(client, cprefix, monkeypatch))[1]]
    # Then the job is in the moves hash only
    assert await client.hlen(queue.keys.moves) == 1
    assert await dlq.get_dead_letter_count() == 0
    assert await queue.get_job_state(job.id) == "unknown"

    # When sweeps run (two of them, one beside a late second step of the same move)
    raw = await client.hget(queue.keys.moves, moved[0])
    assert raw is not None
    finished = await asyncio.gather(
        _moves.sweep(client, queue.keys, max_events=1000, min_age_ms=0),
        _moves.arrive(client, cprefix, raw, 1000),
    )

    # Then the job is one dead letter, under the id the worker named
    assert await dlq.get_dead_letter_count() == 1
    (letter,) = await dlq.get_dead_letter_jobs()
    assert letter.id == moved[0] and letter.data["v"] == 1
    assert finished[0] in (0, 1) and await client.hlen(queue.keys.moves) == 0
    # And a step two sent again, even after the dead letter is gone, adds nothing
    await dlq.purge_dead_letters()
    holder, added = await _moves.arrive(client, cprefix, raw, 1000)
    assert (holder, added) == (moved[0], False)
    assert await dlq.get_dead_letter_count() == 0


async def test_a_job_stalled_too_often_moves_to_a_dead_letter_queue_in_another_slot(
    client: RedisCluster, cprefix: str, pair: tuple[Queue, Queue]
) -> None:
    # Given a job claimed by a worker that vanished (its lease of 50 ms lapses)
    queue, dlq = pair
    job = await queue.add("n", {"v": 2})
    claim_keys = [*queue.keys.group, queue.keys.reply("gone", "claim")]
    claimed = await _scripts.load("claim_jobs")(
        client, claim_keys, [now_ms(), "gone", 50, 1, 1000, uuid.uuid4().hex]
    )
    assert len(claimed) == 2

    # When a worker with no stall allowed sweeps the queue
    worker = Worker("jobs", reject, connection=client, prefix=cprefix,
                    dead_letter_queue="jobs-dlq", block_timeout=0.2, max_stalled_count=0,
                    stalled_interval=100)  # fmt: skip

    async def arrived() -> bool:
        return await dlq.get_dead_letter_count() == 1

    await wait_until(arrived, 20, "the stalled job's dead letter")
    await worker.close()

    # Then it is one dead letter of reason 'stalled', and nothing is left in between
    (letter,) = await dlq.get_dead_letter_jobs()
    assert letter.dead_letter is not None
    assert (letter.dead_letter.original_job_id, letter.dead_letter.reason) == (job.id, "stalled")
    assert await client.hlen(queue.keys.moves) == 0


async def test_a_replay_that_completes_before_its_move_is_cleared_resolves_its_dead_letter(
    client: RedisCluster, cprefix: str, pair: tuple[Queue, Queue]
) -> None:
    # Given a dead letter of 'jobs' in 'jobs-dlq', in another slot
    queue, dlq = pair
    dead = [await dead_letter_one(client, cprefix, queue, {"v": 3})]
    # And its replay's first two steps done, but not the third (the replayer is slow)
    new_id = uuid.uuid4().hex
    (moving,) = await _scripts.load("replay_out")(
        client,
        [dlq.keys.dl, dlq.keys.events, dlq.keys.meta, dlq.keys.moves, dlq.keys.job(dead[0])],
        [now_ms(), 1000, "jobs", "jobs-dlq", "operator:test", "", "", 2000, "", "", dead[0], new_id,
         "", "", "", ""],
    )  # fmt: skip
    assert moving == "moving"
    raw = await client.hget(dlq.keys.moves, "replay:" + new_id)
    await _moves.arrive(client, cprefix, raw, 1000)

    # When a worker completes the replayed job
    async def succeed(job: Job) -> str:
        return "fixed"

    worker = Worker("jobs", succeed, connection=client, prefix=cprefix,
                    dead_letter_queue="jobs-dlq", block_timeout=0.2)  # fmt: skip

    # Then its dead letter is resolved at once, the move's entry notwithstanding
    async def resolved() -> bool:
        letter = await dlq.peek_dead_letter(dead[0])
        return (
            letter is not None
            and letter.dead_letter is not None
            and (letter.dead_letter.status == "resolved")
        )

    await wait_until(resolved, 10, "the dead letter resolved")
    await worker.close()
    assert await queue.get_job_state(new_id) == "completed"


async def test_a_replay_removed_on_completion_resolves_its_dead_letter_in_another_slot(
    client: RedisCluster, cprefix: str, pair: tuple[Queue, Queue], monkeypatch: Any
) -> None:
    # Given a dead letter, in another slot, of a job removed on completion, replayed; and a
    # worker's sweep that settles it between the job's completion and its resolution
    queue, dlq = pair
    await queue.add("n", {"v": 4}, remove_on_complete=True)
    dl_id = (await first_dead_letter(client, cprefix))[1]
    new_id = await dlq.replay_dead_letter(dl_id)
    resolve = _moves.resolve

    async def swept_first(*args: Any) -> bool:
        await _moves.settle(client, dlq.keys, [(dl_id, new_id, queue.keys)], 1000)
        return await resolve(*args)

    monkeypatch.setattr(_moves, "resolve", swept_first)

    # When a worker completes the replayed job (which goes at once)
    async def succeed(job: Job) -> str:
        return "fixed"

    worker = Worker("jobs", succeed, connection=client, prefix=cprefix,
                    dead_letter_queue="jobs-dlq", block_timeout=0.2)  # fmt: skip

    # Then its dead letter is resolved, not taken for removed and sent back to pending
    async def settled() -> bool:
        letter = await dlq.peek_dead_letter(dl_id)
        return letter is not None and letter.dead_letter is not None \
            and letter.dead_letter.status != "processing"  # fmt: skip

    await wait_until(settled, 10, "the dead letter settled")
    await worker.close()
    letter = await dlq.peek_dead_letter(dl_id)
    assert letter is not None and letter.dead_letter is not None
    assert letter.dead_letter.status == "resolved"
    assert await queue.get_job_state(new_id) == "unknown"


async def test_the_next_job_is_renewed_while_a_move_to_another_slot_is_slow(
    client: RedisCluster, cprefix: str, pair: tuple[Queue, Queue], monkeypatch: Any
) -> None:
    # Given a job that fails for good and one after it, and a worker with 600 ms leases whose
    # moves to the dead letter queue's slot do not get their second step through
    queue, _ = pair
    first, after = await queue.add_bulk([{"name": "n", "data": i} for i in range(2)])
    stuck = asyncio.Event()

    async def never_arrives(*args: Any) -> Any:
        stuck.set()
        await asyncio.Event().wait()

    monkeypatch.setattr(_moves, "arrive", never_arrives)
    release = asyncio.Event()

    async def run(job: Job) -> str:
        if job.id == first.id:
            raise UnrecoverableError("bad payload")
        await release.wait()  # longer than a lease: it must be renewed
        return "done"

    worker = Worker("jobs", run, connection=client, prefix=cprefix, concurrency=1,
                    lock_duration=600, dead_letter_queue="jobs-dlq", block_timeout=0.2)  # fmt: skip

    # When the first is dead-lettered (its outcome claiming the next) and the move hangs
    await asyncio.wait_for(stuck.wait(), 10)
    leased = await client.zscore(queue.keys.leases, after.id)

    # Then the next job runs, its lease renewed all the same, and it completes once
    async def renewed() -> bool:
        return (await client.zscore(queue.keys.leases, after.id) or 0) > (leased or 0)

    await wait_until(renewed, 10, "the next job's lease renewed")
    release.set()
    await wait_until(lambda: _completed(queue, after.id), 10, "the next job completed")
    await worker.close()
    stored = await queue.get_job(after.id)
    assert stored is not None and stored.attempts_started == 1


async def _completed(queue: Queue, job_id: str) -> bool:
    return await queue.get_job_state(job_id) == "completed"


async def test_a_replay_on_its_way_back_to_the_dead_letter_queue_is_not_settled_as_removed(
    client: RedisCluster, cprefix: str, pair: tuple[Queue, Queue], monkeypatch: Any
) -> None:
    # Given a dead letter of 'jobs' in 'jobs-dlq' (another slot), replayed
    queue, dlq = pair
    dead = [await dead_letter_one(client, cprefix, queue, {"v": 4})]
    new_id = await dlq.replay_dead_letter(dead[0])
    # And its replayed job failed again, between the two steps of its move back (the job
    # has left 'jobs', and has not reached 'jobs-dlq' yet)
    back, _ = await half_moved(client, cprefix, monkeypatch)
    assert back == new_id and await queue.get_job_state(new_id) == "unknown"

    # When the dead letter queue's processing dead letters are settled meanwhile
    settled = await dlq.settle_dead_letters()

    # Then the dead letter still waits for its job, which is not taken for removed
    assert settled == 0
    letter = await dlq.peek_dead_letter(dead[0])
    assert letter is not None and letter.dead_letter is not None
    assert letter.dead_letter.status == "processing"
    # And once the move is finished, the job is back in that one dead letter
    assert await _moves.sweep(client, queue.keys, max_events=1000, min_age_ms=0) == 1
    (again,) = await dlq.get_dead_letter_jobs()
    assert again.id == dead[0] and again.dead_letter is not None
    assert (again.dead_letter.status, again.dead_letter.replay_count) == ("pending", 1)
    assert await client.hlen(queue.keys.moves) == 0


async def arrived_not_cleared(client: RedisCluster, cprefix: str, monkeypatch: Any) -> str:
    """As first_dead_letter, with a worker that dies between the second and third steps of
    its move (the job has arrived, the move's entry is left for a sweep); the move's id."""
    finishing: list[str] = []

    async def crash(client: Any, source: Any, move_id: str, max_events: int) -> bool:
        finishing.append(move_id)
        raw = await client.hget(source.moves, move_id)
        await _moves.arrive(client, source.prefix, str(raw), max_events)
        raise ConnectionError("the process died here")

    monkeypatch.setattr(_moves, "finish", crash)
    try:
        await first_dead_letter(client, cprefix)
    finally:
        monkeypatch.undo()
    return finishing[0]


async def test_finishing_an_old_move_keeps_the_mark_of_a_newer_move_of_the_same_job_id(
    client: RedisCluster, cprefix: str, pair: tuple[Queue, Queue], monkeypatch: Any
) -> None:
    # Given a job of 'jobs' dead-lettered into 'jobs-dlq' (another slot) by a worker that died
    # before it cleared its move's entry (the dead letter arrived; a sweep clears the entry)
    queue, dlq = pair
    job = await queue.add("n", {"v": 5})
    old_move = await arrived_not_cleared(client, cprefix, monkeypatch)
    # And its dead letter replayed under the job's original id (as an OJS retry does)
    await replay.replay(client, dlq.keys, 1000, "jobs", [(old_move, replay.KEEP)],
                        new_ids=[job.id])  # fmt: skip
    # And that job failed again, between the two steps of its move back (the job has left
    # 'jobs', and has not reached 'jobs-dlq' yet)
    await half_moved(client, cprefix, monkeypatch)
    assert await client.hexists(queue.keys.moves, _moves.IN_TRANSIT + job.id)

    # When the old move's entry is cleared (as a sweep does; the new move is too young for it)
    assert await _moves.finish(client, queue.keys, old_move, 1000)
    # And the dead letter queue's processing dead letters are settled meanwhile
    settled = await dlq.settle_dead_letters()

    # Then the dead letter still waits for its job, which the new move still marks in transit
    assert settled == 0
    assert await client.hexists(queue.keys.moves, _moves.IN_TRANSIT + job.id)
    letter = await dlq.peek_dead_letter(old_move)
    assert letter is not None and letter.dead_letter is not None
    assert letter.dead_letter.status == "processing"
    # And once the new move is finished, the job is back in that one dead letter
    assert await _moves.sweep(client, queue.keys, max_events=1000, min_age_ms=0) == 1
    (back,) = await dlq.get_dead_letter_jobs()
    assert back.id == old_move and back.dead_letter is not None
    assert (back.dead_letter.status, back.dead_letter.replay_count) == ("pending", 1)
    assert await client.hlen(queue.keys.moves) == 0


async def test_a_second_replay_under_the_same_id_into_another_slot_runs_again(
    client: RedisCluster, cprefix: str, pair: tuple[Queue, Queue]
) -> None:
    # Given a dead letter replayed under its job's original id (as OJS retries), which failed
    # for good again and is back in its dead letter
    queue, dlq = pair
    job = await queue.add("n", {"v": 7})
    _, dead = await first_dead_letter(client, cprefix)
    first = await replay.replay(client, dlq.keys, 1000, "jobs", [(dead, replay.KEEP)],
                                new_ids=[job.id])  # fmt: skip
    assert first == [(job.id, "waiting")]
    await first_dead_letter(client, cprefix)
    letter = await dlq.peek_dead_letter(dead)
    assert letter is not None and letter.dead_letter is not None
    assert letter.dead_letter.status == "pending"

    # When it is replayed under that id once more
    second = await replay.replay(client, dlq.keys, 1000, "jobs", [(dead, replay.KEEP)],
                                 new_ids=[job.id])  # fmt: skip

    # Then the job is in its queue again (not taken for the first replay's move, seen already)
    assert second == [(job.id, "waiting")]
    assert await queue.get_job_state(job.id) == "waiting"
    assert await dlq.settle_dead_letters() == 0
    letter = await dlq.peek_dead_letter(dead)
    assert letter is not None and letter.dead_letter is not None
    assert letter.dead_letter.status == "processing"


async def test_settling_finishes_a_replay_into_another_slot_that_a_crash_cut_short(
    client: RedisCluster, cprefix: str, pair: tuple[Queue, Queue]
) -> None:
    # Given a dead letter whose replay into another slot did its first step three seconds
    # ago, and whose replayer died before the second (no worker names 'jobs-dlq' to sweep it)
    queue, dlq = pair
    dead = await dead_letter_one(client, cprefix, queue, {"v": 4})
    new_id = uuid.uuid4().hex
    (moving,) = await _scripts.load("replay_out")(
        client,
        [dlq.keys.dl, dlq.keys.events, dlq.keys.meta, dlq.keys.moves, dlq.keys.job(dead)],
        [now_ms() - 3000, 1000, "jobs", "jobs-dlq", "operator:test", "", "", 2000, "", "",
         dead, new_id, "", "", "", ""],
    )  # fmt: skip
    assert moving == "moving"

    # When the dead letter queue is settled (as the redrive service does, periodically)
    settled = await dlq.settle_dead_letters()

    # Then the replayed job is in its queue, its dead letter waits for it, nothing in between
    assert settled == 0
    assert await queue.get_job_state(new_id) == "waiting"
    letter = await dlq.peek_dead_letter(dead)
    assert letter is not None and letter.dead_letter is not None
    assert (letter.dead_letter.status, letter.dead_letter.replay_job_id) == ("processing", new_id)
    assert await client.hlen(dlq.keys.moves) == 0
