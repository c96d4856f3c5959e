"""release_job called directly: a job cut short by shutdown goes back to the front of the line."""

from __future__ import annotations

import pytest
import redis.asyncio as aioredis

from lazarus._keys import QueueKeys

from .test_transitions import MAXLEN, NOT_OWNED, add, call, claim_token, events, not_owned


@pytest.fixture
def k(prefix: str) -> QueueKeys:
    return QueueKeys(prefix, "src")


async def test_release_puts_the_job_first_in_line_without_counting_an_attempt(
    raw: aioredis.Redis, k: QueueKeys
) -> None:
    # Given a running job and one waiting behind it
    await add(raw, k, "a")
    token = await claim_token(raw, k)
    await add(raw, k, "b")

    # When its worker releases it
    code = await call(raw, "release_job", k.group, ["a", token, MAXLEN])

    # Then it is next to run, its lease and lock are gone, and nothing was counted
    assert code == 0
    assert await raw.llen(k.active) == 0
    assert await raw.zcard(k.leases) == 0
    assert await raw.lrange(k.wait, 0, -1) == ["b", "a"]  # claims pop from the right
    assert await raw.zrange(k.marker, 0, -1) == ["0"]
    fields = await raw.hgetall(k.job("a"))
    assert "lockToken" not in fields
    assert fields.get("attemptsMade", "0") == "0"
    assert (await events(raw, k))[-1] == {"event": "waiting", "jobId": "a"}


@NOT_OWNED
async def test_release_refuses_a_worker_that_does_not_own_the_job(
    raw: aioredis.Redis, k: QueueKeys, setup: str, token: str | None, code: int
) -> None:
    token = await not_owned(raw, k, setup, token)
    before = await raw.lrange(k.wait, 0, -1)

    assert await call(raw, "release_job", k.group, ["a", token, MAXLEN]) == code

    assert await raw.lrange(k.wait, 0, -1) == before
