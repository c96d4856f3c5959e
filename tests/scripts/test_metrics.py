"""The throughput counts the outcome scripts keep (includes/metrics.lua), called directly:
one per outcome in its minute's bucket, and minutes older than the window folded into the
totals by the first outcome of a new minute."""

from __future__ import annotations

import pytest
import redis.asyncio as aioredis

from lazarus._keys import QueueKeys

from .test_transitions import (
    MAXLEN,
    NOW,
    add,
    call,
    claim_token,
    complete_args,
    failure,
    memo,
)

MINUTE = 60_000


@pytest.fixture
def k(prefix: str) -> QueueKeys:
    return QueueKeys(prefix, "src")


async def complete(raw: aioredis.Redis, k: QueueKeys, job_id: str, at: int) -> None:
    await add(raw, k, job_id, now=at)
    token = await claim_token(raw, k)
    reply = await call(
        raw, "complete_job", [*k.group, k.job(job_id), k.completed, memo(k)],
        complete_args(job_id, token, now=at),
    )  # fmt: skip
    assert reply[0] == 0


async def fail(raw: aioredis.Redis, k: QueueKeys, job_id: str, at: int) -> None:
    await add(raw, k, job_id, now=at)
    token = await claim_token(raw, k)
    args = [job_id, token, at, *failure(), -1, -1, 0, MAXLEN, 0, "w1", 30_000]
    reply = await call(raw, "fail_job", [*k.group, k.job(job_id), k.failed, memo(k)], args)
    assert reply[0] == 0


async def test_each_outcome_counts_once_in_its_minute(raw: aioredis.Redis, k: QueueKeys) -> None:
    minute = NOW // MINUTE
    await complete(raw, k, "a", NOW)
    await complete(raw, k, "b", NOW + 1)
    await fail(raw, k, "c", NOW + MINUTE)

    assert await raw.hgetall(k.metrics) == {f"c:{minute}": "2", f"f:{minute + 1}": "1"}


async def test_minutes_that_leave_the_window_fold_into_the_totals(
    raw: aioredis.Redis, k: QueueKeys
) -> None:
    minute = NOW // MINUTE
    await complete(raw, k, "a", NOW)
    await fail(raw, k, "b", NOW + 5 * MINUTE)
    await complete(raw, k, "c", NOW + 119 * MINUTE)  # a and b are still in the window
    assert len(await raw.hgetall(k.metrics)) == 3

    await complete(raw, k, "d", NOW + 120 * MINUTE)  # a's minute leaves it
    assert await raw.hgetall(k.metrics) == {
        "c": "1", f"f:{minute + 5}": "1", f"c:{minute + 119}": "1", f"c:{minute + 120}": "1",
    }  # fmt: skip

    await complete(raw, k, "e", NOW + 300 * MINUTE)  # every minute before leaves it
    assert await raw.hgetall(k.metrics) == {"c": "3", "f": "1", f"c:{minute + 300}": "1"}
