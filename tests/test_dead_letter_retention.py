"""Retention policies of a dead letter queue and pruning by age and by count."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import redis.asyncio as aioredis

from lazarus import Job, Queue, UnrecoverableError, Worker
from lazarus.dead_letter import RetentionPolicy, StatusRetention
from lazarus.dead_letter.retention import duration_ms

from .conftest import wait_until

MakeWorker = Callable[..., Worker]
DAY = 86_400_000


async def dead_letter(queue: Queue, make_worker: MakeWorker, count: int) -> list[str]:
    """Dead-letter ``count`` jobs one after another (so their arrival order is known); returns
    the dead letter ids, oldest first."""

    async def fail(job: Job) -> None:
        raise UnrecoverableError("bad input")

    worker = make_worker(fail, dead_letter_queue="jobs-dlq")
    dlq = Queue("jobs-dlq", connection=queue.client, prefix=queue.prefix)
    for n in range(count):
        await queue.add("task", {"n": n})
        await wait_until(lambda n=n: _has(dlq, n + 1), message=f"{n + 1} dead letters")
    await worker.close()
    return [j.id for j in reversed(await dlq.get_dead_letter_jobs())]


async def _has(dlq: Queue, count: int) -> bool:
    return await dlq.get_dead_letter_count() >= count


def test_durations_parse_iso_8601_and_bad_ones_name_the_field() -> None:
    assert duration_ms("P180D", "max_age") == 180 * DAY
    assert duration_ms("PT1H30M", "max_age") == 5_400_000
    assert duration_ms("P1Y", "max_age") == 365 * DAY
    for bad in ("180D", "P", "PT", "P1DT", "P0D", "-P1D", "P1D\n"):
        with pytest.raises(ValueError, match="max_age"):
            duration_ms(bad, "max_age")
    with pytest.raises(TypeError, match="max_age"):
        duration_ms(180, "max_age")


def test_bad_policies_raise_naming_the_field() -> None:
    with pytest.raises(ValueError, match="max_count"):
        RetentionPolicy(max_count=-1)
    with pytest.raises(TypeError, match="max_count"):
        RetentionPolicy(max_count="10")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="prune"):
        RetentionPolicy(prune="shred")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="statuses"):
        RetentionPolicy(statuses={"gone": StatusRetention("P1D")})
    with pytest.raises(ValueError, match="max_age"):
        StatusRetention("forever")


async def test_the_default_policy_is_seed_001s_table(dlq: Queue) -> None:
    policy = await dlq.get_retention_policy()

    assert policy.max_age == "P180D" and policy.max_count == 10_000 and policy.prune == "delete"
    assert policy.rules()["resolved"] == (30 * DAY, "delete")
    assert policy.rules()["failed"] == (90 * DAY, "archive")
    assert policy.rules()["archived"] == (365 * DAY, "delete")
    assert policy.rules()["pending"] == (None, "delete")
    assert policy.rules()["manual"] == (180 * DAY, "delete")


async def test_a_stored_policy_is_seen_by_another_client(
    dlq: Queue, redis_url: str, prefix: str
) -> None:
    policy = RetentionPolicy(max_age="P7D", max_count=3, prune="archive",
                             statuses={"pending": StatusRetention("P2D", "delete")})  # fmt: skip
    await dlq.set_retention_policy(policy)

    async with Queue("jobs-dlq", connection=redis_url, prefix=prefix) as other:
        assert await other.get_retention_policy() == policy


async def test_setting_something_else_than_a_policy_writes_nothing(
    dlq: Queue, raw: aioredis.Redis
) -> None:
    with pytest.raises(TypeError, match="policy"):
        await dlq.set_retention_policy({"max_age": "P1D"})  # type: ignore[arg-type]
    assert await raw.exists(dlq.keys.dl_retention) == 0


async def test_count_limit_prunes_the_oldest_first(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, raw: aioredis.Redis
) -> None:
    ids = await dead_letter(queue, make_worker, 5)
    await dlq.set_retention_policy(RetentionPolicy(max_count=2))

    pruned = await dlq.prune_dead_letters()

    assert pruned == 3
    left = [j.id for j in reversed(await dlq.get_dead_letter_jobs())]
    assert left == ids[3:]
    assert not any([await raw.exists(dlq.keys.job(i)) for i in ids[:3]])
    assert await raw.hget(dlq.keys.meta, "count:pruned:deleted") == "3"
    events = await raw.xrange(dlq.keys.events)
    pruned_events = [e for _, e in events if e["event"] == "pruned"]
    assert pruned_events[-1]["count"] == "3"
    assert set(pruned_events[-1]["jobIds"].split(",")) == set(ids[:3])


async def test_pending_dead_letters_are_kept_past_max_age_unless_their_status_has_an_age(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    await dead_letter(queue, make_worker, 2)
    oldest = await dlq.get_oldest_dead_letter_at()
    newest = (await dlq.get_dead_letter_jobs())[0].timestamp
    assert oldest is not None

    assert await dlq.prune_dead_letters(now=newest + 400 * DAY) == 0

    await dlq.set_retention_policy(RetentionPolicy(statuses={"pending": StatusRetention("P1D")}))
    assert await dlq.prune_dead_letters(now=oldest + DAY - 1) == 0
    assert await dlq.prune_dead_letters(now=newest + DAY + 1) == 2
    assert await dlq.get_dead_letter_count() == 0


async def test_pruning_in_small_batches_prunes_everything_due(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    from lazarus.dead_letter import retention

    await dead_letter(queue, make_worker, 5)
    policy = RetentionPolicy(max_count=0)

    deleted, archived = await retention.prune(dlq.client, dlq.keys, 100, policy, batch=2)

    assert (deleted, archived) == (5, 0)
    assert await dlq.get_dead_letter_count() == 0


async def test_per_status_ages_delete_resolved_archive_failed_and_keep_pending(
    queue: Queue, dlq: Queue, make_worker: MakeWorker, raw: aioredis.Redis
) -> None:
    resolved, failed, pending = await dead_letter(queue, make_worker, 3)
    await dlq.set_dead_letter_status(resolved, "resolved", actor="redriver")
    await dlq.set_dead_letter_status(failed, "failed", actor="redriver")
    newest = (await dlq.get_dead_letter_jobs())[0].timestamp

    assert await dlq.prune_dead_letters(now=newest + 100 * DAY) == 2

    assert await raw.exists(dlq.keys.job(resolved)) == 0
    archived = await dlq.peek_dead_letter(failed)
    assert archived is not None and archived.dead_letter is not None
    assert archived.dead_letter.status == "archived"
    assert archived.dead_letter.timeline[-1].actor == "policy"
    health = await dlq.get_dead_letter_health()
    assert health.by_status == {"archived": 1, "pending": 1}
    assert await raw.hget(dlq.keys.meta, "count:pruned:archived") == "1"

    assert await dlq.prune_dead_letters(now=newest + 400 * DAY) == 1
    assert (await dlq.get_dead_letter_health()).by_status == {"pending": 1}
    assert [j.id for j in await dlq.get_dead_letter_jobs()] == [pending]


async def test_archive_by_count_leaves_the_archived_outside_the_count(
    queue: Queue, dlq: Queue, make_worker: MakeWorker
) -> None:
    ids = await dead_letter(queue, make_worker, 4)
    await dlq.set_retention_policy(RetentionPolicy(max_count=1, prune="archive"))

    assert await dlq.prune_dead_letters() == 3
    assert await dlq.prune_dead_letters() == 0

    health = await dlq.get_dead_letter_health()
    assert health.by_status == {"archived": 3, "pending": 1}
    assert [j.id for j in await dlq.get_dead_letter_jobs()] == [ids[-1]]
