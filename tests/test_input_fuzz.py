"""Hostile input to Queue(...), add and add_bulk: accepted and usable, or refused up front.

Every call either succeeds (and what it accepted really works against Redis) or raises
``ValueError`` / ``TypeError`` naming the offending field, with nothing written under the
test's prefix.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest
import redis.asyncio as aioredis
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from lazarus import Queue

# Any code point, lone surrogates included, leaning towards the troublesome ones.
_CHARS = st.one_of(
    st.characters(codec=None, exclude_categories=()),
    st.characters(categories=["Cs", "Cc", "Cf", "Zs", "Zl", "Zp"]),
    st.sampled_from("{}\\*?[]^-:\x00\x1f\x7f\x80\x85\x9f\u00a0\u2028\ud800\udfff\ufeff"),
)
HOSTILE_TEXT = st.text(alphabet=_CHARS, max_size=12)
NOT_TEXT = st.one_of(
    st.none(), st.integers(), st.binary(max_size=4), st.lists(st.integers(), max_size=2)
)
HOSTILE_NAME = st.one_of(HOSTILE_TEXT, NOT_TEXT, st.text(min_size=190, max_size=210))


def _nest(depth: int, leaf: Any) -> Any:
    value = leaf
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


class _HugeInt(int):
    """An int longer than Python prints by default (4,300 digits), with a repr that prints."""

    def __repr__(self) -> str:
        return "10**5000"


def _cycle() -> Any:
    loop: list[Any] = [1]
    loop.append({"back": loop})
    return loop


_LEAVES = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), HOSTILE_TEXT,
    st.just(_HugeInt(10**5000)), st.builds(object), st.binary(max_size=3),
    st.sets(st.integers(), max_size=2),
)  # fmt: skip
_KEYS = st.one_of(HOSTILE_TEXT, st.integers(), st.none(), st.booleans(), st.tuples(st.integers()))
HOSTILE_DATA = st.one_of(
    st.recursive(
        _LEAVES,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3),
            st.tuples(inner),
            st.dictionaries(_KEYS, inner, max_size=3),
        ),
        max_leaves=12,
    ),
    st.builds(_nest, st.integers(min_value=100, max_value=5000), _LEAVES),
    st.builds(_cycle),
)
T = TypeVar("T")
FUZZ = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


async def _keys_under(raw: aioredis.Redis, root: str) -> set[str]:
    return {k async for k in raw.scan_iter(match=f"{root}*", count=1000)}  # root is [0-9a-z]


async def _wipe(raw: aioredis.Redis, root: str) -> None:
    keys = await _keys_under(raw, root)
    if keys:
        await raw.unlink(*keys)


def _attempt(call: Callable[[], T]) -> tuple[T | None, Exception | None]:
    """``(result, None)``, or ``(None, the exception)`` for any exception: the test then
    checks that it is a ValueError or TypeError naming the field."""
    try:
        return call(), None
    except Exception as exc:
        return None, exc


async def _attempt_async(call: Awaitable[T]) -> tuple[T | None, Exception | None]:
    try:
        return await call, None
    except Exception as exc:
        return None, exc


def _names_field(exc: Exception | None, *fields: str) -> bool:
    return isinstance(exc, (ValueError, TypeError)) and any(f in str(exc) for f in fields)


def _json_equal(stored: Any, sent: Any) -> bool:
    """Whether ``stored`` is ``sent`` as JSON carries it (tuples become lists)."""
    if isinstance(sent, tuple):
        sent = list(sent)
    if isinstance(sent, list):
        return (
            isinstance(stored, list)
            and len(stored) == len(sent)
            and all(_json_equal(a, b) for a, b in zip(stored, sent))
        )
    if isinstance(sent, dict):
        return (
            isinstance(stored, dict)
            and stored.keys() == sent.keys()
            and all(_json_equal(stored[k], sent[k]) for k in sent)
        )
    if isinstance(sent, float) and math.isnan(sent):
        return False
    return bool(stored == sent and type(stored) is type(sent))


@FUZZ
@given(name=HOSTILE_NAME, prefix_tail=HOSTILE_NAME)
@example(name="q\ud800", prefix_tail="")
@example(name="q", prefix_tail="\udfff")
@example(name="q\x85", prefix_tail="")
@example(name="q\x9f", prefix_tail="")
async def test_queue_accepts_a_usable_name_and_prefix_or_names_the_bad_one(
    name: Any, prefix_tail: Any, raw: aioredis.Redis
) -> None:
    root = f"t{uuid.uuid4().hex[:12]}"
    prefix = root + prefix_tail if isinstance(prefix_tail, str) else prefix_tail
    queue, refused = _attempt(lambda: Queue(name, connection=raw, prefix=prefix))
    if queue is None:
        assert _names_field(refused, "queue name", "prefix"), repr(refused)
        return
    try:
        # A name and prefix that were accepted must work against Redis
        job = await queue.add("n", {"v": 1})
        assert await queue.get_job_state(job.id) == "waiting"
        assert name in await queue.client.smembers(queue.keys.registry)
    finally:
        await _wipe(raw, root)


@FUZZ
@given(field=st.sampled_from(["name", "data", "job_id"]), value=st.data())
async def test_add_accepts_usable_input_or_names_the_bad_field_and_writes_nothing(
    field: str, value: st.DataObject, raw: aioredis.Redis
) -> None:
    root = f"t{uuid.uuid4().hex[:12]}"
    bad = value.draw(HOSTILE_DATA if field == "data" else HOSTILE_NAME, label=field)
    call: dict[str, Any] = {"name": "n", "data": {"v": 1}, field: bad}
    queue = Queue("jobs", connection=raw, prefix=root)
    job, refused = await _attempt_async(queue.add(call.pop("name"), call.pop("data"), **call))
    if job is None:
        assert _names_field(refused, {"name": "job name"}.get(field, field)), repr(refused)
        assert await _keys_under(raw, root) == set(), "a refused add wrote to Redis"
        return
    try:
        stored = await queue.get_job(job.id)
        assert stored is not None
        assert stored.name == (bad if field == "name" else "n")
        if field == "data":
            assert _json_equal(stored.data, bad)
    finally:
        await _wipe(raw, root)


@FUZZ
@given(
    field=st.sampled_from(["name", "data", "job_id"]),
    position=st.integers(min_value=0, max_value=3),
    value=st.data(),
)
async def test_add_bulk_names_the_bad_job_and_field_and_writes_nothing(
    field: str, position: int, value: st.DataObject, raw: aioredis.Redis
) -> None:
    root = f"t{uuid.uuid4().hex[:12]}"
    bad = value.draw(HOSTILE_DATA if field == "data" else HOSTILE_NAME, label=field)
    jobs: list[dict[str, Any]] = [{"name": "n", "data": i} for i in range(4)]
    jobs[position][field] = bad
    queue = Queue("jobs", connection=raw, prefix=root)
    added, refused = await _attempt_async(queue.add_bulk(jobs))
    if added is None:
        assert _names_field(refused, f"jobs[{position}]"), repr(refused)
        assert _names_field(refused, {"name": "job name"}.get(field, field)), repr(refused)
        assert await _keys_under(raw, root) == set(), "a refused add_bulk wrote to Redis"
        return
    try:
        assert len(added) == 4
    finally:
        await _wipe(raw, root)


@pytest.mark.parametrize(
    ("name", "data", "options", "field"),
    [
        ("n\ud800", None, {}, "job name"),
        ("n", {"text": "a\udc00b"}, {}, "data['text']"),
        ("n", {"\ud83d": 1}, {}, "data key"),
        ("n", _nest(5000, None), {}, "data"),
        ("n", _cycle(), {}, "data[1]"),
        ("n", [_HugeInt(10**5000)], {}, "data[0]"),
        ("n", None, {"job_id": "id\ud800"}, "job_id"),
        ("n", None, {"job_id": "id\x85"}, "job_id"),
        ("n", None, {"job_id": "id\x9b"}, "job_id"),
    ],
)
async def test_add_names_the_field_of_input_redis_could_not_carry(
    name: str, data: Any, options: dict[str, Any], field: str, queue: Queue, raw: aioredis.Redis
) -> None:
    with pytest.raises((ValueError, TypeError)) as caught:
        await queue.add(name, data, **options)

    assert field in str(caught.value)
    assert await _keys_under(raw, queue.prefix) == set()


@pytest.mark.parametrize(
    ("name", "prefix", "field"),
    [
        ("q\ud800", "p", "queue name"),
        ("q", "p\udfff", "prefix"),
        ("q\x80", "p", "queue name"),
        ("q", "p\x9f", "prefix"),
    ],
)
def test_queue_names_the_field_of_a_name_redis_could_not_carry(
    name: str, prefix: str, field: str
) -> None:
    with pytest.raises(ValueError, match=field):
        Queue(name, prefix=prefix)
