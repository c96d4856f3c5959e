"""Reply memos: a state-changing script run twice with one call id answers twice alike and
changes nothing the second time (a call re-sent after a dropped connection)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis.asyncio as aioredis

from lazarus import _scripts
from lazarus._keys import QueueKeys

NOW = 1_000_000
MAXLEN = 1000
LOCK_MS = 30_000


@pytest.fixture
def k(prefix: str) -> QueueKeys:
    return QueueKeys(prefix, "src")


@pytest.fixture
def d(prefix: str) -> QueueKeys:
    return QueueKeys(prefix, "src-dlq")


async def call(raw: aioredis.Redis, name: str, keys: list[str], args: list[Any]) -> Any:
    return await _scripts.load(name)(raw, keys, args)


async def snapshot(raw: aioredis.Redis, prefix: str) -> dict[str, Any]:
    """Every key of the test and its content."""
    state: dict[str, Any] = {}
    async for key in raw.scan_iter(match=f"{prefix}:*", count=1000):
        kind = await raw.type(key)
        if kind == "string":
            state[key] = await raw.get(key)
        elif kind == "hash":
            state[key] = await raw.hgetall(key)
        elif kind == "list":
            state[key] = await raw.lrange(key, 0, -1)
        elif kind == "zset":
            state[key] = await raw.zrange(key, 0, -1, withscores=True)
        elif kind == "set":
            state[key] = await raw.smembers(key)
        else:
            state[key] = await raw.xrange(key)
    return state


async def add(raw: aioredis.Redis, k: QueueKeys, *ids: str, attempts: int = 1) -> None:
    opts = json.dumps({"attempts": attempts})
    for job_id in ids:
        args = [NOW, MAXLEN, 0, "", job_id, "name", "{}", opts, 0, 0, attempts]
        await call(raw, "add_jobs", [*k.group, k.job(job_id)], args)


async def claim(raw: aioredis.Redis, k: QueueKeys, call_id: str, count: int = 1) -> Any:
    keys = [*k.group, k.reply("w1", "claim")]
    return await call(raw, "claim_jobs", keys, [NOW, "w1", LOCK_MS, count, MAXLEN, call_id])


async def token_of(raw: aioredis.Redis, k: QueueKeys, job_id: str) -> str:
    """The lock token job ``job_id`` is held under."""
    token = await raw.hget(k.job(job_id), "lockToken")
    assert token is not None, f"{job_id} is not held"
    return str(token)


def claim_of(token: str) -> str:
    """What a claim appended to w1's token base: '<attempt>:<active event id>'."""
    assert token.startswith("w1:"), token
    return token[len("w1:") :]


def failure() -> list[Any]:
    attempt = json.dumps({"attempt": 1, "error": "boom", "outcome": "failed"})
    return ["boom", "RuntimeError", json.dumps("Traceback ...\nRuntimeError: boom"), attempt]


def outcome(script: str, k: QueueKeys, d: QueueKeys, job_id: str, token: str) -> tuple[Any, ...]:
    """The keys and args of one outcome script finishing ``job_id`` in w1's slot 0."""
    tail = [MAXLEN, 1, "w1", LOCK_MS]
    memo = k.reply("w1", "0")
    base = [*k.group, k.job(job_id)]
    if script == "complete_job":
        keys = [*base, k.completed, memo]
        args = [job_id, token, NOW + 5, '"done"', -1, -1, 0, *tail]
    elif script == "retry_job":
        keys = [*base, memo]
        args = [job_id, token, NOW + 5, 0, *failure(), *tail]
    elif script == "fail_job":
        keys = [*base, k.failed, memo]
        args = [job_id, token, NOW + 5, *failure(), -1, -1, 0, *tail]
    else:
        dl_id = f"dl-{job_id}"
        keys = [*base, *d.dead_letter_group, d.job(dl_id), memo]
        args = [job_id, token, NOW + 5, *failure(), "attempts_exhausted", "src", "src-dlq", dl_id]
        args += tail
    return script, keys, args


OUTCOMES = ["complete_job", "retry_job", "fail_job", "dead_letter_job"]


@pytest.mark.parametrize("script", OUTCOMES)
async def test_an_outcome_run_twice_answers_alike_and_changes_nothing_the_second_time(
    raw: aioredis.Redis, k: QueueKeys, d: QueueKeys, prefix: str, script: str
) -> None:
    await add(raw, k, "a", "b", attempts=3)
    await claim(raw, k, "c1")
    name, keys, args = outcome(script, k, d, "a", await token_of(raw, k, "a"))

    first = await call(raw, name, keys, args)
    after_first = await snapshot(raw, prefix)
    second = await call(raw, name, keys, args)

    assert first[0] == 0 and first[2][:2] == ["b", await token_of(raw, k, "b")]  # it claimed b
    assert second == first
    assert await snapshot(raw, prefix) == after_first


@pytest.mark.parametrize("script", OUTCOMES)
async def test_a_second_run_leaves_out_a_next_job_taken_back_since(
    raw: aioredis.Redis, k: QueueKeys, d: QueueKeys, script: str
) -> None:
    await add(raw, k, "a", "b", "c", attempts=3)
    await claim(raw, k, "c1")
    name, keys, args = outcome(script, k, d, "a", await token_of(raw, k, "a"))
    await call(raw, name, keys, args)  # finishes a, claims b
    # b's lease expires and a stall sweep gives it back to the queue.
    await raw.zadd(k.leases, {"b": 0})
    sweep_keys = [*k.group, k.failed]
    await call(raw, "sweep_stalled", sweep_keys, [NOW, 1, MAXLEN, "src", "", 10])

    second = await call(raw, name, keys, args)

    assert second[0] == 0
    assert second[2] is None  # false: b is no longer held under the token the memo names
    assert await raw.lrange(k.active, 0, -1) == []
    assert await raw.hget(k.job("c"), "lockToken") is None  # nothing else was claimed


async def test_a_lost_lock_is_refused_though_the_memo_names_the_same_worker_and_attempt(
    raw: aioredis.Redis, k: QueueKeys, d: QueueKeys
) -> None:
    # a and b are both first attempts of w1.
    await add(raw, k, "a", "b")
    await claim(raw, k, "c1")
    name, keys, args = outcome("complete_job", k, d, "a", await token_of(raw, k, "a"))
    await call(raw, name, keys, args)  # finishes a, claims b
    b_token = await token_of(raw, k, "b")
    await raw.zadd(k.leases, {"b": 0})
    await call(raw, "sweep_stalled", [*k.group, k.failed], [NOW, 1, MAXLEN, "src", "", 10])

    name, keys, args = outcome("complete_job", k, d, "b", b_token)
    reply = await call(raw, name, keys, args)

    assert reply == [-2]
    assert await raw.zrange(k.completed, 0, -1) == ["a"]


async def test_a_lost_lock_of_a_job_ids_new_life_is_refused_though_its_old_life_is_in_the_memo(
    raw: aioredis.Redis, k: QueueKeys, d: QueueKeys
) -> None:
    # Given job "a" claimed by w1, completed from slot 0 and removed on completion (the memo
    # of slot 0 remembers that outcome), then added again under its id and claimed by w1 in a
    # claim of its own: the first attempt of the same id by the same worker again
    await add(raw, k, "a")
    await claim(raw, k, "c1")
    first_life = await token_of(raw, k, "a")
    name, keys, args = outcome("complete_job", k, d, "a", first_life)
    args[6], args[8] = 1, 0  # removed on completion; claims nothing next
    assert (await call(raw, name, keys, args))[0] == 0
    await add(raw, k, "a")
    await claim(raw, k, "c2")
    second_life = await token_of(raw, k, "a")

    # When its lease lapses, the sweep takes it back, and slot 0 sends its outcome
    await raw.zadd(k.leases, {"a": 0})
    await call(raw, "sweep_stalled", [*k.group, k.failed], [NOW, 1, MAXLEN, "src", "", 10])
    name, keys, args = outcome("complete_job", k, d, "a", second_life)
    args[6], args[8] = 1, 0
    reply = await call(raw, name, keys, args)

    # Then the outcome is refused: the memo's completion was the earlier life's, and this run
    # was never recorded (the job waits to run again)
    assert reply == [-2]
    assert await raw.lrange(k.wait, 0, -1) == ["a"]
    assert await raw.zcard(k.completed) == 0


@pytest.mark.parametrize("script", OUTCOMES)
async def test_the_next_call_in_the_slot_runs_as_usual_and_replaces_the_memo(
    raw: aioredis.Redis, k: QueueKeys, d: QueueKeys, script: str
) -> None:
    await add(raw, k, "a", "b", "c", attempts=3)
    await claim(raw, k, "c1")
    name, keys, args = outcome("complete_job", k, d, "a", await token_of(raw, k, "a"))
    await call(raw, name, keys, args)  # finishes a, claims b
    b_token = await token_of(raw, k, "b")

    name, keys, args = outcome(script, k, d, "b", b_token)
    reply = await call(raw, name, keys, args)

    c_token = await token_of(raw, k, "c")
    assert reply[0] == 0 and reply[2][:2] == ["c", c_token]
    assert await raw.lrange(k.active, 0, -1) == ["c"]
    assert await raw.hget(k.job("b"), "lockToken") is None
    assert await raw.get(k.reply("w1", "0")) == f"c {claim_of(c_token)}\nb {b_token}"


# -- claim_jobs -------------------------------------------------------------------------------


async def test_a_claim_run_twice_returns_its_jobs_again_and_claims_no_more(
    raw: aioredis.Redis, k: QueueKeys, prefix: str
) -> None:
    await add(raw, k, "a", "b", "c")

    first = await claim(raw, k, "c1", count=2)
    after_first = await snapshot(raw, prefix)
    second = await claim(raw, k, "c1", count=2)

    held = [["a", await token_of(raw, k, "a")], ["b", await token_of(raw, k, "b")]]
    assert [job[:2] for job in first[1:]] == held
    assert second == first
    assert await snapshot(raw, prefix) == after_first
    assert await raw.lrange(k.wait, 0, -1) == ["c"]


async def test_a_claim_with_a_new_call_id_claims_as_usual(
    raw: aioredis.Redis, k: QueueKeys
) -> None:
    await add(raw, k, "a", "b")
    await claim(raw, k, "c1")

    reply = await claim(raw, k, "c2")

    assert reply[1][:2] == ["b", await token_of(raw, k, "b")]
    assert await raw.lrange(k.active, 0, -1) == ["b", "a"]


async def test_a_claim_that_found_nothing_leaves_no_memo(raw: aioredis.Redis, k: QueueKeys) -> None:
    assert await claim(raw, k, "c1") == [-1]
    await add(raw, k, "a")

    # Nothing was orphaned: the same call run again claims what has arrived since.
    reply = await claim(raw, k, "c1")

    assert reply[1][:2] == ["a", await token_of(raw, k, "a")]


async def test_a_claim_memo_lives_twice_the_lease_or_as_long_as_the_call_asks(
    raw: aioredis.Redis, k: QueueKeys
) -> None:
    await add(raw, k, "a", "b")
    await claim(raw, k, "c1")
    by_default = await raw.pttl(k.reply("w1", "claim"))

    # An OJS fetch gives no clock offset ('') and a memo life of its own
    keys = [*k.group, k.reply("w2", "fetch")]
    reply = await call(raw, "claim_jobs", keys, [NOW, "w2", LOCK_MS, 1, MAXLEN, "c2", "", 5_000])

    assert 2 * LOCK_MS - 1_000 < by_default <= 2 * LOCK_MS
    assert reply[1][0] == "b" and reply[1][1].startswith("w2:1:")
    assert 0 < await raw.pttl(k.reply("w2", "fetch")) <= 5_000
    assert await raw.zscore(k.leases, "b") == NOW + LOCK_MS
