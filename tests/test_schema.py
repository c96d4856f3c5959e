"""Payload schemas: checked at enqueue, parsed for the processor."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import pydantic
import pytest
import redis.asyncio as aioredis

from lazarus import Job, Queue, sync
from tests.conftest import keys_of, wait_until


class Email(pydantic.BaseModel):
    to: str
    tags: list[str] = []
    priority: int = 0


@dataclasses.dataclass(frozen=True)
class Point:
    x: int
    y: int

    @classmethod
    def parse(cls, data: Any) -> Point:
        if not isinstance(data, dict) or set(data) != {"x", "y"}:
            raise ValueError("expected an object with x and y")
        return cls(int(data["x"]), int(data["y"]))


@pytest.fixture
async def queue_factory(redis_url: str, prefix: str) -> AsyncIterator[Any]:
    """Build queues on this test's prefix; each is closed at the end."""
    made: list[Queue] = []

    def build(name: str = "jobs", **options: Any) -> Queue:
        made.append(Queue(name, connection=redis_url, prefix=prefix, **options))
        return made[-1]

    yield build
    for queue in made:
        await queue.close()


async def test_a_payload_missing_a_field_raises_naming_it_and_writes_nothing(
    redis_url: str, prefix: str, raw: aioredis.Redis
) -> None:
    async with Queue("mail", connection=redis_url, prefix=prefix, schema=Email) as queue:
        with pytest.raises(ValueError, match=r"^data\.to: Field required"):
            await queue.add("send", {"tags": ["x"]})
        with pytest.raises(ValueError, match=r"data\.tags\.1: Input should be a valid string"):
            await queue.add("send", {"to": "a@b.c", "tags": ["ok", {"no": 1}]})
    assert await keys_of(raw, prefix) == set()


async def test_add_bulk_checks_every_payload_before_writing_any(
    redis_url: str, prefix: str, raw: aioredis.Redis
) -> None:
    async with Queue("mail", connection=redis_url, prefix=prefix, schema=Email) as queue:
        jobs = [{"name": "send", "data": {"to": "a@b.c"}}, {"name": "send", "data": {}}]
        with pytest.raises(ValueError, match=r"^jobs\[1\]: data\.to: Field required"):
            await queue.add_bulk(jobs)
    assert await keys_of(raw, prefix) == set()


async def test_a_model_instance_is_stored_in_its_json_form(queue_factory: Any) -> None:
    queue = queue_factory(schema=Email)
    job = await queue.add("send", Email(to="a@b.c", tags=["x"]))
    stored = await queue.get_job(job.id)
    assert stored is not None
    assert stored.data == {"to": "a@b.c", "tags": ["x"], "priority": 0}


async def test_a_callable_schema_rejects_with_its_own_message(queue_factory: Any) -> None:
    queue = queue_factory(schema=Point.parse)
    with pytest.raises(ValueError, match="data does not match parse: expected an object"):
        await queue.add("plot", {"x": 1})
    job = await queue.add("plot", {"x": 1, "y": 2})
    assert (await queue.get_job(job.id)).data == {"x": 1, "y": 2}  # type: ignore[union-attr]


async def test_the_worker_hands_the_processor_the_parsed_model(
    queue_factory: Any, make_worker: Any
) -> None:
    # Given a queue and a worker with the same schema
    queue = queue_factory(schema=Email)
    seen: list[Any] = []

    async def send(job: Job, email: Email) -> str:
        seen.append(email)
        return email.to

    make_worker(send, schema=Email)
    # When a job is added
    job = await queue.add("send", {"to": "a@b.c", "priority": "3"})

    async def completed() -> bool:
        return await queue.get_job_state(job.id) == "completed"

    await wait_until(completed)
    # Then the processor got the model, coerced as pydantic does
    assert seen == [Email(to="a@b.c", tags=[], priority=3)]


async def test_a_plain_function_processor_gets_the_parsed_value_in_its_thread(
    queue_factory: Any, make_worker: Any
) -> None:
    queue = queue_factory()
    results: asyncio.Queue[Point] = asyncio.Queue()
    loop = asyncio.get_running_loop()

    def plot(job: Job, point: Point) -> None:
        loop.call_soon_threadsafe(results.put_nowait, point)

    make_worker(plot, schema=Point.parse)
    await queue.add("plot", {"x": "4", "y": 5})
    assert await asyncio.wait_for(results.get(), 10) == Point(4, 5)


async def test_a_stored_payload_that_does_not_parse_is_dead_lettered_at_once(
    queue_factory: Any, make_worker: Any
) -> None:
    # Given a job added without the schema (by an older producer), then a worker with it
    queue = queue_factory()
    dlq = queue_factory(name="jobs-dlq")
    job = await queue.add("send", {"subject": "no recipient"}, attempts=3)

    async def send(job: Job, email: Email) -> None:
        raise AssertionError("never called")

    make_worker(send, schema=Email, dead_letter_queue="jobs-dlq")

    async def dead() -> bool:
        return await dlq.get_dead_letter_count() == 1

    await wait_until(dead)
    (letter,) = await dlq.get_dead_letter_jobs()
    assert letter.dead_letter is not None
    assert letter.dead_letter.original_job_id == job.id
    assert letter.dead_letter.reason == "unrecoverable"
    assert letter.dead_letter.failed_reason == "data.to: Field required"


def test_the_sync_queue_checks_with_the_same_schema(redis_url: str, prefix: str) -> None:
    with sync.Queue("mail", connection=redis_url, prefix=prefix, schema=Email) as queue:
        with pytest.raises(ValueError, match=r"^data\.to: Field required"):
            queue.add("send", {})
        assert queue.get_job_counts()["waiting"] == 0


def test_a_schema_that_is_not_callable_is_refused() -> None:
    with pytest.raises(TypeError, match="schema must be"):
        Queue("mail", connection="redis://localhost:1/0", schema="Email")  # type: ignore[arg-type]
