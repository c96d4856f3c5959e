"""Queue: adding, reading back, counting, pausing, cleaning — and bad input writing nothing."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster

from lazarus import Backoff, JobNotFoundError, Queue, RedisUnavailableError
from lazarus._adding import BULK_CHUNK, BULK_IN_FLIGHT
from lazarus._connection import connect, now_ms
from lazarus._scripts.wait_search import WAIT_LOOKS

from .conftest import ON_CLUSTER, keys_of, wait_until


async def test_added_job_is_waiting_with_its_data_and_options(queue: Queue) -> None:
    job = await queue.add(
        "email", {"to": "ada@example.com"}, attempts=3, backoff={"type": "exponential", "delay": 50}
    )

    stored = await queue.get_job(job.id)

    assert stored is not None
    assert stored.name == "email"
    assert stored.data == {"to": "ada@example.com"}
    assert stored.opts.attempts == 3
    assert stored.opts.backoff == Backoff("exponential", 50)
    assert stored.attempts_made == 0
    assert stored.timestamp > 0
    assert await queue.get_job_state(job.id) == "waiting"
    assert job == stored  # the job add returns is the job as written
    await job.update_progress(50)  # and bound to its queue
    assert (await queue.get_job(job.id) or job).progress == 50


async def test_payload_round_trips_every_json_type_and_big_integers(queue: Queue) -> None:
    payload = {
        "big": 2**64 + 1,
        "neg": -(2**70),
        "f": 1.5,
        "s": "é✓",
        "n": None,
        "t": True,
        "empty_list": [],
        "empty_obj": {},
        "nested": [[], {}, [1, [2]]],
    }
    for data in (payload, [1, "two", None], "text", 42, None, False):
        job = await queue.add("kind", data)
        stored = await queue.get_job(job.id)
        assert stored is not None
        assert stored.data == data
        assert type(stored.data) is type(data)


async def test_get_job_of_unknown_id_is_none_and_state_unknown(queue: Queue) -> None:
    assert await queue.get_job("nope") is None
    assert await queue.get_job_state("nope") == "unknown"


async def test_adding_an_existing_job_id_returns_it_and_writes_nothing(queue: Queue) -> None:
    first = await queue.add("a", {"v": 1}, job_id="order-1")

    second = await queue.add("a", {"v": 2}, job_id="order-1")

    assert second.id == first.id == "order-1"
    assert second.data == {"v": 1}
    assert await queue.get_waiting_count() == 1


@pytest.mark.parametrize(
    ("name", "data", "options", "error", "fragment"),
    [
        ("", {}, {}, ValueError, "job name"),
        ("n" * 1001, {}, {}, ValueError, "job name is 1001 characters long, over the limit"),
        ("n", {"when": object()}, {}, TypeError, "data['when']"),
        ("n", {"a": [1, {2, 3}]}, {}, TypeError, "data['a'][1]"),
        ("n", {1: "x"}, {}, TypeError, "key 1"),
        ("n", {"x": float("nan")}, {}, ValueError, "data['x']"),
        ("n", {}, {"attempts": 0}, ValueError, "attempts"),
        ("n", {}, {"attempts": "3"}, TypeError, "attempts"),
        ("n", {}, {"delay": -1}, ValueError, "delay"),
        ("n", {}, {"priority": 2**21 + 1}, ValueError, "priority"),
        ("n", {}, {"backoff": {"type": "", "delay": 5}}, ValueError, "backoff.type"),
        ("n", {}, {"backoff": {"type": "fixed", "jitter": 1.5}}, ValueError, "backoff.jitter"),
        ("n", {}, {"backoff": {"type": "fixed", "jitter": "x"}}, TypeError, "backoff.jitter"),
        ("n", {}, {"backoff": {"delay": -5}}, ValueError, "backoff.delay"),
        ("n", {}, {"remove_on_complete": {"age": -1}}, ValueError, "remove_on_complete.age"),
        ("n", {}, {"remove_on_fail": "yes"}, TypeError, "remove_on_fail"),
        ("n", {}, {"job_id": "has space"}, ValueError, "job_id"),
        # Waits past about 317 years, and counts past exact doubles, are refused: due times
        # are Redis scores, passed through Lua
        ("n", {}, {"delay": 10**20}, ValueError, "delay"),
        ("n", {}, {"timeout": 10**400}, ValueError, "timeout"),
        ("n", {}, {"attempts": 2**31}, ValueError, "attempts"),
        ("n", {}, {"backoff": {"delay": 10**15}}, ValueError, "backoff.delay"),
        ("n", {}, {"remove_on_fail": {"age": 10**12}}, ValueError, "remove_on_fail.age"),
        ("n", {}, {"remove_on_complete": 2**60}, ValueError, "remove_on_complete"),
        ("n", {}, {"deduplication": {"id": "k", "ttl": 10**18}}, ValueError, "deduplication.ttl"),
        ("n", {}, {"repeat": {"every": 10**30}}, ValueError, "repeat.every"),
        ("n", {}, {"repeat": {"every": 1000, "end_date": 10**20}}, ValueError, "repeat.end_date"),
    ],
)
async def test_bad_input_raises_naming_the_field_and_writes_nothing(
    queue: Queue,
    raw: aioredis.Redis,
    prefix: str,
    name: str,
    data: object,
    options: dict[str, object],
    error: type[Exception],
    fragment: str,
) -> None:
    with pytest.raises(error, match=fragment.replace("[", r"\[").replace("]", r"\]")):
        await queue.add(name, data, **options)  # type: ignore[arg-type]

    assert await keys_of(raw, prefix) == set()


async def test_payload_over_the_size_limit_is_rejected(
    redis_url: str, prefix: str, raw: aioredis.Redis
) -> None:
    small = Queue("jobs", connection=redis_url, prefix=prefix, max_payload_bytes=100)
    with pytest.raises(ValueError, match="over the limit of 100"):
        await small.add("big", "x" * 200)
    await small.close()
    assert await keys_of(raw, prefix) == set()


async def test_add_bulk_with_one_bad_job_writes_none_of_them(
    queue: Queue, raw: aioredis.Redis, prefix: str
) -> None:
    jobs = [{"name": "ok", "data": i} for i in range(10)] + [{"name": "bad", "data": {1, 2}}]

    with pytest.raises(TypeError, match=r"jobs\[10\]"):
        await queue.add_bulk(jobs)

    assert await keys_of(raw, prefix) == set()


@pytest.mark.skipif(ON_CLUSTER, reason="reads one server's command statistics")
async def test_a_bulk_of_large_payloads_is_added_over_calls_of_a_bounded_size(
    queue: Queue, raw: Any
) -> None:
    # Given 12 jobs of 300 kB of payload each (3.6 MB in all)
    blob = "x" * 300_000
    await raw.config_resetstat()

    # When they are added in one bulk
    await queue.add_bulk([{"name": "n", "data": {"i": i, "blob": blob}} for i in range(12)])

    # Then they all wait in order, added by calls of at most 1 MiB of payloads (three jobs)
    assert [j.data["i"] for j in reversed(await queue.get_waiting())] == list(range(12))
    stats = await raw.info("commandstats")
    calls = sum(stats.get(f"cmdstat_{c}", {}).get("calls", 0) for c in ("fcall", "evalsha"))
    assert calls >= 4


async def test_add_bulk_adds_in_order(queue: Queue) -> None:
    # More jobs than one pipeline of calls holds: the pipelines go one after another
    count = BULK_CHUNK * BULK_IN_FLIGHT * 2 + 100
    jobs = await queue.add_bulk([{"name": "n", "data": i} for i in range(count)])

    waiting = await queue.get_waiting(0, -1)

    assert len(jobs) == count
    assert [j.data for j in reversed(waiting)] == list(range(count))
    assert [j.id for j in jobs] == [j.id for j in reversed(waiting)]
    assert jobs[0].stacktrace is not jobs[1].stacktrace  # each job's lists are its own
    assert jobs[0].attempts is not jobs[1].attempts
    for index in (0, BULK_CHUNK * BULK_IN_FLIGHT, count - 1):
        assert jobs[index] == await queue.get_job(jobs[index].id)


async def test_queue_names_with_braces_are_rejected(redis_url: str) -> None:
    with pytest.raises(ValueError, match="queue name"):
        Queue("a{b}", connection=redis_url)


async def test_priorities_and_delays_land_in_their_states(queue: Queue) -> None:
    urgent = await queue.add("n", None, priority=1)
    later = await queue.add("n", None, delay=60_000)

    assert await queue.get_job_state(urgent.id) == "prioritized"
    assert await queue.get_job_state(later.id) == "delayed"
    counts = await queue.get_job_counts()
    assert counts["prioritized"] == 1
    assert counts["delayed"] == 1
    assert [j.id for j in await queue.get_delayed()] == [later.id]
    assert [j.id for j in await queue.get_prioritized()] == [urgent.id]


async def test_paused_queue_reports_paused_and_resume_restores(queue: Queue) -> None:
    job = await queue.add("n", None)

    await queue.pause()
    assert await queue.is_paused()
    assert await queue.get_job_state(job.id) == "paused"
    assert (await queue.get_job_counts())["paused"] == 1

    await queue.resume()
    assert await queue.get_job_state(job.id) == "waiting"


async def test_remove_deletes_a_waiting_job(queue: Queue) -> None:
    job = await queue.add("n", None)

    await queue.remove(job.id)

    assert await queue.get_job(job.id) is None
    assert await queue.get_waiting_count() == 0
    with pytest.raises(JobNotFoundError):
        await queue.remove(job.id)


async def test_remove_takes_a_waiting_job_from_either_end_or_the_middle_of_a_long_queue(
    queue: Queue,
) -> None:
    # Given 2,500 waiting jobs, more than the removal searches from the newest end
    jobs = await queue.add_bulk([{"name": "n", "data": i} for i in range(2500)])
    waiting = [j.id for j in reversed(jobs)]  # newest first, as the wait list holds them

    # When the newest, the oldest and one in the middle are removed, and a delayed and a
    # prioritized job besides
    others = [await queue.add("n", None, delay=60_000), await queue.add("n", None, priority=3)]
    gone = [waiting[0], waiting[-1], waiting[1700], *(j.id for j in others)]
    for job_id in gone:
        await queue.remove(job_id)

    # Then exactly those are gone, and the others wait in their order
    assert [j.id for j in await queue.get_waiting()] == [i for i in waiting if i not in gone]
    counts = await queue.get_job_counts()
    assert (counts["waiting"], counts["delayed"], counts["prioritized"]) == (2497, 0, 0)


async def test_a_job_removed_from_deep_inside_a_long_queue_leaves_a_hole_the_rest_skip(
    queue: Queue, raw: Any
) -> None:
    # Given 25,000 waiting jobs, more than a removal searches whole
    jobs = await queue.add_bulk([{"name": "n", "data": i} for i in range(25_000)])
    deep = [jobs[7_000].id, jobs[12_000].id, jobs[12_001].id]

    # When three jobs far from either end are removed
    for job_id in deep:
        await queue.remove(job_id)

    # Then they are gone, their places are holes, and the counts leave the holes out
    assert [await queue.get_job_state(i) for i in deep] == ["unknown"] * 3
    assert await raw.hget(queue.keys.meta, "holes") == "3"
    assert (await queue.get_job_counts())["waiting"] == 24_997
    window = await queue.get_waiting(24_999 - 12_002, 24_999 - 11_999)  # newest first
    assert [j.id for j in window] == [jobs[12_002].id, jobs[11_999].id]

    # And a clean of them all removes every other job, oldest first, and no hole
    removed = await queue.clean(0, limit=30_000, state="waiting")
    assert removed == [j.id for j in jobs if j.id not in deep]
    assert await raw.llen(queue.keys.wait) == 0 and not await raw.hexists(queue.keys.meta, "holes")


async def test_a_job_missing_from_a_long_wait_list_it_should_be_in_is_removed_all_the_same(
    queue: Queue, raw: Any
) -> None:
    # Given 25,000 waiting jobs, one of which has lost its place in the list
    jobs = await queue.add_bulk([{"name": "n", "data": i} for i in range(25_000)])
    await raw.lrem(queue.keys.wait, 1, jobs[9_000].id)

    # When it is removed
    await queue.remove(jobs[9_000].id)

    # Then its hash is gone and the list is as it was
    assert await queue.get_job(jobs[9_000].id) is None
    assert await raw.llen(queue.keys.wait) == 24_999
    assert not await raw.hexists(queue.keys.meta, "holes")


async def test_a_removal_whose_reads_miss_a_job_moved_back_meanwhile_leaves_no_place_behind(
    queue: Queue, raw: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given 25,000 waiting jobs, one added under its own id and 10,020th from the head; while
    # the removal reads the list, 150 of the newest are removed, so that the job moves from
    # the part not read yet to the part read already
    specs: list[dict[str, Any]] = [{"name": "n", "data": i} for i in range(25_000)]
    specs[25_000 - 1 - 10_020]["job_id"] = "target"
    jobs = await queue.add_bulk(specs)
    assert await raw.lpos(queue.keys.wait, "target") == 10_020
    client, reads = queue._client, 0

    async def read_then_remove_near_the_head(*args: Any) -> Any:
        nonlocal reads
        piece = await type(client).lrange(client, *args)
        reads += 1
        if reads == 1:
            for job in jobs[-150:]:
                await queue.remove(job.id)
        return piece

    monkeypatch.setattr(client, "lrange", read_then_remove_near_the_head)

    # When it is removed
    await queue.remove("target")

    # Then its id is nowhere in the list: a job added again under it has one place, not two
    monkeypatch.undo()
    assert reads >= 2
    assert await queue.get_job("target") is None
    assert await raw.lpos(queue.keys.wait, "target") is None
    assert (await queue.get_job_counts())["waiting"] == 25_000 - 151
    await queue.add("n", None, job_id="target")
    assert await raw.lpos(queue.keys.wait, "target", count=0) == [0]


async def test_a_job_that_moves_away_from_every_look_is_searched_for_whole_at_last(
    queue: Queue, raw: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given 25,000 waiting jobs, and 1,100 more added after every read of the list, so that
    # the job to remove is never where the last read saw it
    jobs = await queue.add_bulk([{"name": "n", "data": i} for i in range(25_000)])
    target = jobs[12_000].id
    client, reads = queue._client, 0

    async def read_then_add(*args: Any) -> Any:
        nonlocal reads
        piece = await type(client).lrange(client, *args)
        reads += 1
        await queue.add_bulk([{"name": "m", "data": i} for i in range(1_100)])
        return piece

    monkeypatch.setattr(client, "lrange", read_then_add)

    # When it is removed
    await queue.remove(target)

    # Then after its looks the list is searched whole, and the job leaves no place behind
    monkeypatch.undo()
    assert reads >= WAIT_LOOKS
    assert await queue.get_job_state(target) == "unknown"
    assert await raw.lpos(queue.keys.wait, target) is None
    assert not await raw.hexists(queue.keys.meta, "holes")
    assert (await queue.get_job_counts())["waiting"] == 25_000 - 1 + reads * 1_100


async def test_a_repeatable_occurrence_deep_inside_a_long_queue_is_removed_with_its_schedule(
    queue: Queue, raw: Any
) -> None:
    # Given a schedule whose occurrence waits, due, deep inside 25,000 waiting jobs
    await queue.add_bulk([{"name": "n", "data": i} for i in range(12_000)])
    occurrence = await queue.add("tick", None, repeat={"every": 60_000})
    assert occurrence is not None and await queue.get_job_state(occurrence.id) == "delayed"
    await raw.zrem(queue.keys.delayed, occurrence.id)
    await raw.lpush(queue.keys.wait, occurrence.id)
    await queue.add_bulk([{"name": "n", "data": i} for i in range(13_000)])

    # When the schedule is removed
    assert await queue.remove_repeatable("tick", {"every": 60_000})

    # Then its occurrence went with it, its place a hole
    assert await queue.get_job_state(occurrence.id) == "unknown"
    assert await queue.get_repeatable_jobs() == []
    assert await raw.hget(queue.keys.meta, "holes") == "1"
    assert (await queue.get_job_counts())["waiting"] == 25_000


@pytest.mark.skipif(ON_CLUSTER, reason="reads one server's command statistics")
async def test_a_job_state_is_read_without_searching_the_wait_list(queue: Queue, raw: Any) -> None:
    # Given a long wait list
    jobs = await queue.add_bulk([{"name": "n", "data": i} for i in range(2000)])

    # When the states of its oldest and newest jobs, and of an unknown id, are read
    await raw.config_resetstat()
    states = [await queue.get_job_state(i) for i in (jobs[0].id, jobs[-1].id, "nope")]

    # Then they are right, and no command read a list
    assert states == ["waiting", "waiting", "unknown"]
    ran = set(await raw.info("commandstats"))
    assert ran and not ran & {"cmdstat_lpos", "cmdstat_lrange", "cmdstat_lrem", "cmdstat_lindex"}


async def test_clean_removes_old_waiting_jobs_oldest_first(queue: Queue) -> None:
    jobs = await queue.add_bulk([{"name": "n", "data": i} for i in range(5)])

    removed = await queue.clean(0, limit=3, state="waiting")

    assert removed == [j.id for j in jobs[:3]]
    assert await queue.get_waiting_count() == 2


async def test_a_clean_longer_than_one_call_goes_over_several_and_removes_exactly_its_jobs(
    queue: Queue, raw: Any
) -> None:
    # Given more waiting jobs than one call's time budget can remove
    jobs = await queue.add_bulk([{"name": "n", "data": i} for i in range(5000)])

    # When they are cleaned, a limit beyond them all
    removed = await queue.clean(0, limit=10_000, state="waiting")

    # Then every one went, oldest first, over several calls (one cleaned event each)
    assert removed == [j.id for j in jobs]
    assert await queue.get_waiting_count() == 0
    events = [f for _, f in await raw.xrange(queue.keys.events) if f["event"] == "cleaned"]
    assert len(events) > 1 and sum(int(f["count"]) for f in events) == 5000


async def test_a_clean_of_delayed_jobs_reads_past_pages_of_newer_ones(queue: Queue) -> None:
    # Given 1,500 delayed jobs, then 1,500 newer ones due earlier, which rank ahead of them
    old = await queue.add_bulk([{"name": "n", "data": i, "delay": 3_600_000} for i in range(1500)])
    newest_old = max(j.timestamp for j in old)

    async def later() -> bool:
        return now_ms() > newest_old + 50

    await wait_until(later)
    new = await queue.add_bulk([{"name": "n", "data": i, "delay": 60_000} for i in range(1500)])
    assert min(j.timestamp for j in new) > newest_old + 50

    # When the older ones are cleaned
    removed = await queue.clean(now_ms() - newest_old - 25, limit=5000, state="delayed")

    # Then exactly they went, and the newer ones are still delayed
    assert sorted(removed) == sorted(j.id for j in old)
    assert sorted(j.id for j in await queue.get_delayed()) == sorted(j.id for j in new)


async def test_clean_rejects_bad_arguments(queue: Queue) -> None:
    with pytest.raises(ValueError, match="state"):
        await queue.clean(0, state="active")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="grace_ms"):
        await queue.clean(-1)


@pytest.mark.parametrize(
    "getter",
    ["get_waiting", "get_active", "get_prioritized", "get_delayed", "get_completed",
     "get_failed", "get_dead_letter_jobs", "get_job_logs"],
)  # fmt: skip
@pytest.mark.parametrize(
    ("start", "end", "error", "fragment"),
    [
        ("a", -1, TypeError, "^start must be an int, not str$"),
        (1.5, -1, TypeError, "^start must be an int, not float$"),
        (0, None, TypeError, "^end must be an int, not NoneType$"),
        (True, -1, TypeError, "^start must be an int, not bool$"),
        (0, 2**63, ValueError, "^end must be a 64-bit index"),
    ],
)
async def test_range_getters_refuse_an_index_that_is_not_an_int_naming_it(
    queue: Queue, getter: str, start: object, end: object, error: type[Exception],
    fragment: str,
) -> None:  # fmt: skip
    # Given a queue holding a job (with a line of log), so that each read reaches Redis
    job = await queue.add("n", {})
    await queue.add_job_log(job.id, "a line")

    # When a range is asked for with an index that is no int, Then the error names it
    args = (job.id, start, end) if getter == "get_job_logs" else (start, end)
    with pytest.raises(error, match=fragment):
        await getattr(queue, getter)(*args)


async def test_obliterate_deletes_every_key_of_the_queue(
    queue: Queue, raw: aioredis.Redis, prefix: str
) -> None:
    await queue.add_bulk([{"name": "n", "data": i, "delay": i * 1000} for i in range(20)])

    await queue.obliterate()

    assert await keys_of(raw, prefix) == set()


async def test_unreachable_redis_raises_a_clear_error_naming_the_address() -> None:
    queue = Queue("jobs", connection="redis://127.0.0.1:1/0")

    with pytest.raises(RedisUnavailableError, match=r"127\.0\.0\.1:1\b"):
        await queue.add("n", None)
    await queue.close()


async def test_dead_letter_operations_on_unreachable_redis_raise_a_clear_error() -> None:
    queue = Queue("jobs-dlq", connection="redis://127.0.0.1:1/0")

    with pytest.raises(RedisUnavailableError, match=r"127\.0\.0\.1:1\b"):
        await queue.get_dead_letter_count()
    with pytest.raises(RedisUnavailableError):
        await queue.replay_all_dead_letters()
    await queue.close()


async def test_jobs_added_without_an_id_get_distinct_uuid4_hex_ids(queue: Queue) -> None:
    jobs = await queue.add_bulk([{"name": "n", "data": i} for i in range(200)])
    jobs.append(await queue.add("n", 1))

    ids = [job.id for job in jobs]
    assert len(set(ids)) == len(ids)
    for job_id in ids:
        parsed = uuid.UUID(hex=job_id)
        assert (parsed.hex, parsed.version, parsed.variant) == (job_id, 4, uuid.RFC_4122)
    assert (await queue.get_job_counts())["waiting"] == 201


async def test_the_jobs_an_add_returns_equal_what_redis_holds(queue: Queue) -> None:
    # Given jobs added one by one and in bulk, with options and without
    added = await queue.add_bulk([{"name": "n", "data": {"i": i}} for i in range(3)])
    added.append(await queue.add("m", [1, "é"], attempts=3, priority=2, delay=60_000))

    # When each is read back from Redis
    read = [await queue.get_job(job.id) for job in added]

    # Then each equals the job the add returned, field by field, with lists of its own
    assert read == added
    assert added[0].stacktrace is not added[1].stacktrace
    assert added[0].attempts is not added[1].attempts


async def test_a_bulk_over_several_calls_returns_the_existing_job_where_an_id_is_taken(
    queue: Queue,
) -> None:
    # Given a job with a known id, and a bulk of 1,200 (three script calls) that names it
    # twice (in its first and its last call) among jobs of every kind
    first = await queue.add("kept", {"v": "first"}, job_id="known")
    specs: list[dict[str, Any]] = [
        {"name": "n", "data": {"i": i}, "priority": i % 3, "delay": 60_000 * (i % 5 == 0)}
        for i in range(1_200)
    ]
    specs[7] = {"name": "again", "data": {"v": "second"}, "job_id": "known"}
    specs[1_150] = {"name": "again", "data": {"v": "third"}, "job_id": "known"}

    # When it is added
    added = await queue.add_bulk(specs)

    # Then the taken id returns the job that holds it, every other job is as Redis holds it
    assert added[7] == added[1_150] == first == await queue.get_job("known")
    read = [await queue.get_job(job.id) for job in added]
    assert read == added
    counts = await queue.get_job_counts()
    assert counts["waiting"] + counts["prioritized"] + counts["delayed"] == 1_199


def test_a_job_built_with_a_wrong_field_raises_type_error_naming_it() -> None:
    from lazarus.job import Job
    from lazarus.job_options import JobOptions

    with pytest.raises(TypeError, match="bogus"):
        Job._build(id="a", name="n", original_data=1, opts=JobOptions(), queue_name="q",
                   timestamp=1, bogus=1)  # fmt: skip
    with pytest.raises(TypeError, match="queue_name"):
        Job._build(id="a", name="n", original_data=1, opts=JobOptions(), timestamp=1)


@pytest.mark.parametrize("decode", [False, True])
async def test_jobs_read_alike_through_clients_that_decode_replies_and_that_do_not(
    queue: Queue, redis_url: str, decode: bool
) -> None:
    # Given a job with text beyond ASCII, read through a client of each kind
    added = await queue.add("n", {"text": "é ✓"}, attempts=2)
    client: Any
    if decode:
        client = connect(redis_url)  # lazarus's own: replies decoded
    elif ON_CLUSTER:
        client = RedisCluster.from_url(redis_url.replace("redis+cluster://", "redis://"))
    else:
        client = aioredis.Redis.from_url(redis_url)
    try:
        reader = Queue(queue.name, connection=client, prefix=queue.prefix)

        # When it is read by id and in a list
        one = await reader.get_job(added.id)
        listed = await reader.get_waiting()
    finally:
        await client.aclose()

    # Then both equal the job as added
    assert one == added
    assert listed == [added]
