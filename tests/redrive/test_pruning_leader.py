"""One prune leader at a time: redrivers and workers share an expiring lease."""

from __future__ import annotations

from collections.abc import Callable

from lazarus import Job, Queue, Worker
from lazarus.dead_letter import RetentionPolicy, leadership

from ..conftest import wait_until
from .conftest import MakeDeadLetters


async def test_the_lease_has_one_holder_until_released(dlq: Queue) -> None:
    client, keys = dlq.client, dlq.keys

    assert await leadership.acquire(client, keys, "prune", "a", 10_000)
    assert not await leadership.acquire(client, keys, "prune", "b", 10_000)
    assert await leadership.acquire(client, keys, "prune", "a", 10_000)  # renewed

    await leadership.release(client, keys, "prune", "b")  # not b's: stays
    assert not await leadership.acquire(client, keys, "prune", "b", 10_000)
    await leadership.release(client, keys, "prune", "a")
    assert await leadership.acquire(client, keys, "prune", "b", 10_000)


async def test_a_worker_prunes_its_dead_letter_queue_when_it_leads(
    dlq: Queue, make_dead_letters: MakeDeadLetters, make_worker: Callable[..., Worker]
) -> None:
    await make_dead_letters(4)
    await dlq.set_retention_policy(RetentionPolicy(max_count=1))

    async def succeed(job: Job) -> None:
        return None

    make_worker(succeed, dead_letter_queue="jobs-dlq", prune_interval=0.05)

    async def pruned() -> bool:
        return await dlq.get_dead_letter_count() == 1

    await wait_until(pruned, message="the worker pruned to the count limit")
    assert (await dlq.get_dead_letter_health()).pruned_deleted == 3


async def test_a_worker_leaves_pruning_to_the_leader(
    dlq: Queue, make_dead_letters: MakeDeadLetters, make_worker: Callable[..., Worker]
) -> None:
    from lazarus.dead_letter.pruner import Pruner

    await make_dead_letters(2)
    await dlq.set_retention_policy(RetentionPolicy(max_count=0))
    assert await leadership.acquire(dlq.client, dlq.keys, "prune", "redriver-x", 60_000)
    errors: list[BaseException] = []
    pruner = Pruner(dlq.client, dlq.keys, 100, holder="worker-y", interval=1.0,
                    on_error=lambda exc, _: errors.append(exc))  # fmt: skip

    assert await pruner.prune_once() == 0
    assert await dlq.get_dead_letter_count() == 2

    await leadership.release(dlq.client, dlq.keys, "prune", "redriver-x")
    assert await pruner.prune_once() == 2
    assert errors == []
