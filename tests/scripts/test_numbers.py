"""The scripts of the hot paths hand Redis text, not numbers (includes/numbers.lua): Redis
prints each number a script passes to a command, and Lua each it joins to a string, on
printf's slow path. Checked by running the paths with every ``redis.call`` of those scripts
watched: a number among a command's arguments is recorded beside the script's first key."""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import pytest
import redis.asyncio as aioredis

from lazarus import Job, Queue, Worker, _scripts

from ..conftest import wait_until

HOT = ("add_jobs", "claim_jobs", "complete_job", "retry_job", "fail_job", "dead_letter_job",
       "replay_dead_letters")  # fmt: skip
NUMBERS = ":numbers"  # beside a call's KEYS[1]: '<script> <command> #<argument>' per number
WATCH = """
local function watched_call(...)
  local args = {...}
  for i = 2, #args do
    if type(args[i]) == 'number' then
      redis.call('RPUSH', KEYS[1] .. '%s', '%s ' .. args[1] .. ' #' .. i)
    end
  end
  return redis.call(...)
end
"""


@pytest.fixture
def watched(monkeypatch: pytest.MonkeyPatch) -> None:
    """The hot scripts, each ``redis.call`` of theirs through ``watched_call``: run by EVALSHA
    or as functions (a library of another name)."""
    for name in HOT:
        script = _scripts.load(name)
        watch = WATCH % (NUMBERS, name)
        source = watch + script.source.replace("redis.call(", "watched_call(")
        # The SHA1 first: made from the source when first read, it must be read before that
        # changes, or the original would come back with the watched source's SHA1.
        monkeypatch.setattr(script, "sha", hashlib.sha1(source.encode()).hexdigest())
        monkeypatch.setattr(script, "source", source)
        function = f"{script.function}_watched"
        library = script.library.replace("redis.call(", "watched_call(")
        library = library.replace("local KEYS, ARGV\n", f"local KEYS, ARGV\n{watch}", 1)
        monkeypatch.setattr(script, "library", library.replace(script.function, function))
        monkeypatch.setattr(script, "function", function)


async def numbers_handed(raw: aioredis.Redis, prefix: str) -> list[str]:
    found: list[str] = []
    async for key in raw.scan_iter(match=f"{prefix}:*{NUMBERS}"):
        found += await raw.lrange(key, 0, -1)
    return found


@pytest.mark.usefixtures("watched")
async def test_the_hot_paths_hand_redis_no_numbers(
    raw: aioredis.Redis, redis_url: str, prefix: str, queue: Queue, dlq: Queue,
    make_worker: Callable[..., Worker],
) -> None:  # fmt: skip
    # Given jobs that complete, retry once then complete, fail for good into the failed set,
    # and fail for good into a dead letter queue (added one by one and in bulk, delayed and
    # with a priority)
    plain = Queue("plain", connection=redis_url, prefix=prefix)
    await queue.add("ok", {"n": 1})
    await queue.add("retry", {"n": 2}, attempts=2, backoff={"type": "fixed", "delay": 1})
    await queue.add("ok", {"n": 3}, priority=3)
    await queue.add("ok", {"n": 4}, delay=5)
    await queue.add_bulk([{"name": "dead", "data": {"n": i}} for i in range(3)])
    await plain.add("fail", {"n": 5})
    seen: dict[str, int] = {}

    async def processor(job: Job) -> str:
        seen[job.id] = seen.get(job.id, 0) + 1
        if job.name == "dead" or job.name == "fail" or (job.name == "retry" and seen[job.id] == 1):
            raise ValueError("fails")
        return "done"

    # When workers bring them to their ends, and the dead letters are replayed
    make_worker(processor, dead_letter_queue="jobs-dlq")
    make_worker(processor, queue_name="plain")

    async def ended() -> bool:
        counts = await queue.get_job_counts()
        return counts["completed"] == 4 and await dlq.count_dead_letters() == 3

    await wait_until(ended, message="every job at its end")
    await wait_until(lambda: _failed(plain), message="the plain job failed")
    assert await dlq.replay_all_dead_letters() == 3

    # Then no call of theirs handed Redis a number
    handed = await numbers_handed(raw, prefix)
    assert handed == [], sorted(set(handed))
    await plain.close()


async def _failed(queue: Queue) -> bool:
    return (await queue.get_job_counts())["failed"] == 1
