"""An add sent again after a dropped connection lost its reply adds nothing twice, even when
the job its first send added ran and was deleted in between: a job deleted soon after its add
leaves a tombstone that the second send finds (``includes/job_logs.lua``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError

from lazarus import Job, Queue, Worker, _scripts
from lazarus._connection import now_ms
from lazarus._keys import QueueKeys
from lazarus._scripts import cluster

from .conftest import ON_CLUSTER, wait_until
from .faults import ReplyDropper, script_ready
from .scripts.test_transitions import WINDOW_MS


class Refused(Exception):
    """What a failing processor raises."""


@pytest.fixture
async def add_script(raw: aioredis.Redis) -> bytes:
    """What names ``add_jobs`` in its calls, loaded beforehand (else the reply dropped could
    be a refusal for want of it)."""
    return await script_ready(raw, _scripts.load("add_jobs"))


@pytest.fixture
async def queues(redis_url: str, prefix: str) -> AsyncIterator[Callable[..., Queue]]:
    """Queues of this test's prefix, on ``redis_url`` or another URL; closed at the end."""
    made: list[Queue] = []

    def build(name: str = "jobs", url: str = redis_url) -> Queue:
        made.append(Queue(name, connection=url, prefix=prefix))
        return made[-1]

    yield build
    for queue in made:
        await queue.close()


def gone_key(prefix: str, job_id: str) -> str:
    """The tombstone of job ``job_id`` of queue ``jobs``."""
    return QueueKeys(prefix, "jobs").gone(job_id)


async def run_until(worker: Worker, condition: Callable[[], Awaitable[bool]]) -> None:
    """Run ``worker`` until ``condition`` holds, then close it."""
    task = asyncio.create_task(worker.run())
    try:
        await wait_until(condition)
    finally:
        await worker.close(timeout=5)
        await task


async def nothing_left(queue: Queue) -> bool:
    counts = await queue.get_job_counts()
    return not any(counts[state] for state in ("waiting", "active", "delayed", "prioritized"))


@pytest.mark.skipif(ON_CLUSTER, reason="the proxy stands in front of one Redis")
@pytest.mark.parametrize("ending", ["completed and removed", "dead-lettered"])
async def test_an_add_sent_again_after_its_job_ran_and_left_adds_it_no_more(
    ending: str,
    redis_url: str,
    prefix: str,
    add_script: bytes,
    make_worker: Callable[..., Worker],
    queues: Callable[..., Queue],
) -> None:
    # Given a producer whose connection drops after its add ran and before its reply came,
    # and a worker that meanwhile runs the job, which leaves the queue: completed and removed
    # (remove_on_complete), or failed for good into a dead letter queue
    runs: list[str] = []
    direct, dlq = queues(), queues("jobs-dlq")

    async def process(job: Job) -> None:
        runs.append(job.id)
        if ending == "dead-lettered":
            raise Refused("no")

    async def ran_and_left() -> bool:
        return runs == ["j1"] and await direct.get_job("j1") is None

    async def meanwhile() -> None:
        await run_until(make_worker(process, dead_letter_queue="jobs-dlq"), ran_and_left)

    async with ReplyDropper(redis_url, add_script, meanwhile) as proxy:
        producer = queues(url=proxy.url)
        proxy.armed = True

        # When the producer adds the job
        job = await producer.add("mail", {"to": "a"}, job_id="j1", remove_on_complete=True,
                                 attempts=1)  # fmt: skip

    # Then the add went twice and the job ran once: the second send added nothing, so nothing
    # waits to run it again, and the failure left one dead letter
    assert proxy.dropped == 1
    assert (job.id, runs) == ("j1", ["j1"])
    assert await direct.get_job("j1") is None
    assert await nothing_left(direct)
    letters = await dlq.find_dead_letters(limit=10)
    assert len(letters) == (1 if ending == "dead-lettered" else 0)


async def test_a_new_add_of_the_id_of_a_job_just_removed_adds_it(
    prefix: str,
    raw: aioredis.Redis,
    make_worker: Callable[..., Worker],
    queues: Callable[..., Queue],
) -> None:
    # Given a job that ran and was removed a moment ago, which left its tombstone
    queue = queues()
    runs: list[str] = []

    async def process(job: Job) -> None:
        runs.append(job.id)

    async def ran() -> bool:
        return len(runs) == 1 and await queue.get_job("j1") is None

    await queue.add("mail", {}, job_id="j1", remove_on_complete=True)
    await run_until(make_worker(process), ran)
    assert 0 < await raw.pttl(gone_key(prefix, "j1")) <= WINDOW_MS

    # When the id is added again by a new add (not a second send of the first)
    job = await queue.add("mail", {"n": 2}, job_id="j1")

    # Then it is added, and runs
    assert await queue.get_job_state("j1") == "waiting"
    await run_until(make_worker(process), lambda: nothing_left(queue))
    assert (job.data, runs) == ({"n": 2}, ["j1", "j1"])


async def test_a_job_stalled_out_soon_after_its_add_leaves_a_tombstone(
    prefix: str, raw: aioredis.Redis, queues: Callable[..., Queue]
) -> None:
    # Given a job claimed by a worker that died at once, whose stalls end in its discard
    queue = queues()
    await queue.add("mail", {}, job_id="j1", on_exhaustion="discard")
    k = queue.keys
    claim = [now_ms(), "dead", 30_000, 1, 100, "c1"]
    await _scripts.load("claim_jobs")(raw, [*k.group, k.reply("dead", "claim")], claim)
    await raw.zadd(k.leases, {"j1": 0})  # its lease lapsed

    # When a sweep that allows no stall takes it back
    sweep = [now_ms(), 0, 100, "jobs", "", 100, 0, 4000]
    assert await _scripts.load("sweep_stalled")(raw, [*k.group, k.failed], sweep)

    # Then it left the queue, and its tombstone
    assert await queue.get_job("j1") is None
    assert 0 < await raw.pttl(gone_key(prefix, "j1")) <= WINDOW_MS


LEAVINGS: dict[str, tuple[dict[str, Any], bool, Callable[[Queue], Awaitable[Any]] | None]] = {
    # how the job leaves: its options, whether its run fails, what removes it after the run
    "removed on completion": ({"remove_on_complete": True}, False, None),
    "pushed out by a newer job (count)": ({"remove_on_complete": 0}, False, None),
    "removed on failure": ({"remove_on_fail": True}, True, None),
    "discarded": ({"on_exhaustion": "discard"}, True, None),
    "dead-lettered": ({}, True, None),
    "removed by hand": ({}, False, lambda q: q.remove("j1")),
    "cleaned": ({}, False, lambda q: q.clean(0, state="completed")),
}


@pytest.mark.parametrize("leaving", list(LEAVINGS))
async def test_every_way_a_job_leaves_soon_after_its_add_leaves_a_tombstone(
    leaving: str,
    prefix: str,
    raw: aioredis.Redis,
    make_worker: Callable[..., Worker],
    queues: Callable[..., Queue],
) -> None:
    # Given a job that runs at once and leaves its queue
    options, fails, remove = LEAVINGS[leaving]
    queue = queues()
    runs: list[str] = []

    async def process(job: Job) -> None:
        runs.append(job.id)
        if fails:
            raise Refused("no")

    await queue.add("mail", {}, job_id="j1", attempts=1, **options)

    # When it has run, and left
    await run_until(make_worker(process, dead_letter_queue="jobs-dlq"), lambda: ran(runs))
    if remove is not None:
        await remove(queue)

    # Then its tombstone stays for the resend window
    assert await queue.get_job("j1") is None
    assert 0 < await raw.pttl(gone_key(prefix, "j1")) <= WINDOW_MS


async def ran(runs: list[str]) -> bool:
    return bool(runs)


@pytest.mark.skipif(not ON_CLUSTER, reason="the send path of Redis Cluster")
async def test_on_a_cluster_an_add_whose_reply_a_drop_lost_goes_again_as_resent(
    prefix: str, raw: Any, queues: Callable[..., Queue]
) -> None:
    # Given a connection to the slot's master that drops after an add ran, before its reply
    # came, while the job it added is removed
    queue = queues()
    sends: list[Sequence[Any]] = []

    async def lossy(conn: Any, commands: Sequence[Sequence[Any]], timeout: float | None) -> Any:
        sends.extend(commands)
        replies = await _scripts._send_and_read(conn, commands, timeout)
        if len(sends) == 1:
            await queue.remove("j1")
            raise RedisConnectionError("the reply is lost")
        return replies

    script = _scripts.load("add_jobs")
    await script_ready(raw, script)  # to every master, else the first send is refused
    args = [now_ms(), 100, 0, "", "j1", "mail", "{}", '{"attempts":1}', 0, 0, 1]
    command = script.command([*queue.keys.group, queue.keys.job("j1")], args)

    # When the add is sent
    [reply] = await cluster.execute(raw, [command], lossy, timeout=None, repeatable=True)

    # Then it went again as resent, which found the job's tombstone and added nothing
    assert [send[2 + 11 + 3] for send in sends] == [0, 1]
    assert reply == [-5]
    assert await queue.get_job("j1") is None
