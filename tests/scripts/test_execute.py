"""_scripts.execute: commands sent straight on a pooled connection, replies in order."""

from __future__ import annotations

import asyncio
import uuid

import pytest
import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import DataError, NoPermissionError, NoScriptError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from lazarus import Queue, _scripts
from lazarus._connection import connect
from lazarus._scripts import _loading

from ..conftest import ON_CLUSTER, wait_until
from ..faults import flush_scripts, has_functions


async def test_replies_come_back_in_order_with_error_replies_in_place(
    raw: aioredis.Redis, prefix: str
) -> None:
    key = f"{prefix}:counter"

    replies = await _scripts.execute(
        raw, [("SET", key, "x"), ("INCR", key), ("APPEND", key, "y"), ("GET", key)]
    )

    assert replies[0] == "OK"
    assert isinstance(replies[1], ResponseError)
    assert replies[2:] == [2, "xy"]
    # The connection is still in step: the next call reads its own reply.
    assert await _scripts.execute(raw, [("GET", key)]) == ["xy"]


async def test_an_argument_hiredis_cannot_pack_gets_redis_py_s_error(
    raw: aioredis.Redis, prefix: str
) -> None:
    with pytest.raises(DataError, match="NoneType"):
        await _scripts.execute(raw, [("SET", f"{prefix}:k", None)])

    assert await raw.exists(f"{prefix}:k") == 0


async def test_a_cancelled_call_leaves_no_reply_behind_for_the_next(
    raw: aioredis.Redis, prefix: str
) -> None:
    blocked = asyncio.create_task(_scripts.execute(raw, [("BLPOP", f"{prefix}:never", 5)]))

    async def blocking() -> bool:
        return any(c["cmd"] == "blpop" for c in await raw.client_list())

    await wait_until(blocking, message="the BLPOP to reach the server")
    blocked.cancel()
    with pytest.raises(asyncio.CancelledError):
        await blocked
    await raw.rpush(f"{prefix}:never", "late")

    # Had the cancelled connection been reused, this read would get BLPOP's reply.
    assert await _scripts.execute(raw, [("PING",)]) == ["PONG"]
    assert await raw.lrange(f"{prefix}:never", 0, -1) == ["late"]


async def test_a_blocking_command_past_its_timeout_raises_and_the_pool_recovers(
    raw: aioredis.Redis, prefix: str
) -> None:
    with pytest.raises(RedisTimeoutError, match="no reply within"):
        await _scripts.execute(raw, [("BLPOP", f"{prefix}:never", 0)], timeout=0.2)

    await raw.rpush(f"{prefix}:never", "kept")
    assert await _scripts.execute(raw, [("LRANGE", f"{prefix}:never", 0, -1)]) == [["kept"]]


async def test_a_single_connection_client_adds_and_reads_jobs(redis_url: str, prefix: str) -> None:
    client = aioredis.Redis.from_url(
        redis_url, decode_responses=True, single_connection_client=True
    )
    queue = Queue("jobs", connection=client, prefix=prefix)
    try:
        job = await queue.add("one", {"n": 1})
        bulk = await queue.add_bulk([{"name": "many", "data": i} for i in range(600)])

        assert (await queue.get_job_counts())["waiting"] == 601
        stored = await queue.get_job(job.id)
        assert stored is not None and stored.data == {"n": 1}
        assert len({j.id for j in bulk}) == 600
    finally:
        await client.aclose()


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        (NoScriptError("No matching script. Please use EVAL."), _loading.NO_SCRIPT),
        (ResponseError("Function not found"), _loading.NO_FUNCTION),
        (ResponseError("unknown command `FCALL`, with args beginning with: `x`, "),
         _loading.NO_FUNCTIONS),  # Redis 6.2's words
        (ResponseError("unknown command 'fcall', with args beginning with: 'x' "),
         _loading.NO_FUNCTIONS),
        (ResponseError("unknown command `FOO`, with args beginning with: "), None),
        (ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value"),
         None),
        (NoPermissionError("this user has no permissions to run the 'fcall' command"),
         _loading.NO_FUNCTIONS),
        (NoPermissionError("this user has no permissions to run the 'set' command"), None),
        ("Function not found", None),  # a reply, not an error
    ],
)  # fmt: skip
def test_a_call_refused_before_it_ran_is_told_from_every_other_reply(
    reply: object, why: str | None
) -> None:
    assert _scripts.unrun(reply) == why


@pytest.mark.skipif(ON_CLUSTER, reason="sets the users of one server")
@pytest.mark.parametrize("denied", ["-fcall", "-function"])
async def test_a_user_who_may_not_call_or_load_functions_runs_scripts_by_evalsha(
    raw: aioredis.Redis, redis_url: str, prefix: str, denied: str
) -> None:
    if not await has_functions(raw):
        pytest.skip("Redis 6.2 has no functions")
    # Given a user who may do everything but call functions, or load them (with the library
    # missing, as on a server that has never seen this version)
    user = f"u{uuid.uuid4().hex[:8]}"
    await raw.execute_command("ACL", "SETUSER", user, "on", ">pw", "~*", "&*", "+@all", denied)
    await flush_scripts(raw)
    url = redis_url.replace("redis://", f"redis://{user}:pw@", 1)
    queue = Queue("jobs", connection=url, prefix=prefix)
    try:
        # When it adds jobs, one and many
        one = await queue.add("a", {})
        many = await queue.add_bulk([{"name": "b", "data": i} for i in range(3)])

        # Then they are added, by EVALSHA
        assert [await queue.get_job(j.id) is not None for j in [one, *many]] == [True] * 4
        assert not _scripts.functions_on(queue.client)
    finally:
        await queue.close()
        await raw.execute_command("ACL", "DELUSER", user)


async def test_a_flushed_script_is_loaded_again(queue: Queue, raw: aioredis.Redis) -> None:
    await queue.add("before", None)
    await flush_scripts(raw)

    single = await queue.add("after", None)
    await flush_scripts(raw)
    bulk = await queue.add_bulk([{"name": "bulk", "data": i} for i in range(600)])

    assert await queue.get_job(single.id) is not None
    assert len([j for j in bulk if await queue.get_job(j.id) is not None]) == 600


async def kill_blocked(raw: aioredis.Redis, command: str = "blpop") -> None:
    """Wait until a client is blocked in ``command``, then close its connection."""

    async def blocked() -> list[int]:
        return [int(c["id"]) for c in await raw.client_list() if c["cmd"] == command]

    await wait_until(blocked, message=f"a client blocked in {command}")
    for client_id in await blocked():
        await raw.execute_command("CLIENT KILL ID", client_id)


@pytest.mark.parametrize("repeatable", [False, True])
async def test_a_dropped_connection_is_sent_again_only_when_repeatable(
    raw: aioredis.Redis, redis_url: str, prefix: str, repeatable: bool
) -> None:
    client = connect(redis_url)  # lazarus's own retry policy
    counter, never = f"{prefix}:counter", f"{prefix}:never"
    try:
        call = asyncio.create_task(
            _scripts.execute(
                client, [("INCR", counter), ("BLPOP", never, 5)], repeatable=repeatable
            )
        )
        await kill_blocked(raw)  # after INCR ran: its reply is lost with the connection

        if not repeatable:
            with pytest.raises(RedisConnectionError):
                await call
            assert await raw.get(counter) == "1"
        else:
            await wait_until(lambda: _equals(raw, counter, "2"), message="a second send")
            await raw.rpush(never, "x")
            assert await call == [2, [never, "x"]]
    finally:
        await client.aclose()


async def _equals(raw: aioredis.Redis, key: str, value: str) -> bool:
    return await raw.get(key) == value


async def test_a_timeout_is_never_followed_by_a_second_send(
    raw: aioredis.Redis, redis_url: str, prefix: str
) -> None:
    client = connect(redis_url)  # its retry policy covers timeouts for ordinary commands
    counter = f"{prefix}:counter"
    try:
        with pytest.raises(RedisTimeoutError):
            await _scripts.execute(
                client,
                [("INCR", counter), ("BLPOP", f"{prefix}:never", 0)],
                timeout=0.2,
                repeatable=True,
            )
    finally:
        await client.aclose()

    assert await raw.get(counter) == "1"
