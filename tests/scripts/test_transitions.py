"""Each Lua transition called directly: the keys it leaves, its return code and its events."""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.exceptions import OutOfMemoryError, ResponseError

from lazarus import _scripts
from lazarus._keys import QueueKeys

from ..conftest import ON_CLUSTER
from ..faults import out_of_memory, script_ready

NOW = 1_000_000
MAXLEN = 1000


@pytest.fixture
def k(prefix: str) -> QueueKeys:
    return QueueKeys(prefix, "src")


@pytest.fixture
def d(prefix: str) -> QueueKeys:
    return QueueKeys(prefix, "src-dlq")


async def call(raw: aioredis.Redis, name: str, keys: list[str], args: list[Any]) -> Any:
    return await _scripts.load(name)(raw, keys, args)


async def events(raw: aioredis.Redis, k: QueueKeys) -> list[dict[str, str]]:
    return [fields for _, fields in await raw.xrange(k.events)]


async def add(
    raw: aioredis.Redis,
    k: QueueKeys,
    job_id: str,
    *,
    delay: int = 0,
    priority: int = 0,
    attempts: int = 1,
    data: str = '{"x":1}',
    now: int = NOW,
    resent: int = 0,
) -> Any:
    opts = json.dumps({"attempts": attempts, "delay": delay})
    result = await call(
        raw,
        "add_jobs",
        [*k.group, k.job(job_id)],
        [now, MAXLEN, resent, "", job_id, "name", data, opts, delay, priority, attempts],
    )
    return result[0]


def claim_keys(k: QueueKeys) -> list[str]:
    return [*k.group, k.reply("w1", "claim")]


async def claim(raw: aioredis.Redis, k: QueueKeys, count: int = 1, now: int = NOW) -> Any:
    args = [now, "w1", 30_000, count, MAXLEN, uuid.uuid4().hex]
    return await call(raw, "claim_jobs", claim_keys(k), args)


async def claim_token(raw: aioredis.Redis, k: QueueKeys) -> str:
    """Claim the next job as worker w1; the lock token it holds the job under."""
    return str((await claim(raw, k))[1][1])


def memo(k: QueueKeys) -> str:
    """The reply memo of worker w1's slot 0, where its outcome scripts remember replies."""
    return k.reply("w1", "0")


# Job "a" in a state its would-be owner cannot finish, with the token it tries (None: the one
# its claim gave) and the code the script answers: gone, held by another worker, never
# claimed, not in the active list.
NOT_OWNED = pytest.mark.parametrize(
    ("setup", "token", "code"),
    [
        ("none", "w1:1", -1),
        ("claimed", "other:1", -2),
        ("unclaimed", "w1:1", -2),
        ("not-active", None, -3),
    ],
)


async def not_owned(raw: aioredis.Redis, k: QueueKeys, setup: str, token: str | None) -> str:
    """Set job "a" up as a ``NOT_OWNED`` case says; the token to try."""
    if setup != "none":
        await add(raw, k, "a")
    if setup in ("claimed", "not-active"):
        token = token or await claim_token(raw, k)
    if setup == "not-active":
        await raw.lrem(k.active, 0, "a")
    assert token is not None
    return token


# -- add_jobs ---------------------------------------------------------------------------------


async def test_add_jobs_places_each_job_by_delay_and_priority(
    raw: aioredis.Redis, k: QueueKeys
) -> None:
    assert await add(raw, k, "a") == "waiting"
    assert await add(raw, k, "b", priority=2) == "prioritized"
    assert await add(raw, k, "c", delay=500) == "delayed"

    assert await raw.lrange(k.wait, 0, -1) == ["a"]
    assert await raw.zrange(k.prioritized, 0, -1) == ["b"]
    assert await raw.zrange(k.delayed, 0, -1, withscores=True) == [("c", NOW + 500)]
    assert await raw.hget(k.job("a"), "data") == '{"x":1}'
    assert [e["event"] for e in await events(raw, k)] == ["waiting", "waiting", "delayed"]


async def test_add_jobs_returns_job_exists_and_keeps_the_original(
    raw: aioredis.Redis, k: QueueKeys
) -> None:
    await add(raw, k, "a", data='"first"')

    assert await add(raw, k, "a", data='"second"') == -5

    assert await raw.hget(k.job("a"), "data") == '"first"'
    assert await raw.llen(k.wait) == 1


async def test_add_jobs_deletes_the_mark_of_each_job_in_the_queue_and_keeps_the_others(
    raw: aioredis.Redis, k: QueueKeys
) -> None:
    # Given a job "a" in the queue, a job holding deduplication id "dk", and a mark (a hash of
    # the queue's slot, field "adding") for each job of an add of three: a new one, "a"
    # again, and one whose deduplication id is held
    await add(raw, k, "a")
    opts = json.dumps({"attempts": 1, "delay": 0})
    dedup = [NOW, MAXLEN, 0, "", "h", "name", "{}", opts, 0, 0, 1, "dk", 0, ""]
    assert (await call(raw, "add_jobs", [*k.group, k.job("h")], dedup))[0] == "waiting"
    marks = [f"{k.base}mark:{job_id}" for job_id in ("n", "a", "d")]
    for mark in marks:
        await raw.hset(mark, mapping={"adding": NOW, "kept": "1"})

    # When the three are added, with their marks
    groups = [["n", "name", "{}", opts, 0, 0, 1], ["a", "name", "{}", opts, 0, 0, 1],
              ["d", "name", "{}", opts, 0, 0, 1]]  # fmt: skip
    args: list[Any] = [NOW, MAXLEN, 0, "adding", *(a for g in groups for a in g)]
    args += ["", 0, "", "", 0, "", "dk", 0, ""]
    keys = [*k.group, k.job("n"), k.job("a"), k.job("d"), *marks]
    result = await call(raw, "add_jobs", keys, args)

    # Then the new job and the one there already lose their marks' field, and nothing else;
    # the one not added keeps its mark whole
    assert result == ["waiting", -5, ["h"]]
    assert [await raw.hgetall(mark) for mark in marks] == [
        {"kept": "1"}, {"kept": "1"}, {"adding": str(NOW), "kept": "1"}
    ]  # fmt: skip


WINDOW_MS = 30_000  # includes/job_logs.lua's RESEND_WINDOW_MS


@pytest.mark.parametrize(
    ("resent", "add_time", "removed_after", "state"),
    [
        pytest.param(1, NOW, 5, -5, id="resent, the job it added removed: nothing added"),
        pytest.param(0, NOW, 5, "waiting", id="a new add at the same time: added"),
        pytest.param(1, NOW + 1, 5, "waiting", id="resent, another add's job removed: added"),
        pytest.param(1, NOW, WINDOW_MS, "waiting", id="removed after the window: added"),
    ],
)
async def test_add_jobs_resent_finds_the_tombstone_of_the_job_its_first_send_added(
    raw: aioredis.Redis,
    k: QueueKeys,
    resent: int,
    add_time: int,
    removed_after: int,
    state: object,
) -> None:
    # Given a job added at NOW, run and removed (remove_on_complete) `removed_after` ms later
    assert await add(raw, k, "a") == "waiting"
    token = await claim_token(raw, k)
    args = complete_args("a", token, remove_now=1, now=NOW + removed_after)
    assert (await call(raw, "complete_job", [*k.group, k.job("a"), k.completed, memo(k)], args))[
        0
    ] == 0
    assert await raw.exists(k.job("a")) == 0

    # When an add of its id comes, sent again or not, with its add time
    result = await add(raw, k, "a", now=add_time, resent=resent)

    # Then only a second send of the add that added the job finds it, within the window
    assert result == state
    assert await raw.exists(k.job("a")) == (state != -5)


# -- claim_jobs -------------------------------------------------------------------------------


async def test_claim_moves_the_oldest_job_to_active_under_a_lease(
    raw: aioredis.Redis, k: QueueKeys
) -> None:
    await add(raw, k, "a")
    await add(raw, k, "b")

    reply = await claim(raw, k)

    next_due, job = reply[0], reply[1]
    assert next_due == -1
    assert job[0] == "a"
    # The token names this claim: the worker, the attempt, and the claim's active event.
    active = (await raw.xrange(k.events))[-1][0]
    assert job[1] == f"w1:1:{active}"
    assert await raw.lrange(k.active, 0, -1) == ["a"]
    assert await raw.zscore(k.leases, "a") == NOW + 30_000
    assert await raw.hget(k.job("a"), "lockToken") == job[1]
    assert await raw.zcard(k.marker) == 1  # "b" is still ready: another worker is woken
    assert (await events(raw, k))[-1] == {"event": "active", "jobId": "a"}


async def test_claim_with_a_clock_offset_runs_on_the_server_clock_plus_the_offset(
    raw: aioredis.Redis, k: QueueKeys
) -> None:
    await add(raw, k, "a")
    seconds, micros = await raw.time()
    before = seconds * 1000 + micros // 1000

    args = [NOW, "w1", 30_000, 1, MAXLEN, "c1", 5_000]
    reply = await call(raw, "claim_jobs", claim_keys(k), args)

    seconds, micros = await raw.time()
    after = seconds * 1000 + micros // 1000
    assert reply[1][0] == "a"
    processed_on = int(await raw.hget(k.job("a"), "processedOn"))
    # ARGV[1] (NOW, a fixed past time) is ignored: the server's clock + 5 s is used instead.
    assert before + 5_000 <= processed_on <= after + 5_000
    assert await raw.zscore(k.leases, "a") == processed_on + 30_000


async def test_claim_of_a_paused_queue_returns_nothing(raw: aioredis.Redis, k: QueueKeys) -> None:
    await add(raw, k, "a")
    await call(raw, "pause_queue", [k.meta, k.marker, k.events], [1, MAXLEN])

    assert await claim(raw, k) == [-1]
    assert await raw.lrange(k.wait, 0, -1) == ["a"]


async def test_claim_promotes_due_delayed_jobs_and_reports_the_next_due(
    raw: aioredis.Redis, k: QueueKeys
) -> None:
    await add(raw, k, "soon", delay=10)
    await add(raw, k, "later", delay=5000)

    reply = await claim(raw, k, count=5, now=NOW + 10)

    assert [job[0] for job in reply[1:]] == ["soon"]
    assert reply[0] == NOW + 5000


async def test_claim_with_nothing_due_reports_the_earliest_delayed_job_and_promotes_none(
    raw: aioredis.Redis, k: QueueKeys
) -> None:
    await add(raw, k, "now")
    await add(raw, k, "later", delay=5000)
    await add(raw, k, "latest", delay=9000)

    reply = await claim(raw, k, count=5, now=NOW + 10)

    assert [job[0] for job in reply[1:]] == ["now"]
    assert reply[0] == NOW + 5000
    assert await raw.zrange(k.delayed, 0, -1) == ["later", "latest"]
    # and with none delayed at all, -1
    await raw.delete(k.delayed)
    assert (await claim(raw, k, now=NOW + 10))[0] == -1


async def test_claims_promote_a_burst_of_due_jobs_a_bounded_number_at_a_time_in_due_order(
    raw: aioredis.Redis, k: QueueKeys
) -> None:
    # Given 250 delayed jobs, all due by the time of the claims
    ids = [f"j{i:03}" for i in range(250)]
    for i, job_id in enumerate(ids):
        await add(raw, k, job_id, delay=10 + i)

    # When one claim runs, then two more
    first = await claim(raw, k, now=NOW + 1000)
    left = await raw.zrange(k.delayed, 0, -1)
    more = [await claim(raw, k, now=NOW + 1000) for _ in range(2)]

    # Then the first promoted the 100 due first, and the claims took jobs in due order
    assert left == ids[100:]
    assert await raw.zcard(k.delayed) == 0
    assert [reply[1][0] for reply in (first, *more)] == ids[:3]
    assert await raw.lrange(k.wait, -2, -1) == [ids[4], ids[3]]


async def test_claim_skips_ids_whose_job_was_deleted(raw: aioredis.Redis, k: QueueKeys) -> None:
    await add(raw, k, "gone")
    await add(raw, k, "here")
    await raw.delete(k.job("gone"))

    reply = await claim(raw, k)

    assert reply[1][0] == "here"


# -- complete_job -----------------------------------------------------------------------------


def complete_args(
    job_id: str, token: str, *, remove_now: int = 0, keep: int = -1, now: int = NOW + 5
) -> list[Any]:
    return [job_id, token, now, '"done"', keep, -1, remove_now, MAXLEN, 0, "w1", 30_000]


async def test_complete_moves_active_to_completed(raw: aioredis.Redis, k: QueueKeys) -> None:
    await add(raw, k, "a")
    token = await claim_token(raw, k)

    reply = await call(
        raw,
        "complete_job",
        [*k.group, k.job("a"), k.completed, memo(k)],
        complete_args("a", token),
    )

    assert reply[0] == 0
    assert await raw.llen(k.active) == 0
    assert await raw.zcard(k.leases) == 0
    assert await raw.zrange(k.completed, 0, -1) == ["a"]
    fields = await raw.hgetall(k.job("a"))
    assert fields["returnvalue"] == '"done"'
    assert fields["attemptsMade"] == "1"
    assert "lockToken" not in fields
    assert (await events(raw, k))[-1] == {
        "event": "completed",
        "jobId": "a",
        "returnvalue": '"done"',
    }


async def test_complete_with_remove_now_deletes_the_job(raw: aioredis.Redis, k: QueueKeys) -> None:
    await add(raw, k, "a")
    token = await claim_token(raw, k)

    await call(
        raw,
        "complete_job",
        [*k.group, k.job("a"), k.completed, memo(k)],
        complete_args("a", token, remove_now=1),
    )

    assert not await raw.exists(k.job("a"))
    assert await raw.zcard(k.completed) == 0


async def test_completions_trim_a_large_finished_set_a_bounded_number_at_a_time(
    raw: aioredis.Redis, k: QueueKeys
) -> None:
    # Given 450 completed jobs, the oldest first
    old = [f"old{i:03}" for i in range(450)]
    for i, job_id in enumerate(old):
        await raw.hset(k.job(job_id), mapping={"name": "n", "data": "{}"})
        await raw.zadd(k.completed, {job_id: NOW - 1000 + i})

    # When three jobs complete, each keeping the newest 10
    sizes = []
    for job_id in ("a", "b", "c"):
        await add(raw, k, job_id)
        token = await claim_token(raw, k)
        await call(
            raw, "complete_job", [*k.group, k.job(job_id), k.completed, memo(k)],
            complete_args(job_id, token, keep=10),
        )  # fmt: skip
        sizes.append(await raw.zcard(k.completed))

    # Then each removed at most 200 of the oldest, with their hashes, and the set is at 10
    assert sizes == [251, 52, 10]
    assert await raw.zrange(k.completed, 0, -1) == [*old[443:], "a", "b", "c"]
    assert not await raw.exists(*(k.job(job_id) for job_id in old[:443]))
    assert await raw.exists(k.job(old[443])) == 1


@NOT_OWNED
async def test_complete_refuses_a_worker_that_does_not_own_the_job(
    raw: aioredis.Redis, k: QueueKeys, setup: str, token: str | None, code: int
) -> None:
    token = await not_owned(raw, k, setup, token)

    reply = await call(
        raw, "complete_job", [*k.group, k.job("a"), k.completed, memo(k)], complete_args("a", token)
    )

    assert reply == [code]
    assert await raw.zcard(k.completed) == 0


# -- retry_job / fail_job / dead_letter_job ---------------------------------------------------


def failure(reason: str = "boom") -> list[Any]:
    attempt = json.dumps({"attempt": 1, "error": reason, "outcome": "failed"})
    return [reason, "RuntimeError", json.dumps("Traceback ...\nRuntimeError: boom"), attempt]


async def retry(raw: aioredis.Redis, k: QueueKeys, token: str, delay: int) -> Any:
    """retry_job of job "a", held under ``token``, backing off ``delay`` ms; its reply."""
    return await call(
        raw,
        "retry_job",
        [*k.group, k.job("a"), memo(k)],
        ["a", token, NOW, delay, *failure(), MAXLEN, 0, "w1", 30_000],
    )


async def test_retry_puts_the_job_in_delayed_with_its_backoff(
    raw: aioredis.Redis, k: QueueKeys
) -> None:
    await add(raw, k, "a", attempts=3)

    reply = await retry(raw, k, await claim_token(raw, k), 250)

    assert reply[0] == 0
    assert await raw.zrange(k.delayed, 0, -1, withscores=True) == [("a", NOW + 250)]
    fields = await raw.hgetall(k.job("a"))
    assert fields["attemptsMade"] == "1"
    assert json.loads(fields["stacktrace"]) == ["Traceback ...\nRuntimeError: boom"]
    assert [e["event"] for e in await events(raw, k)][-2:] == ["retrying", "delayed"]


async def test_retry_without_backoff_puts_a_prioritized_job_back_by_its_priority(
    raw: aioredis.Redis, k: QueueKeys
) -> None:
    await add(raw, k, "a", attempts=3, priority=7)

    reply = await retry(raw, k, await claim_token(raw, k), 0)

    assert reply[0] == 0
    assert await raw.lrange(k.wait, 0, -1) == []
    assert [member for member, _ in await raw.zrange(k.prioritized, 0, -1, withscores=True)] == [
        "a"
    ]
    assert "lockToken" not in await raw.hgetall(k.job("a"))
    assert [e["event"] for e in await events(raw, k)][-2:] == ["retrying", "waiting"]


async def test_retry_by_a_stranger_is_refused(raw: aioredis.Redis, k: QueueKeys) -> None:
    await add(raw, k, "a", attempts=3)
    await claim(raw, k)

    reply = await retry(raw, k, "x:1", 0)

    assert reply == [-2]
    assert await raw.lrange(k.active, 0, -1) == ["a"]


async def test_fail_moves_the_job_to_failed(raw: aioredis.Redis, k: QueueKeys) -> None:
    await add(raw, k, "a")
    token = await claim_token(raw, k)

    reply = await call(
        raw,
        "fail_job",
        [*k.group, k.job("a"), k.failed, memo(k)],
        ["a", token, NOW, *failure(), -1, -1, 0, MAXLEN, 0, "w1", 30_000],
    )

    assert reply[0] == 0
    assert await raw.zrange(k.failed, 0, -1) == ["a"]
    assert await raw.hget(k.job("a"), "failedReason") == "boom"
    assert (await events(raw, k))[-1] == {
        "event": "failed",
        "jobId": "a",
        "failedReason": "boom",
        "attemptsMade": "1",
    }


async def test_fail_of_a_missing_job_returns_not_found(raw: aioredis.Redis, k: QueueKeys) -> None:
    reply = await call(
        raw,
        "fail_job",
        [*k.group, k.job("a"), k.failed, memo(k)],
        ["a", "w1:1", NOW, *failure(), -1, -1, 0, MAXLEN, 0, "w1", 30_000],
    )
    assert reply == [-1]


def dead_letter_keys(k: QueueKeys, d: QueueKeys, job_id: str, dl_id: str) -> list[str]:
    return [*k.group, k.job(job_id), *d.dead_letter_group, d.job(dl_id), memo(k)]


async def test_dead_letter_moves_the_job_with_its_history_in_one_step(
    raw: aioredis.Redis, k: QueueKeys, d: QueueKeys
) -> None:
    payload = '{"big":123456789012345678901234567890,"e":[],"o":{}}'
    await add(raw, k, "a", data=payload)
    token = await claim_token(raw, k)

    reply = await call(
        raw,
        "dead_letter_job",
        dead_letter_keys(k, d, "a", "dl1"),
        [
            "a",
            token,
            NOW,
            *failure(),
            "attempts_exhausted",
            "src",
            "src-dlq",
            "dl1",
            MAXLEN,
            0,
            "w1",
            30_000,
        ],
    )

    assert reply[0] == 0
    assert not await raw.exists(k.job("a"))
    assert await raw.llen(k.active) == 0
    assert await raw.zcard(k.leases) == 0
    assert await raw.zcard(k.failed) == 0
    assert await raw.zrange(d.dl_index("s", "pending"), 0, -1, withscores=True) == [
        ("dl1", NOW * 1000 + 1)
    ]
    assert not await raw.exists(d.wait)
    dl = await raw.hgetall(d.job("dl1"))
    assert dl["data"] == payload
    assert dl["name"] == "name"
    assert dl["dlq:sourceQueue"] == "src"
    assert dl["dlq:originalJobId"] == "a"
    assert dl["dlq:reason"] == "attempts_exhausted"
    assert dl["dlq:attemptsMade"] == "1"
    assert json.loads(dl["dlq:stacktrace"]) == ["Traceback ...\nRuntimeError: boom"]
    assert [e["event"] for e in await events(raw, k)][-2:] == ["failed", "deadLettered"]
    assert (await events(raw, d))[-1] == {"event": "waiting", "jobId": "dl1"}


async def test_dead_letter_by_a_stranger_is_refused_and_changes_nothing(
    raw: aioredis.Redis, k: QueueKeys, d: QueueKeys
) -> None:
    await add(raw, k, "a")
    await claim(raw, k)

    reply = await call(
        raw,
        "dead_letter_job",
        dead_letter_keys(k, d, "a", "dl1"),
        [
            "a",
            "x:9",
            NOW,
            *failure(),
            "unrecoverable",
            "src",
            "src-dlq",
            "dl1",
            MAXLEN,
            0,
            "w1",
            30_000,
        ],
    )

    assert reply == [-2]
    assert await raw.lrange(k.active, 0, -1) == ["a"]
    assert not await raw.exists(d.dl_index("s", "pending"))


# -- sweep_stalled / extend_locks -------------------------------------------------------------


async def test_sweep_requeues_a_stalled_job_then_dead_letters_it_past_the_limit(
    raw: aioredis.Redis, k: QueueKeys, d: QueueKeys
) -> None:
    await add(raw, k, "a")
    await claim(raw, k)
    keys = [*k.group, k.failed, *d.dead_letter_group, d.job_prefix]

    first = await call(raw, "sweep_stalled", keys, [NOW + 30_001, 1, MAXLEN, "src", "src-dlq", 10])
    assert first == [["a"], [], [], 0, []]
    assert await raw.lrange(k.wait, 0, -1) == ["a"]
    assert (await events(raw, k))[-2:] == [
        {"event": "stalled", "jobId": "a"},
        {"event": "waiting", "jobId": "a"},
    ]

    await claim(raw, k)
    second = await call(raw, "sweep_stalled", keys, [NOW + 30_001, 1, MAXLEN, "src", "src-dlq", 10])
    assert second == [[], [], ["a"], 0, []]
    (dl_id,) = await raw.zrange(d.dl_index("s", "pending"), 0, -1)
    dl = await raw.hgetall(d.job(dl_id))
    assert dl["dlq:reason"] == "stalled"
    assert [a["outcome"] for a in json.loads(dl["dlq:attempts"])] == ["stalled", "stalled"]


@pytest.mark.parametrize("old_token", [False, True])
async def test_a_stalled_attempt_names_the_worker_whose_lease_lapsed(
    raw: aioredis.Redis, k: QueueKeys, old_token: bool
) -> None:
    # Given job "a" claimed by a worker whose name holds ':', under this version's token or
    # (a job claimed before an upgrade) one of lazarus 0.1's form '<worker>:<attempt>'
    await add(raw, k, "a")
    args = [NOW, "host:42:ab12", 30_000, 1, MAXLEN, uuid.uuid4().hex]
    await call(raw, "claim_jobs", [*k.group, k.reply("host:42:ab12", "claim")], args)
    if old_token:
        await raw.hset(k.job("a"), "lockToken", "host:42:ab12:1")

    # When its lease lapses and the sweep fails it
    await call(raw, "sweep_stalled", [*k.group, k.failed], [NOW + 30_001, 0, MAXLEN, "src", "", 10])

    # Then its attempt names that worker
    (attempt,) = json.loads(await raw.hget(k.job("a"), "attempts") or "[]")
    assert (attempt["outcome"], attempt["worker"]) == ("stalled", "host:42:ab12")


async def test_sweep_without_a_dead_letter_queue_fails_the_job(
    raw: aioredis.Redis, k: QueueKeys
) -> None:
    await add(raw, k, "a")
    await claim(raw, k)

    reply = await call(
        raw, "sweep_stalled", [*k.group, k.failed], [NOW + 30_001, 0, MAXLEN, "src", "", 10]
    )

    assert reply == [[], ["a"], [], 0, []]
    assert await raw.zrange(k.failed, 0, -1) == ["a"]


@pytest.mark.parametrize(
    ("remove_on_fail", "worker", "kept"),
    [(True, [], []), (1, [], ["b"]), ({"count": 5, "age": 10}, [], ["b"]),
     ("absent", [], ["a", "b"]), ("absent", [-1, -1, 1], []), (1, [-1, -1, 1], ["b"])],
    ids=["true", "count", "age", "none", "the worker's", "its own over the worker's"],
)  # fmt: skip
async def test_sweep_fails_a_stalled_job_under_its_own_remove_on_fail(
    raw: aioredis.Redis, k: QueueKeys, remove_on_fail: Any, worker: list[int], kept: list[str]
) -> None:
    # Given two jobs with a remove_on_fail (or none, then the sweeping worker's), each
    # claimed by a worker that died
    opts = {"attempts": 1, "delay": 0}
    if remove_on_fail != "absent":
        opts["removeOnFail"] = remove_on_fail
    for job_id, at in (("a", NOW), ("b", NOW + 20_000)):
        await add(raw, k, job_id)
        await raw.hset(k.job(job_id), "opts", json.dumps(opts))
        await claim(raw, k, now=at)
        await raw.rpush(k.logs(job_id), "working")

    # When the stall sweep fails them, the second 20 s after the first
    for at, job_id in ((NOW + 30_001, "a"), (NOW + 50_001, "b")):
        reply = await call(
            raw, "sweep_stalled", [*k.group, k.failed],
            [at, 0, MAXLEN, "src", "", 10, 0, "", *worker],
        )  # fmt: skip
        assert reply == [[], [job_id], [], 0, []]

    # Then the failed set keeps what each job's remove_on_fail keeps, with its hash and logs
    assert await raw.zrange(k.failed, 0, -1) == kept
    for job_id in ("a", "b"):
        left = 2 if job_id in kept else 0
        assert await raw.exists(k.job(job_id), k.logs(job_id)) == left


@pytest.mark.parametrize("replay", [False, True], ids=["job", "replay"])
@pytest.mark.parametrize("exhaustion", ["fail", "discard"])
async def test_sweep_follows_a_stalled_jobs_on_exhaustion_over_any_dead_letter_queue(
    raw: aioredis.Redis, k: QueueKeys, d: QueueKeys, exhaustion: str, replay: bool
) -> None:
    # Given a job (or a replay of another dead letter queue's) whose on_exhaustion is fail or
    # discard, holding logs and a deduplication id, claimed by a worker that died
    await add(raw, k, "a")
    opts = {"attempts": 1, "delay": 0, "onExhaustion": exhaustion}
    await raw.hset(k.job("a"), mapping={"opts": json.dumps(opts), "deid": "order-7"})
    if replay:
        await raw.hset(k.job("a"), mapping={"replayOf": "x", "replayDlq": "home-dlq"})
    await raw.set(k.dedup("order-7"), "a")
    await claim(raw, k)
    await raw.rpush(k.logs("a"), "working")

    # When a sweep with a dead letter queue finds it stalled too often
    keys = [*k.group, k.failed, *d.dead_letter_group, d.job_prefix]
    reply = await call(raw, "sweep_stalled", keys, [NOW + 30_001, 0, MAXLEN, "src", "src-dlq", 10])

    # Then it is failed, or deleted with its logs and deduplication id, as a worker's
    # failure for good would leave it: no dead letter, no move
    assert reply == [[], ["a"], [], 0, []]
    assert await raw.zcard(d.dl_index("s", "pending")) == 0 and await raw.hlen(k.moves) == 0
    if exhaustion == "fail":
        assert await raw.zrange(k.failed, 0, -1) == ["a"]
        assert (await events(raw, k))[-1]["event"] == "failed"
    else:
        assert await raw.zcard(k.failed) == 0
        assert await raw.exists(k.job("a"), k.logs("a"), k.dedup("order-7")) == 0
        assert (await events(raw, k))[-1] == {
            "event": "discarded", "jobId": "a", "failedReason":
            "job stalled more than allowable limit", "attemptsMade": "1",
        }  # fmt: skip


async def test_a_claim_past_thousands_of_holes_drops_a_bounded_share_and_wakes_a_worker(
    raw: aioredis.Redis, k: QueueKeys
) -> None:
    # Given a job behind 2,500 holes (the places of jobs removed from deep inside the list)
    await add(raw, k, "a")
    await raw.rpush(k.wait, *[""] * 2500)
    await raw.hset(k.meta, "holes", 2500)

    # When workers claim, each call woken by the marker the one before left
    replies, lengths = [], []
    while not replies or replies[-1][1:] == []:
        await raw.delete(k.marker)
        replies.append(await claim(raw, k))
        lengths.append(await raw.llen(k.wait))
        assert len(replies) <= 5
        if replies[-1][1:] == []:
            assert await raw.zcard(k.marker) == 1  # the next claim comes at once

    # Then each call dropped at most a thousand holes, and the third claimed the job
    assert lengths == [1501, 501, 0]
    assert replies[-1][1][0] == "a"
    assert await raw.hget(k.meta, "holes") is None


async def test_an_arrival_forgets_a_bounded_share_of_the_moves_of_a_week_ago(
    raw: aioredis.Redis, d: QueueKeys
) -> None:
    # Given 250 moves taken in more than a week ago, and one yesterday
    week = 7 * 24 * 3600 * 1000
    await raw.zadd(d.moves_in, {f"old{i}": NOW - week - 1 - i for i in range(250)})
    await raw.zadd(d.moves_in, {"recent": NOW - week // 7})

    # When one move arrives
    move = {
        "kind": "dead_letter",
        "id": "a",
        "dl": "dl1",
        "source": "src",
        "target": "src-dlq",
        "reason": "stalled",
        "at": NOW,
        "fields": {"name": "n", "data": "{}"},
        "logs": [],
    }
    keys = [*d.dead_letter_group, d.job("dl1"), d.moves_in]
    assert await call(raw, "dead_letter_in", keys, [json.dumps(move), NOW, MAXLEN]) == ["dl1", 1]

    # Then it forgot the 100 oldest of those past a week, not all 250 at once; the recent
    # one and the new one stay
    left = set(await raw.zrange(d.moves_in, 0, -1))
    assert len(left) == 152 and {"recent", "dl1"} <= left
    assert not {f"old{i}" for i in range(150, 250)} & left


async def test_sweep_leaves_live_leases_alone(raw: aioredis.Redis, k: QueueKeys) -> None:
    await add(raw, k, "a")
    await claim(raw, k)

    reply = await call(
        raw, "sweep_stalled", [*k.group, k.failed], [NOW + 10, 0, MAXLEN, "src", "", 10]
    )

    assert reply == [[], [], [], 0, []]
    assert await raw.lrange(k.active, 0, -1) == ["a"]


async def test_a_sweep_stopped_by_its_budget_says_so_and_the_next_goes_on(
    raw: aioredis.Redis, k: QueueKeys, d: QueueKeys
) -> None:
    # Given 12 jobs whose leases expired, each stalled too often to run again
    ids = [f"j{i:02}" for i in range(12)]
    for job_id in ids:
        await add(raw, k, job_id)
    await claim(raw, k, count=12)
    await raw.zadd(k.leases, dict.fromkeys(ids, 0))
    keys = [*k.group, k.failed, *d.dead_letter_group, d.job_prefix]

    # When sweeps with a budget of 1 microsecond run until one says it is done
    replies = []
    while not replies or replies[-1][3] == 1:
        replies.append(
            await call(raw, "sweep_stalled", keys, [NOW, 0, MAXLEN, "src", "src-dlq", 100, 0, 1])
        )
        assert len(replies) <= 12

    # Then each stopped after a few jobs, and together they dead-lettered every one once
    assert len(replies) > 1 and all(len(r[2]) < 12 for r in replies)
    assert sorted(i for r in replies for i in r[2]) == ids
    assert await raw.zcard(d.dl_index("s", "pending")) == 12


async def test_a_sweep_run_twice_dead_letters_each_job_once(
    raw: aioredis.Redis, k: QueueKeys, d: QueueKeys
) -> None:
    await add(raw, k, "a")
    await add(raw, k, "b")
    await claim(raw, k, count=2)
    await raw.zadd(k.leases, {"a": 0, "b": 0})
    keys = [*k.group, k.failed, *d.dead_letter_group, d.job_prefix]
    args = [NOW, 0, MAXLEN, "src", "src-dlq", 10]

    first = await call(raw, "sweep_stalled", keys, args)
    second = await call(raw, "sweep_stalled", keys, args)

    assert sorted(first[2]) == ["a", "b"]
    assert second == [[], [], [], 0, []]
    ids = await raw.zrange(d.dl_index("s", "pending"), 0, -1)
    assert len(set(ids)) == 2
    assert {await raw.hget(d.job(i), "dlq:originalJobId") for i in ids} == {"a", "b"}


@pytest.mark.parametrize("own_dlq", ["src-dlq", ""])
async def test_a_replay_of_another_dlq_stalled_out_leaves_as_a_move_to_that_dlq(
    raw: aioredis.Redis, k: QueueKeys, d: QueueKeys, own_dlq: str
) -> None:
    # Given a replayed job of dead letter 'x' in 'home-dlq', claimed, its lease lapsed
    await add(raw, k, "a")
    await raw.hset(k.job("a"), mapping={"replayOf": "x", "replayDlq": "home-dlq"})
    await claim(raw, k)
    keys = [*k.group, k.failed, *((*d.dead_letter_group, d.job_prefix) if own_dlq else ())]

    # When a sweep with another dead letter queue (or none) finds it stalled too often
    reply = await call(raw, "sweep_stalled", keys, [NOW + 30_001, 0, MAXLEN, "src", own_dlq, 10])

    # Then it left as a move to 'home-dlq', for the caller to finish: not into the sweep's
    # own dead letter queue, not into failed
    requeued, failed, dead, _, (move_id,) = reply
    assert (requeued, failed, dead) == ([], [], ["a"])
    move = json.loads(await raw.hget(k.moves, move_id))
    assert (move["target"], move["id"], move["reason"]) == ("home-dlq", "a", "stalled")
    assert move["fields"]["replayOf"] == "x"
    assert not await raw.exists(k.job("a"))
    assert await raw.zcard(k.failed) == 0
    assert await raw.zcard(d.dl_index("s", "pending")) == 0


async def test_a_sweep_never_overwrites_a_dead_letter_that_has_its_id(
    raw: aioredis.Redis, k: QueueKeys, d: QueueKeys
) -> None:
    await add(raw, k, "a")
    await claim(raw, k)
    await raw.zadd(k.leases, {"a": 0})
    # The id the sweep derives for a's first attempt at NOW is taken already.
    taken = hashlib.sha1(b"src\0a\0" + b"1\0" + str(NOW).encode()).hexdigest()[:32]
    await raw.hset(d.job(taken), mapping={"name": "earlier", "data": "1"})
    keys = [*k.group, k.failed, *d.dead_letter_group, d.job_prefix]

    await call(raw, "sweep_stalled", keys, [NOW, 0, MAXLEN, "src", "src-dlq", 10])

    assert await raw.hgetall(d.job(taken)) == {"name": "earlier", "data": "1"}
    (dl_id,) = await raw.zrange(d.dl_index("s", "pending"), 0, -1)
    assert dl_id != taken
    assert await raw.hget(d.job(dl_id), "dlq:originalJobId") == "a"


async def test_extend_locks_renews_leases_while_redis_is_at_its_memory_limit(
    raw: aioredis.Redis, k: QueueKeys
) -> None:
    # Given a running job, and Redis refusing every write that could grow memory
    await add(raw, k, "a")
    token = await claim_token(raw, k)
    async with out_of_memory(raw):
        with pytest.raises(OutOfMemoryError):
            await raw.set(k.base + "probe", "x")  # (the limit is in force)

        # When its worker renews the lease
        lost = await call(raw, "extend_locks", [k.leases, k.job_prefix], [NOW + 99_000, "a", token])

    # Then the lease is renewed: renewal grows nothing, so the limit must not stop it
    assert lost == [[], [], None]
    assert await raw.zscore(k.leases, "a") == NOW + 99_000


@pytest.mark.skipif(ON_CLUSTER, reason="limits the memory of one server")
async def test_at_the_memory_limit_a_job_completes_and_claims_the_next_but_adds_are_refused(
    raw: aioredis.Redis, k: QueueKeys
) -> None:
    # Given two waiting jobs, one of them running, and Redis at its memory limit (the scripts
    # loaded before, as a running worker and producer have them)
    await script_ready(raw, _scripts.load("complete_job"))
    await add(raw, k, "a")
    await add(raw, k, "b")
    token = await claim_token(raw, k)
    async with out_of_memory(raw):
        # When its worker completes it (and claims the next), and a producer adds a job
        args = complete_args("a", token)
        args[8] = 1  # fetch_next
        reply = await call(raw, "complete_job", [*k.group, k.job("a"), k.completed, memo(k)], args)
        with pytest.raises((OutOfMemoryError, ResponseError), match=r"OOM|maxmemory"):
            await add(raw, k, "c")

    # Then the outcome went through, the next job is claimed, and the add wrote nothing
    assert reply[0] == 0 and reply[2][0] == "b"
    assert await raw.zscore(k.completed, "a") is not None
    assert await raw.lrange(k.active, 0, -1) == ["b"]
    assert await raw.exists(k.job("c")) == 0
    assert await raw.llen(k.wait) == 0


async def test_extend_locks_renews_held_leases_and_reports_lost_ones(
    raw: aioredis.Redis, k: QueueKeys
) -> None:
    await add(raw, k, "a")
    await add(raw, k, "b")
    token = (await claim(raw, k, count=2))[1][1]

    lost = await call(
        raw, "extend_locks", [k.leases, k.job_prefix], [NOW + 99_000, "a", token, "b", "stolen:1"]
    )

    assert lost == [["b"], [], None]
    assert await raw.zscore(k.leases, "a") == NOW + 99_000
    assert await raw.zscore(k.leases, "b") == NOW + 30_000


async def test_extend_locks_reports_the_held_jobs_asked_to_stop(
    raw: aioredis.Redis, k: QueueKeys
) -> None:
    await add(raw, k, "a")
    await add(raw, k, "b")
    claimed = await claim(raw, k, count=2)
    tokens = {job[0]: job[1] for job in claimed[1:]}
    await raw.hset(k.job("a"), "cancel", "not needed any more")

    reply = await call(
        raw, "extend_locks", [k.leases, k.job_prefix],
        [NOW + 99_000, "a", tokens["a"], "b", tokens["b"]],
    )  # fmt: skip

    # Still renewed: its worker records the cancellation as the attempt's outcome
    assert reply == [[], ["a", "not needed any more"], None]
    assert await raw.zscore(k.leases, "a") == NOW + 99_000


# -- pause_queue / remove_job / clean_jobs ----------------------------------------------------


async def test_pause_and_resume_report_whether_the_state_changed(
    raw: aioredis.Redis, k: QueueKeys
) -> None:
    keys = [k.meta, k.marker, k.events]
    assert await call(raw, "pause_queue", keys, [1, MAXLEN]) == 1
    assert await call(raw, "pause_queue", keys, [1, MAXLEN]) == 0
    assert await call(raw, "pause_queue", keys, [0, MAXLEN]) == 1
    assert await call(raw, "pause_queue", keys, [0, MAXLEN]) == 0
    assert [e["event"] for e in await events(raw, k)] == ["paused", "resumed"]


async def test_remove_job_codes(raw: aioredis.Redis, k: QueueKeys) -> None:
    keys = [*k.group, k.completed, k.failed]
    await add(raw, k, "a")
    await add(raw, k, "b")
    await claim(raw, k)  # "a" is now active

    assert await call(raw, "remove_job", [*keys, k.job("a")], ["a", MAXLEN]) == -6
    assert await call(raw, "remove_job", [*keys, k.job("b")], ["b", MAXLEN]) == 1
    assert await call(raw, "remove_job", [*keys, k.job("b")], ["b", MAXLEN]) == -1
    assert not await raw.exists(k.job("b"))
    assert await raw.llen(k.wait) == 0


async def test_remove_job_searches_the_wait_list_only_for_a_job_in_no_set(
    raw: aioredis.Redis, k: QueueKeys
) -> None:
    # Given a completed job, and one waiting
    keys = [*k.group, k.completed, k.failed]
    await add(raw, k, "done")
    token = await claim_token(raw, k)
    await call(
        raw, "complete_job", [*k.group, k.job("done"), k.completed, memo(k)],
        complete_args("done", token),
    )  # fmt: skip
    await add(raw, k, "waiting")

    # When the completed one is removed
    await raw.config_resetstat()
    assert await call(raw, "remove_job", [*keys, k.job("done")], ["done", MAXLEN]) == 1

    # Then no command read the wait list, and the other job waits still
    ran = set(await raw.info("commandstats"))
    assert "cmdstat_zrem" in ran and not ran & {"cmdstat_lpos", "cmdstat_lrem"}
    assert await raw.lrange(k.wait, 0, -1) == ["waiting"]
    assert await raw.zcard(k.completed) == 0 and not await raw.exists(k.job("done"))


async def test_clean_removes_finished_jobs_older_than_the_cutoff(
    raw: aioredis.Redis, k: QueueKeys
) -> None:
    for job_id, finished in (("old", NOW - 100), ("new", NOW)):
        await raw.hset(k.job(job_id), mapping={"name": "n", "data": "1"})
        await raw.zadd(k.completed, {job_id: finished})

    removed, resume, _ = await call(
        raw, "clean_jobs", [*k.group, k.completed, k.failed],
        ["completed", NOW - 50, 10, MAXLEN, 4000, 0, 0, 1],
    )  # fmt: skip

    assert (removed, resume) == (["old"], -1)
    assert not await raw.exists(k.job("old"))
    assert await raw.zrange(k.completed, 0, -1) == ["new"]
    assert (await events(raw, k))[-1] == {"event": "cleaned", "count": "1", "state": "completed"}


async def test_clear_move_keeps_the_in_transit_mark_of_a_newer_move_of_the_same_job(
    raw: aioredis.Redis, k: QueueKeys
) -> None:
    # Given two moves of job 'j' out of 'src', the newer one marking the job in transit
    await raw.hset(k.moves, mapping={"m1": "{}", "m2": "{}", "job:j": "m2"})

    # When the older move is cleared, then cleared again
    first = await call(raw, "clear_move", [k.moves], ["m1", "j"])
    again = await call(raw, "clear_move", [k.moves], ["m1", "j"])

    # Then its entry went once, and the newer move's entry and mark stay
    assert (first, again) == (1, 0)
    assert await raw.hgetall(k.moves) == {"m2": "{}", "job:j": "m2"}
    # And clearing the newer move takes its mark with it
    assert await call(raw, "clear_move", [k.moves], ["m2", "j"]) == 1
    assert await raw.exists(k.moves) == 0
