"""The dead letter store's scripts called directly: the index keys they leave behind, their
return codes and events. Dead letters are set up as lazarus 0.1 wrote them (a hash in the
waiting list) and moved into the store by migrate_dead_letters, which is tested on the way."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis.asyncio as aioredis

from lazarus._keys import QueueKeys
from lazarus.dead_letter.filters import combo_key

from .test_transitions import MAXLEN, NOW, add, call, claim_token, dead_letter_keys, events


@pytest.fixture
def k(prefix: str) -> QueueKeys:
    return QueueKeys(prefix, "src")


@pytest.fixture
def d(prefix: str) -> QueueKeys:
    return QueueKeys(prefix, "src-dlq")


async def make_dead_letter(raw: aioredis.Redis, d: QueueKeys, dl_id: str, **fields: Any) -> None:
    base = {
        "name": "email",
        "data": '{"to":"a"}',
        "opts": "{}",
        "timestamp": NOW,
        "dlq:sourceQueue": "src",
        "dlq:originalJobId": f"orig-{dl_id}",
        "dlq:failedReason": "SMTP timeout",
        "dlq:errorType": "TimeoutError",
        "dlq:deadLetteredAt": NOW,
        "dlq:originalOpts": '{"attempts":2,"delay":0}',
        "dlq:reason": "attempts_exhausted",
        "dlq:replayCount": 0,
        "dlq:priority": 0,
        "dlq:delay": 0,
        "dlq:atm": 2,
    }
    await raw.hset(d.job(dl_id), mapping={**base, **fields})
    await raw.lpush(d.wait, dl_id)
    waiting = await raw.llen(d.wait)
    assert await call(raw, "migrate_dead_letters", list(d.group), [waiting]) == [waiting, 1]


def query_args(**f: str) -> list[Any]:
    names = ("since", "until", "source_queue", "name", "error_type", "reason", "status",
             "name_prefix", "failed_reason", "text", "detail")  # fmt: skip
    order = f.pop("order", "desc")
    cursor = f.pop("cursor", ("", ""))
    limit = f.pop("limit", "100")
    return [order, *cursor, limit, 1000, 1_000_000, *(f.get(n, "") for n in names)]


async def query(raw: aioredis.Redis, d: QueueKeys, **f: Any) -> Any:
    return await call(raw, "query_dead_letters", [d.dl, d.job_prefix], query_args(**f))


# -- migrate / dead_letter_job ----------------------------------------------------------------


async def test_migrate_indexes_dead_letters_and_keeps_ordinary_jobs_waiting(
    raw: aioredis.Redis, d: QueueKeys
) -> None:
    await raw.hset(d.job("plain"), mapping={"name": "n", "data": "1"})
    await raw.lpush(d.wait, "plain", "ghost")

    await make_dead_letter(raw, d, "d1", name="sms")

    assert await raw.lrange(d.wait, 0, -1) == ["plain"]
    assert await raw.zrange(d.dl_index("s", "pending"), 0, -1) == ["d1"]
    assert await raw.zrange(d.dl_index("n", "sms"), 0, -1) == ["d1"]
    assert await raw.zrange(d.dl_index("s", "pending"), 0, -1) == ["d1"]
    assert await raw.zrange(d.dl_values("n"), 0, -1) == ["sms"]
    assert await raw.hget(d.dl_origins, "orig-d1") == "d1"
    full = {"q": "src", "n": "sms", "e": "TimeoutError", "r": "attempts_exhausted", "s": "pending"}
    assert await raw.hgetall(d.dl_counts) == {combo_key(full): "1"}
    assert await raw.hget(d.job("d1"), "dlq:status") == "pending"
    assert not await raw.hexists(d.job("d1"), "opts")


async def test_dead_letter_job_writes_every_index_in_the_same_step(
    raw: aioredis.Redis, k: QueueKeys, d: QueueKeys
) -> None:
    await add(raw, k, "a")
    token = await claim_token(raw, k)

    await call(
        raw,
        "dead_letter_job",
        dead_letter_keys(k, d, "a", "dl1"),
        ["a", token, NOW, "boom", "RuntimeError", '"tb"', "{}", "unrecoverable", "src",
         "src-dlq", "dl1", MAXLEN, 0, "w1", 30_000],
    )  # fmt: skip

    score = NOW * 1000 + 1
    for code, value in [("q", "src"), ("n", "name"), ("e", "RuntimeError"),
                        ("r", "unrecoverable"), ("s", "pending")]:  # fmt: skip
        assert await raw.zrange(d.dl_index(code, value), 0, -1, withscores=True) == [("dl1", score)]
    assert await raw.zrange(d.dl_values("n"), 0, -1) == ["name"]
    assert await raw.zrange(d.dl_values("s"), 0, -1) == ["pending"]
    full = {"q": "src", "n": "name", "e": "RuntimeError", "r": "unrecoverable", "s": "pending"}
    assert await raw.hgetall(d.dl_counts) == {combo_key(full): "1"}
    assert await raw.hget(d.dl_origins, "a") == "dl1"


# -- query_dead_letters -----------------------------------------------------------------------


async def test_query_walks_newest_first_and_filters_exactly(
    raw: aioredis.Redis, d: QueueKeys
) -> None:
    await make_dead_letter(raw, d, "d1")
    await make_dead_letter(raw, d, "d2", name="sms")
    await make_dead_letter(raw, d, "d3", **{"dlq:failedReason": "Bad a.b( input"})

    everything = await query(raw, d)
    by_name = await query(raw, d, name="email")
    literal = await query(raw, d, failed_reason="a.b(")
    oldest = await query(raw, d, order="asc")
    nothing = await query(raw, d, error_type="KeyError")

    assert everything[0] == 1
    assert everything[4] == ["d3", "d2", "d1"]
    assert by_name[4] == ["d3", "d1"]
    assert literal[4] == ["d3"]
    assert oldest[4] == ["d1", "d2", "d3"]
    assert nothing == [1, "", "", 0, []]


async def test_query_resumes_from_its_cursor_without_skipping_or_repeating(
    raw: aioredis.Redis, d: QueueKeys
) -> None:
    for n in range(7):
        await make_dead_letter(raw, d, f"d{n}")  # all in one millisecond

    seen: list[str] = []
    cursor = ("", "")
    while True:
        done, score, last, _examined, found = await query(raw, d, limit="3", cursor=cursor)
        seen += found
        cursor = (score, last)
        if done:
            break

    assert seen == [f"d{n}" for n in range(6, -1, -1)]


@pytest.mark.parametrize("order", ["desc", "asc"])
@pytest.mark.parametrize("budget", [1000, 2], ids=["ids-only chunks", "tie wider than a chunk"])
async def test_query_resumes_through_dead_letters_of_one_score(
    raw: aioredis.Redis, d: QueueKeys, order: str, budget: int
) -> None:
    # Given six dead letters, four of them tied at one arrival score in every index
    for n in range(6):
        await make_dead_letter(raw, d, f"d{n}")
    tied = NOW * 1000 + 3  # between d0 (the first of the millisecond) and d5
    async for key in raw.scan_iter(match=f"{d.dl}i:*"):
        await raw.zadd(key, {f"d{n}": tied for n in range(1, 5)}, xx=True)
    expected = ["d5", "d4", "d3", "d2", "d1", "d0"]  # equal scores: by id, as Redis orders them

    # When walking them two at a time (by name: one index drives), resuming from each cursor
    seen: list[str] = []
    for flt in ({"name": "email"}, {}):
        cursor, found_here = ("", ""), []
        while True:
            args = query_args(order=order, limit="2", cursor=cursor, **flt)
            args[4] = budget
            done, score, last, _examined, found = await call(
                raw, "query_dead_letters", [d.dl, d.job_prefix], args
            )
            found_here += found
            cursor = (score, last)
            if done:
                break
        seen.append(",".join(found_here))

    # Then every dead letter comes once, in order, whichever index drives
    want = ",".join(expected if order == "desc" else expected[::-1])
    assert seen == [want, want]


async def test_query_stops_at_its_entry_budget_and_reports_where(
    raw: aioredis.Redis, d: QueueKeys
) -> None:
    for n in range(5):
        await make_dead_letter(raw, d, f"d{n}", name="sms" if n == 0 else "email")

    args = query_args(name_prefix="sm")
    args[4] = 2  # a budget of two entries: the walk must stop early, name prefix or not
    by_prefix = await call(raw, "query_dead_letters", [d.dl, d.job_prefix], args)
    args = query_args(failed_reason="nothing like it")
    args[4] = 2
    budget = await call(raw, "query_dead_letters", [d.dl, d.job_prefix], args)

    assert by_prefix[4] == ["d0"]
    assert budget[0] == 0
    assert budget[3] == 2
    assert budget[4] == []
    assert budget[2] == "d3"


async def test_query_with_detail_returns_the_indexed_fields(
    raw: aioredis.Redis, d: QueueKeys
) -> None:
    await make_dead_letter(raw, d, "d1")

    result = await query(raw, d, detail="1")

    assert result[4] == [
        ["d1", "src", "email", "TimeoutError", "attempts_exhausted", "pending", str(NOW),
         str(NOW * 1000 + 1)]
    ]  # fmt: skip


# -- replay / purge ---------------------------------------------------------------------------


def replay_keys(d: QueueKeys, k: QueueKeys, pairs: list[tuple[str, str]]) -> list[str]:
    keys = [d.dl, d.events, d.meta, *k.group]
    for dl_id, new_id in pairs:
        keys += [d.job(dl_id), k.job(new_id)]
    return keys


# ... budget, since, tally
REPLAY_HEAD = [NOW, MAXLEN, "src", "dlq", "operator:ada", "", "", 2000, "", ""]


async def test_replay_creates_the_job_and_moves_the_dead_letter_to_processing(
    raw: aioredis.Redis, k: QueueKeys, d: QueueKeys
) -> None:
    await make_dead_letter(raw, d, "d1", **{"dlq:replayCount": 2})

    result = await call(
        raw, "replay_dead_letters", replay_keys(d, k, [("d1", "n1")]),
        [*REPLAY_HEAD, "d1", "n1", "", "", "", ""],
    )  # fmt: skip

    assert result == ["waiting"]
    assert await raw.zrange(d.dl_index("s", "processing"), 0, -1) == ["d1"]
    assert not await raw.exists(d.dl_index("s", "pending"))
    assert await raw.zrange(d.dl_values("s"), 0, -1) == ["processing"]
    assert list(await raw.hgetall(d.dl_counts)) == [
        "q3:srcn5:emaile12:TimeoutErrorr18:attempts_exhausteds10:processing"
    ]
    letter = await raw.hgetall(d.job("d1"))
    assert (letter["dlq:status"], letter["dlq:replayJob"], letter["dlq:replayQueue"]) == (
        "processing", "n1", "src",
    )  # fmt: skip
    assert (letter["dlq:lastReplayedAt"], letter["dlq:replayedBy"]) == (str(NOW), "operator:ada")
    assert json.loads(letter["dlq:timeline"]) == [{
        "at": NOW, "from": "pending", "to": "processing", "actor": "operator:ada", "note": None,
        "job": "n1", "queue": "src",
    }]  # fmt: skip
    job = await raw.hgetall(k.job("n1"))
    assert job["data"] == '{"to":"a"}'
    assert job["opts"] == '{"attempts":2,"delay":0}'
    assert job["attemptsMade"] == "0"
    assert job["rc"] == "3"
    assert (job["replayOf"], job["replayDlq"]) == ("d1", "dlq")
    assert await raw.lrange(k.wait, 0, -1) == ["n1"]
    assert (await events(raw, d))[-1] == {
        "event": "replayed", "jobId": "d1", "newJobId": "n1", "queue": "src",
    }  # fmt: skip


async def test_replay_with_a_new_payload_keeps_the_old_one_in_the_timeline(
    raw: aioredis.Redis, k: QueueKeys, d: QueueKeys
) -> None:
    await make_dead_letter(raw, d, "d1")

    await call(
        raw, "replay_dead_letters", replay_keys(d, k, [("d1", "n1")]),
        [*REPLAY_HEAD, "d1", "n1", "", "", "", '{"to":"b"}'],
    )  # fmt: skip

    assert await raw.hget(k.job("n1"), "data") == '{"to":"b"}'
    assert await raw.hget(d.job("d1"), "data") == '{"to":"b"}'
    [entry] = json.loads(await raw.hget(d.job("d1"), "dlq:timeline"))
    assert entry["replacedData"] == '{"to":"a"}'


async def test_a_dead_letter_in_processing_is_not_replayed_again(
    raw: aioredis.Redis, k: QueueKeys, d: QueueKeys
) -> None:
    await make_dead_letter(raw, d, "d1")
    await call(raw, "replay_dead_letters", replay_keys(d, k, [("d1", "n1")]),
               [*REPLAY_HEAD, "d1", "n1", "", "", "", ""])  # fmt: skip

    again = await call(raw, "replay_dead_letters", replay_keys(d, k, [("d1", "n2")]),
                       [*REPLAY_HEAD, "d1", "n2", "", "", "", ""])  # fmt: skip

    assert again == [-6]
    assert not await raw.exists(k.job("n2"))
    assert await raw.lrange(k.wait, 0, -1) == ["n1"]


async def test_replay_sent_again_reports_the_job_it_made_and_makes_no_other(
    raw: aioredis.Redis, k: QueueKeys, d: QueueKeys
) -> None:
    await make_dead_letter(raw, d, "d1")
    args = [*REPLAY_HEAD, "d1", "n1", "", "", "", ""]
    await call(raw, "replay_dead_letters", replay_keys(d, k, [("d1", "n1")]), args)

    again = await call(raw, "replay_dead_letters", replay_keys(d, k, [("d1", "n1")]), args)

    assert again == ["waiting"]
    assert await raw.lrange(k.wait, 0, -1) == ["n1"]


async def test_a_bulk_replay_from_a_clock_behind_its_start_marks_its_replays_at_the_start(
    raw: aioredis.Redis, k: QueueKeys, d: QueueKeys
) -> None:
    # Given a dead letter, replayed by a resume of a bulk replay begun at NOW + 50 (by a
    # process whose clock was ahead of this one's)
    await make_dead_letter(raw, d, "d1")
    ahead = [*REPLAY_HEAD[:-2], NOW + 50, "", "d1", "n1", "", "", "", ""]
    assert await call(raw, "replay_dead_letters", replay_keys(d, k, [("d1", "n1")]), ahead) == [
        "waiting"
    ]  # fmt: skip

    # Then it counts as replayed since the run began: no later resume replays it again
    assert await raw.hget(d.job("d1"), "dlq:lastReplayedAt") == str(NOW + 50)
    # And its timeline tells the time of this process, as ever
    assert json.loads(await raw.hget(d.job("d1"), "dlq:timeline") or "[]")[-1]["at"] == NOW


async def test_a_tally_counts_each_dead_letter_replayed_once_and_no_refusal(
    raw: aioredis.Redis, k: QueueKeys, d: QueueKeys
) -> None:
    # Given two dead letters, replayed in one call that counts in tally "t"
    await make_dead_letter(raw, d, "d1")
    await make_dead_letter(raw, d, "d2")
    pairs = [("d1", "n1"), ("d2", "n2")]
    args = [*REPLAY_HEAD[:-1], "t", "d1", "n1", "", "", "", "", "d2", "n2", "", "", "", ""]
    assert await call(raw, "replay_dead_letters", replay_keys(d, k, pairs), args) == [
        "waiting", "waiting"
    ]  # fmt: skip

    # When the same call is sent again (its reply lost), and d1 is replayed anew (refused:
    # it is processing)
    again = await call(raw, "replay_dead_letters", replay_keys(d, k, pairs), args)
    other = [*REPLAY_HEAD[:-1], "t", "d1", "n3", "", "", "", ""]
    refused = await call(raw, "replay_dead_letters", replay_keys(d, k, [("d1", "n3")]), other)

    # Then the tally counts the two replays once, and it expires a day after its last count
    assert (again, refused) == (["waiting", "waiting"], [-6])
    assert await raw.get(d.dl_tally("t")) == "2"
    assert 0 < await raw.pttl(d.dl_tally("t")) <= 24 * 3600 * 1000


async def test_a_dead_letter_replayed_since_the_given_moment_is_left_alone(
    raw: aioredis.Redis, k: QueueKeys, d: QueueKeys
) -> None:
    # Given two pending dead letters: d1 replayed at NOW - 5 (its replay failed back, so it
    # is pending again), d2 replayed at NOW - 15
    await make_dead_letter(raw, d, "d1", **{"dlq:lastReplayedAt": NOW - 5})
    await make_dead_letter(raw, d, "d2", **{"dlq:lastReplayedAt": NOW - 15})
    since = [*REPLAY_HEAD[:-2], NOW - 10, ""]

    # When both are replayed, leaving alone what was replayed from NOW - 10 on
    pairs = [("d1", "n1"), ("d2", "n2")]
    args = [*since, "d1", "n1", "", "", "", "", "d2", "n2", "", "", "", ""]
    result = await call(raw, "replay_dead_letters", replay_keys(d, k, pairs), args)

    # Then d1 is untouched (JOB_STATE), and d2, replayed before, goes again
    assert result == [-6, "waiting"]
    assert await raw.hget(d.job("d1"), "dlq:status") in (None, "pending")
    assert await raw.zrange(d.dl_index("s", "pending"), 0, -1) == ["d1"]
    assert await raw.lrange(k.wait, 0, -1) == ["n2"]
    assert not await raw.exists(k.job("n1"))


async def test_replay_codes_for_missing_plain_and_taken_entries(
    raw: aioredis.Redis, k: QueueKeys, d: QueueKeys
) -> None:
    await raw.hset(d.job("plain"), mapping={"name": "n", "data": "1"})
    await make_dead_letter(raw, d, "taken")
    claimed = await call(
        raw, "claim_jobs", [*d.group, d.reply("w9", "claim")], [NOW, "w9", 30_000, 1, MAXLEN, "c1"]
    )
    assert claimed[1][0] == "taken"  # a worker of the DLQ holds it: it left the store

    result = await call(
        raw,
        "replay_dead_letters",
        replay_keys(d, k, [("missing", "n1"), ("plain", "n2"), ("taken", "n3")]),
        [*REPLAY_HEAD, "missing", "n1", "", "", "", "", "plain", "n2", "", "", "", "",
         "taken", "n3", "", "", "", ""],
    )  # fmt: skip

    assert result == [-1, -4, -6]
    assert await raw.exists(d.job("plain"))
    assert await raw.exists(d.job("taken"))
    assert not await raw.exists(k.wait)
    assert await raw.zcard(d.dl_index("s", "pending")) == 0


async def test_purge_codes_event_and_counts(raw: aioredis.Redis, d: QueueKeys) -> None:
    await make_dead_letter(raw, d, "d1")
    await make_dead_letter(raw, d, "d2")
    await raw.hset(d.job("plain"), mapping={"name": "n", "data": "1"})

    result = await call(
        raw,
        "purge_dead_letters",
        [d.dl, d.events, d.meta, d.job("d1"), d.job("plain"), d.job("zz")],
        [MAXLEN, "", 2000, "", "d1", "plain", "zz"],
    )

    assert result == [1, -4, -1]
    assert not await raw.exists(d.job("d1"))
    assert await raw.exists(d.job("plain"))
    assert await raw.zrange(d.dl_index("s", "pending"), 0, -1) == ["d2"]
    assert list((await raw.hgetall(d.dl_counts)).values()) == ["1"]
    assert (await events(raw, d))[-1] == {"event": "purged", "count": "1", "jobIds": "d1"}


async def test_purge_and_replay_stop_when_their_time_budget_runs_out(
    raw: aioredis.Redis, k: QueueKeys, d: QueueKeys
) -> None:
    # Given ten dead letters
    ids = [f"d{i}" for i in range(10)]
    for dl_id in ids:
        await make_dead_letter(raw, d, dl_id)

    # When a purge of the first five and a replay of the last five are each sent with a budget
    # of one microsecond (spent by the time the clock is read, at the fourth dead letter)
    purged = await call(raw, "purge_dead_letters", [d.dl, d.events, d.meta,
                        *(d.job(i) for i in ids[:5])], [MAXLEN, "", 1, "", *ids[:5]])  # fmt: skip
    pairs = [(dl_id, f"n{dl_id}") for dl_id in ids[5:]]
    head = [*REPLAY_HEAD[:-3], 1, "", ""]
    replayed = await call(raw, "replay_dead_letters", replay_keys(d, k, pairs),
                          [*head, *(v for p in pairs for v in (*p, "", "", "", ""))])  # fmt: skip

    # Then each handled the first four only, and left the fifth as it was
    assert purged == [1, 1, 1, 1]
    assert replayed == ["waiting"] * 4
    assert await raw.zrange(d.dl_index("s", "pending"), 0, -1) == ["d4", "d9"]
    assert await raw.lrange(k.wait, 0, -1) == ["nd8", "nd7", "nd6", "nd5"]
    assert await raw.hget(d.meta, "count:purged") == "4"


async def test_purge_of_the_last_of_a_value_forgets_the_value(
    raw: aioredis.Redis, d: QueueKeys
) -> None:
    await make_dead_letter(raw, d, "d1", name="sms")
    await make_dead_letter(raw, d, "d2")

    await call(
        raw,
        "purge_dead_letters",
        [d.dl, d.events, d.meta, d.job("d1")],
        [MAXLEN, "", 2000, "", "d1"],
    )

    assert await raw.zrange(d.dl_values("n"), 0, -1) == ["email"]
    assert len(await raw.hgetall(d.dl_counts)) == 1
    assert not await raw.exists(d.dl_index("n", "sms"))
    assert not await raw.hexists(d.dl_origins, "orig-d1")


async def test_clean_waiting_on_a_dead_letter_queue_removes_old_dead_letters(
    raw: aioredis.Redis, d: QueueKeys
) -> None:
    await make_dead_letter(raw, d, "old")
    await make_dead_letter(raw, d, "new", **{"dlq:deadLetteredAt": NOW + 100})

    removed, resume, _ = await call(
        raw, "clean_jobs", [*d.group, d.completed, d.failed],
        ["waiting", NOW + 50, 10, MAXLEN, 4000, 0, 0, 1],
    )  # fmt: skip

    assert (removed, resume) == (["old"], -1)
    assert await raw.zrange(d.dl_index("s", "pending"), 0, -1) == ["new"]
    assert not await raw.exists(d.job("old"))


async def test_clean_waiting_for_a_drain_leaves_the_dead_letters(
    raw: aioredis.Redis, d: QueueKeys
) -> None:
    await make_dead_letter(raw, d, "old")
    await raw.hset(d.job("ready"), mapping={"name": "n", "data": "1", "timestamp": NOW})
    await raw.lpush(d.wait, "ready")

    removed, resume, _ = await call(
        raw, "clean_jobs", [*d.group, d.completed, d.failed],
        ["waiting", NOW + 50, 10, MAXLEN, 4000, 0, 0, 0],
    )  # fmt: skip

    assert (removed, resume) == (["ready"], -1)
    assert await raw.zrange(d.dl_index("s", "pending"), 0, -1) == ["old"]
    assert await raw.exists(d.job("old"))


async def test_remove_job_takes_a_dead_letter_out_of_the_store(
    raw: aioredis.Redis, d: QueueKeys
) -> None:
    await make_dead_letter(raw, d, "d1")

    code = await call(
        raw, "remove_job", [*d.group, d.completed, d.failed, d.job("d1")], ["d1", MAXLEN]
    )

    assert code == 1
    assert await raw.zcard(d.dl_index("s", "pending")) == 0
    assert await raw.hlen(d.dl_counts) == 0
