"""obliterate() deletes its own queue's keys and nothing else, whatever the names hold.

Queue names and prefixes may hold every character Redis's glob patterns treat specially
(``\\ * ? [ ] ^ -``); a property test builds several queues with such names side by side,
obliterates one and checks that every other key survives.
"""

from __future__ import annotations

import uuid

import redis.asyncio as aioredis
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from lazarus import Queue

# Glob specials, the key separator, and a few ordinary and non-ASCII characters.
_HOSTILE = st.text(alphabet="\\*?[]^-:ab\u00e9\u2713", min_size=0, max_size=5)
_QUEUES = st.lists(st.tuples(_HOSTILE, _HOSTILE.filter(bool)), min_size=2, max_size=5, unique=True)


async def _populate(queue: Queue) -> None:
    """Give ``queue`` keys of most kinds: waiting, prioritized, delayed, meta, events."""
    await queue.add_bulk(
        [{"name": "n"}, {"name": "p", "priority": 3}, {"name": "d", "delay": 60_000}]
    )
    await queue.pause()


async def _keys_under(raw: aioredis.Redis, root: str) -> set[str]:
    return {k async for k in raw.scan_iter(match=f"{root}*", count=1000)}  # root is [0-9a-z]


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(queues=_QUEUES, victim=st.integers(min_value=0))
@example(queues=[("", "a"), ("", "a\\")], victim=1)  # `\}` once matched queue a's `}`
@example(queues=[("", "q"), ("\\", "q")], victim=1)  # prefix `p\` once reached prefix `p`
@example(queues=[("", "a"), ("", "[a]")], victim=1)
@example(queues=[("", "b"), ("", "[^a]")], victim=1)
@example(queues=[("", "b"), ("", "[a-c]")], victim=1)
async def test_obliterate_deletes_only_its_own_queues_keys(
    queues: list[tuple[str, str]], victim: int, redis_url: str, raw: aioredis.Redis
) -> None:
    # Given several queues whose prefixes (all starting with a fresh root) and names hold
    # glob specials, each with jobs in several states
    root = f"t{uuid.uuid4().hex[:12]}"
    made = [Queue(name, connection=raw, prefix=root + suffix) for suffix, name in queues]
    target = made[victim % len(made)]
    try:
        for queue in made:
            await _populate(queue)
        before = await _keys_under(raw, root)

        # When one of them is obliterated
        deleted = await target.obliterate()

        # Then exactly the keys under its own base are gone, and every other queue is whole
        after = await _keys_under(raw, root)
        own = {k for k in before if k.startswith(target.keys.base)}
        assert own, "the queue under test had no keys to delete"
        assert deleted == len(own)
        # The registry set goes too when the obliterated queue was its only member.
        alone = all(q.prefix != target.prefix for q in made if q is not target)
        assert after == before - own - ({target.keys.registry} if alone else set())
        for queue in made:
            registered = await raw.sismember(queue.keys.registry, queue.name)
            assert bool(registered) == (queue.name != target.name or queue.prefix != target.prefix)
    finally:
        leftovers = await _keys_under(raw, root)
        if leftovers:
            await raw.unlink(*leftovers)
