"""lazarus on a real local Redis Cluster (three masters, three replicas): cluster clients and
URLs everywhere, scripts routed to the node owning their slot through MOVED and ASK, and queue
names with an explicit hash tag."""

from __future__ import annotations

import asyncio
import socket
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis
from click.testing import CliRunner
from redis.asyncio.cluster import RedisCluster

from lazarus import (
    Job,
    Queue,
    QueueEvents,
    RedisUnavailableError,
    UnrecoverableError,
    Worker,
    _scripts,
)
from lazarus._connection import connect
from lazarus.cli import main

from .cluster import LocalCluster, Node
from .conftest import wait_until


@pytest.fixture
async def cluster_client(redis_cluster: LocalCluster) -> AsyncIterator[RedisCluster]:
    client = connect(redis_cluster.url)
    assert isinstance(client, RedisCluster)
    await client.initialize()
    yield client
    await client.aclose()


@pytest.fixture
def cprefix() -> str:
    return f"c{uuid.uuid4().hex[:12]}"


async def reject(job: Job) -> None:
    raise UnrecoverableError("bad payload")


def test_a_cluster_url_gives_a_cluster_client() -> None:
    client = connect("redis+cluster://127.0.0.1:7000")

    assert isinstance(client, RedisCluster)


def test_a_bad_cluster_url_is_refused_naming_the_connection() -> None:
    with pytest.raises(ValueError, match="connection"):
        connect("redis+cluster://127.0.0.1:7000/0?socket_timeout=soon")


async def test_an_unreachable_cluster_is_one_error_naming_its_node(unused_port: int) -> None:
    queue = Queue("jobs", connection=f"redis+cluster://127.0.0.1:{unused_port}")

    with pytest.raises(RedisUnavailableError, match=f"127.0.0.1:{unused_port}"):
        await queue.add("n", 1)
    await queue.close()


def test_the_cli_reports_an_unreachable_cluster_in_one_line(unused_port: int) -> None:
    url = f"redis+cluster://127.0.0.1:{unused_port}"
    result = CliRunner().invoke(main, ["queues", "--redis-url", url])

    assert result.exit_code == 1
    assert f"127.0.0.1:{unused_port}" in result.output and "Traceback" not in result.output


@pytest.fixture
def unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_queue_worker_and_events_work_on_a_cluster_client(
    cluster_client: RedisCluster, cprefix: str
) -> None:
    # Given a queue, its events and a worker, all on one cluster client, on several queues
    # whose names hash to different masters
    names = [f"q{i}" for i in range(6)]
    slots = {cluster_client.keyslot(f"{{{n}}}") for n in names}
    assert len({cluster_client.nodes_manager.get_node_from_slot(s).name for s in slots}) > 1
    done: dict[str, Any] = {}
    closers: list[Worker | QueueEvents] = []
    for name in names:
        events = QueueEvents(name, connection=cluster_client, prefix=cprefix, block_ms=100)
        await events.wait_until_ready()
        events.on("completed", lambda args, _id, n=name: done.setdefault(n, args["returnvalue"]))
        queue = Queue(name, connection=cluster_client, prefix=cprefix)
        await queue.add("n", {"v": name})
        worker = Worker(
            name, lambda job: job.data["v"], connection=cluster_client, prefix=cprefix,
            block_timeout=0.2,
        )  # fmt: skip
        closers += [worker, events]

    # When the workers run, then every queue's job completes and its event arrives
    await wait_until(lambda: _true(len(done) == len(names)), 20, "every completed event")
    for item in closers:
        await item.close()
    assert done == {n: f'"{n}"' for n in names}


async def _true(value: bool) -> bool:
    return value


async def test_a_tagged_dead_letter_queue_shares_the_slot_and_takes_the_dead_letter(
    redis_cluster: LocalCluster, cprefix: str
) -> None:
    # Given 'payments' and its dead letter queue '{payments}-dlq' (one slot, one step)
    url = redis_cluster.url
    queue = Queue("payments", connection=url, prefix=cprefix)
    dlq = Queue("{payments}-dlq", connection=url, prefix=cprefix)
    assert queue.client.keyslot(queue.keys.wait) == dlq.client.keyslot(dlq.keys.wait)  # type: ignore[union-attr]
    job = await queue.add("charge", {"amount": 5})
    dead: list[str] = []
    worker = Worker("payments", reject, connection=url, prefix=cprefix,
                    dead_letter_queue="{payments}-dlq", block_timeout=0.2)  # fmt: skip
    worker.on("deadLettered", lambda _job, dead_letter_id: dead.append(dead_letter_id))

    # When the job fails for good, then it is one dead letter of the tagged queue
    await wait_until(lambda: _true(len(dead) == 1), 20, "the dead letter")
    await worker.close()
    letters = await dlq.get_dead_letter_jobs()
    assert [(d.data["amount"], d.dead_letter and d.dead_letter.original_job_id)
            for d in letters] == [(5, job.id)]  # fmt: skip
    assert await queue.get_job_state(job.id) in ("unknown", "failed")
    await queue.close()
    await dlq.close()


def _owner(cluster: LocalCluster, slot: int) -> Node:
    """The master serving ``slot``, as the first node sees it."""
    reply: Any = cluster.nodes[0].call("CLUSTER", "SLOTS")
    for start, end, master, *_replicas in reply:
        if start <= slot <= end:
            return next(n for n in cluster.nodes if n.port == int(master[1]))
    raise AssertionError(f"no node serves slot {slot}")


def _start_migration(slot: int, source: Node, target: Node) -> None:
    """Move ``slot``'s keys from ``source`` to ``target`` and leave the slot migrating:
    ``source`` answers ASK for them."""
    target.call("CLUSTER", "SETSLOT", slot, "IMPORTING", source.node_id)
    source.call("CLUSTER", "SETSLOT", slot, "MIGRATING", target.node_id)
    while keys := source.call("CLUSTER", "GETKEYSINSLOT", slot, 100):
        source.call("MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", *keys)  # type: ignore[misc]


def _end_migration(cluster: LocalCluster, slot: int, source: Node, target: Node) -> None:
    """Give ``slot`` to ``target`` (told first, then the source, then the others)."""
    others = [m for m in cluster.nodes if m not in (source, target) and _is_master(m)]
    for node in [target, source, *others]:
        node.call("CLUSTER", "SETSLOT", slot, "NODE", target.node_id)


async def test_calls_follow_ask_tryagain_and_moved_while_a_slot_migrates(
    redis_cluster: LocalCluster, cprefix: str
) -> None:
    # Given a queue with a job, and a client that has read the topology
    queue = Queue("moving", connection=redis_cluster.url, prefix=cprefix)
    first = await queue.add("n", 1)
    client = queue.client
    assert isinstance(client, RedisCluster)
    slot = client.keyslot(queue.keys.wait)
    source = _owner(redis_cluster, slot)
    target = next(m for m in redis_cluster.nodes if m is not source and _is_master(m))
    refusals = _tryagains(target)

    # When the slot's keys move to another master and the slot is left migrating
    _start_migration(slot, source, target)
    try:
        # Then a call on existing keys is sent on to the target (ASK)
        (exists,) = await _scripts.execute(client, [("EXISTS", queue.keys.job(first.id))])
        assert exists == 1
        # And a script creating a key is refused (TRYAGAIN) and sent again until the
        # migration ends
        adding = asyncio.create_task(queue.add("n", 2))
        await wait_until(lambda: _true(_tryagains(target) > refusals), 10, "a TRYAGAIN")
        assert not adding.done()
    finally:
        _end_migration(redis_cluster, slot, source, target)
    second = await adding
    # And after it, a stale topology is corrected (MOVED) and the worker runs every job
    third = await queue.add("n", 3)
    done: list[Any] = []
    worker = Worker("moving", lambda job: done.append(job.data), connection=client,
                    prefix=cprefix, block_timeout=0.2)  # fmt: skip
    await wait_until(lambda: _true(len(done) == 3), 20, "the three jobs")
    await worker.close()
    assert sorted(done) == [1, 2, 3]
    assert {second.id, third.id} <= {j.id for j in await queue.get_completed()}
    await queue.close()


def _tryagains(node: Node) -> int:
    with node.client() as client:
        stats: Any = client.info("errorstats")
    return int(stats.get("errorstat_TRYAGAIN", {}).get("count", 0))


def _is_master(node: Node) -> bool:
    try:
        with node.client() as client:
            return client.info("replication").get("role") == "master"
    except redis.RedisError:
        return False


async def test_a_worker_carries_on_through_a_master_failover(
    redis_cluster: LocalCluster, cprefix: str
) -> None:
    # Given a worker draining a queue on one master
    queue = Queue("failing-over", connection=redis_cluster.url, prefix=cprefix)
    done: set[int] = set()
    worker = Worker("failing-over", lambda job: done.add(job.data), connection=redis_cluster.url,
                    prefix=cprefix, block_timeout=0.2)  # fmt: skip
    await queue.add_bulk([{"name": "n", "data": i} for i in range(20)])
    await wait_until(lambda: _true(len(done) == 20), 20, "the first jobs")
    client = queue.client
    assert isinstance(client, RedisCluster)
    owner = _owner(redis_cluster, client.keyslot(queue.keys.wait))

    # When its master fails over to its replica (CLUSTER FAILOVER), then later jobs complete
    await asyncio.to_thread(redis_cluster.failover, owner)
    await queue.add_bulk([{"name": "n", "data": i} for i in range(20, 40)])
    await wait_until(lambda: _true(len(done) == 40), 30, "the jobs after the failover")
    await worker.close()
    await queue.close()
    assert done == set(range(40))
